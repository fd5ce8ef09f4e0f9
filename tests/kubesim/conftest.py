"""Shared kubesim fixtures: one API-only server per module (fast), clients built from its kubeconfig, and a
small admission webhook over real TLS for the admission tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from kubesim.clock import run_virtual
from kubesim.testing import KubesimServer
from tests.kubesim.controllers.ctrl_harness import Run
from tests.kubesim.kubesim_webhook_fixture import FakeWebhook, running_webhook
from tests.support.kube import kube_client


@pytest.fixture
def run_virtual_time() -> Run:
    """Run one coroutine on a fresh `kubesim.clock.VirtualTimeLoop`: for a `cluster(virtual_time=True)`
    (tests/kubesim/controllers/ctrl_harness.py), whose simulated durations then come out exact."""
    return run_virtual


@pytest.fixture(scope="module")
def api_only_sim() -> Iterator[KubesimServer]:
    """kubesim without controllers: objects stay exactly as the test leaves them."""
    with KubesimServer(nodes=4, pools=2, controllers=False, watch_history=200, bookmark_interval=0.2) as sim:
        yield sim


@pytest.fixture(scope="module")
def kube(api_only_sim: KubesimServer) -> Iterator[client.ApiClient]:
    with kube_client(api_only_sim.kubeconfig_path) as api_client:
        yield api_client


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeWebhook]:
    """A test admission webhook over real TLS (its behaviour set per test)."""
    with running_webhook(tmp_path_factory.mktemp("webhook")) as hook:
        yield hook
