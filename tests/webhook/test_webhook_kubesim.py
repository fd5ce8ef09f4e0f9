"""The webhook's informers and live lookups against kubesim (the project's simulated API server),
reached through a kubeconfig as in a real deployment: what the fake-API tests cover, on the real thing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from kubesim.testing import KubesimServer
from placement.admission import LeaderStatus, PodPlan, plan_pod
from placement.constants import Strategy
from tests.support.metrics import sample
from tests.support.waiting import eventually
from tests.webhook.webhook_support import fixture_review, leader_from_fixture
from webhook.server import Webhook, build
from webhook.settings import WebhookSettings

POOL = "cloud.google.com/gke-nodepool"


@pytest.fixture
def kubesim() -> Iterator[KubesimServer]:
    with KubesimServer(nodes=4, pools=2, controllers=False) as sim:
        yield sim


def _plan() -> PodPlan:
    review = fixture_review("follower-pod.json")
    plan = plan_pod(review["request"]["object"], review["request"]["namespace"], Strategy.ELASTIC)
    assert isinstance(plan, PodPlan)
    return plan


def _create_bound_leader(sim: KubesimServer) -> tuple[str, str]:
    nodes = httpx.get(f"{sim.url}/api/v1/nodes").json()["items"]
    node = nodes[-1]
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    assert httpx.post(f"{sim.url}/api/v1/namespaces", json=namespace).status_code == 201
    leader = leader_from_fixture(node["metadata"]["name"])
    created = httpx.post(f"{sim.url}/api/v1/namespaces/team-a/pods", json=leader)
    assert created.status_code == 201, created.text
    return node["metadata"]["name"], node["metadata"]["labels"][POOL]


def test_leader_lookup_from_kubesim_via_kubeconfig(kubesim: KubesimServer) -> None:
    node_name, pool = _create_bound_leader(kubesim)
    webhook: Webhook = build(
        WebhookSettings(insecure_dev=True, kubeconfig=kubesim.kubeconfig_path, watch_timeout_seconds=5)
    )
    directory = webhook.directory
    # Before the informers run, the lookup is a miss answered live by kubesim.
    state = asyncio.run(directory.leader_state(_plan()))
    assert (state.status, state.node_name, state.domain) == (LeaderStatus.BOUND, node_name, pool)
    directory.start()
    try:
        eventually(directory.ready, "the informers synced")
        eventually(lambda: directory.from_cache(_plan()) is not None, "the bound leader cached")
        state = asyncio.run(directory.leader_state(_plan()))
        assert (state.status, state.domain) == (LeaderStatus.BOUND, pool)
        assert sample(webhook.metrics.registry, "exclusive_placement_leader_cache_total", result="hit") == 1
    finally:
        directory.stop()
