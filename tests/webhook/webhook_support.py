"""Helpers for the webhook tests: fixture reviews, object builders, the fake API and the real app wired to it
(served in-process over ASGI; tests/webhook/test_webhook_tls.py is the one that goes through a real socket).

Imported as `tests.webhook.webhook_support`; `conftest.py` re-exports the pytest fixtures.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from placement.constants import JOB_NAME_LABEL, ROLE_LABEL, ROLE_LEADER
from tests.support.asgi import AsgiClient
from tests.support.fake_api import FakeKubeApi
from tests.support.waiting import eventually
from webhook.server import Webhook, build
from webhook.settings import WebhookSettings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "admission"
POOL = "cloud.google.com/gke-nodepool"


def fixture_review(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def leader_from_fixture(node_name: str | None) -> dict[str, Any]:
    """The fixture's leader pod as the API server stores it after our webhook labelled it."""
    pod: dict[str, Any] = fixture_review("leader-pod.json")["request"]["object"]
    pod["metadata"]["name"] = pod["metadata"]["generateName"] + "x7k2p"
    pod["metadata"]["labels"][ROLE_LABEL] = ROLE_LEADER
    assert pod["metadata"]["labels"][JOB_NAME_LABEL]
    if node_name is not None:
        pod["spec"]["nodeName"] = node_name
    pod["status"] = {"phase": "Running" if node_name else "Pending"}
    return pod


def jobset_of_fixture(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JobSet that owns jobset-child-job.json's Job, as the API server stores it."""
    owner = fixture_review("jobset-child-job.json")["request"]["object"]["metadata"]["ownerReferences"][0]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": "JobSet",
        "metadata": {"name": owner["name"], "namespace": "team-a", "uid": owner["uid"]},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2}], **(spec or {})},
    }


def node_obj(name: str, pool: str | None) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if pool is not None:
        labels[POOL] = pool
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


@dataclass
class Running:
    client: AsgiClient
    webhook: Webhook
    api: FakeKubeApi

    def post(self, endpoint: str, review: dict[str, Any]) -> dict[str, Any]:
        response = self.client.post(endpoint, json=review)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


def settings_for(server: str, **overrides: Any) -> WebhookSettings:
    options: dict[str, Any] = {
        "insecure_dev": True,
        "server": server,
        "watch_timeout_seconds": 5,
        "request_timeout_seconds": 5,
        **overrides,
    }
    return WebhookSettings(**options)


@pytest.fixture
def running(fake_api: FakeKubeApi) -> Iterator[Running]:
    webhook = build(settings_for(fake_api.url))
    with AsgiClient(webhook.app) as client:  # runs the app's lifespan: the informers start and stop
        eventually(lambda: client.get("/readyz").status_code == 200, "the webhook ready")
        yield Running(client, webhook, fake_api)
