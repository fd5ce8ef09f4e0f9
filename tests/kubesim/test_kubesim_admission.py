"""Dynamic admission: kubesim calls registered webhook configurations over real TLS with their caBundle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from devstack.ports import free_port
from kubesim.testing import KubesimServer
from tests.kubesim.kubesim_webhook_fixture import FakeWebhook, register, webhook_entry
from tests.support.builders import make_pod
from tests.support.kube import as_body, error_status, kube_client, labels_of, name_of
from tests.support.waiting import eventually


@pytest.fixture
def sim() -> Iterator[KubesimServer]:
    with KubesimServer(nodes=4, pools=2, controllers=False) as server:
        yield server


@pytest.fixture
def kube(sim: KubesimServer) -> Iterator[client.ApiClient]:
    with kube_client(sim.kubeconfig_path) as api_client:
        yield api_client


def pod(name: str, **labels: str) -> dict[str, Any]:
    return make_pod(name, None).labels(labels).obj()


def test_mutating_webhook_patches_pods_and_validating_webhook_denies(
    sim: KubesimServer, kube: client.ApiClient, webhook: FakeWebhook
) -> None:
    register(
        kube,
        "mutating",
        "mutate",
        webhook_entry("mutate.kubesim.test", f"{webhook.url}/mutate", webhook.ca_bundle),
    )
    register(
        kube,
        "validating",
        "deny",
        webhook_entry("deny.kubesim.test", f"{webhook.url}/deny", webhook.ca_bundle),
    )
    core = client.CoreV1Api(kube)

    created = core.create_namespaced_pod("default", as_body(pod("allowed")))
    assert labels_of(created)["mutated"] == "1"
    raw = httpx.post(f"{sim.url}/api/v1/namespaces/default/pods", json=pod("warned"))
    assert raw.status_code == 201
    assert raw.headers["warning"] == '299 - "mutated by test"'

    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_pod("default", as_body(pod("refused", deny="yes")))
    body = error_status(info.value)
    assert info.value.status == 403
    assert body["message"] == 'admission webhook "deny.kubesim.test" denied the request: denied by test'
    assert body["reason"] == "Forbidden"

    review = webhook.reviews[-1]["request"]
    assert review["operation"] == "CREATE"
    assert review["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert review["namespace"] == "default"
    stats = sim.stats()
    assert stats["pods"] == stats["pods"] | {"create_accepted": 2, "create_rejected": 1}
    assert stats["admission"] == {"calls": 6, "denied": 1, "errors": 0}


def test_generate_name_pods_reach_webhooks_with_an_empty_name(
    kube: client.ApiClient, webhook: FakeWebhook
) -> None:
    register(
        kube,
        "mutating",
        "mutate",
        webhook_entry("mutate.kubesim.test", f"{webhook.url}/mutate", webhook.ca_bundle),
    )
    created = client.CoreV1Api(kube).create_namespaced_pod(
        "default",
        as_body(
            {"metadata": {"generateName": "gen-"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
        ),
    )
    assert name_of(created).startswith("gen-")
    request = webhook.reviews[-1]["request"]
    assert request["name"] == ""
    assert request["object"]["metadata"].get("name") in (None, "")


@pytest.mark.parametrize(("policy", "expected_status"), [("Ignore", 201), ("Fail", 500)])
def test_failure_policy_when_the_webhook_is_down(
    sim: KubesimServer, kube: client.ApiClient, webhook: FakeWebhook, policy: str, expected_status: int
) -> None:
    down = f"https://127.0.0.1:{free_port()}/deny"
    register(
        kube,
        "validating",
        "down",
        webhook_entry("down.kubesim.test", down, webhook.ca_bundle, failurePolicy=policy),
    )
    core = client.CoreV1Api(kube)
    if expected_status == 201:
        assert name_of(core.create_namespaced_pod("default", as_body(pod("p")))) == "p"
        assert sim.stats()["pods"]["create_rejected"] == 0
    else:
        with pytest.raises(client.ApiException) as info:
            core.create_namespaced_pod("default", as_body(pod("p")))
        assert info.value.status == 500
        message = error_status(info.value)["message"]
        assert message.startswith('Internal error occurred: failed calling webhook "down.kubesim.test"')
        assert sim.stats()["pods"]["create_rejected"] == 1
    assert sim.stats()["admission"]["errors"] == 1


def test_selectors_scope_which_requests_are_sent(kube: client.ApiClient, webhook: FakeWebhook) -> None:
    register(
        kube,
        "mutating",
        "scoped",
        webhook_entry(
            "scoped.kubesim.test",
            f"{webhook.url}/mutate",
            webhook.ca_bundle,
            objectSelector={"matchLabels": {"opt-in": "yes"}},
            namespaceSelector={
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
                ]
            },
        ),
    )
    core = client.CoreV1Api(kube)
    assert "mutated" not in (labels_of(core.create_namespaced_pod("default", as_body(pod("plain", a="b")))))
    assert (
        labels_of(core.create_namespaced_pod("default", as_body(pod("opted", **{"opt-in": "yes"}))))[
            "mutated"
        ]
        == "1"
    )
    exempt = core.create_namespaced_pod("kube-system", as_body(pod("system", **{"opt-in": "yes"})))
    assert "mutated" not in labels_of(exempt)


def test_reinvocation_if_needed_reruns_an_earlier_webhook_once(
    kube: client.ApiClient, webhook: FakeWebhook
) -> None:
    first = webhook_entry(
        "a.kubesim.test", f"{webhook.url}/mutate", webhook.ca_bundle, reinvocationPolicy="IfNeeded"
    )
    register(kube, "mutating", "a-first", first)
    register(
        kube,
        "mutating",
        "b-second",
        webhook_entry("b.kubesim.test", f"{webhook.url}/mutate", webhook.ca_bundle),
    )
    created = client.CoreV1Api(kube).create_namespaced_pod("default", as_body(pod("again")))
    assert webhook.calls["mutate:again"] == 3
    assert labels_of(created)["mutated"] == "3"


def test_dry_run_is_refused_by_webhooks_with_side_effects(
    kube: client.ApiClient, webhook: FakeWebhook
) -> None:
    hook = webhook_entry(
        "effects.kubesim.test", f"{webhook.url}/mutate", webhook.ca_bundle, sideEffects="Some"
    )
    register(kube, "mutating", "effects", hook)
    with pytest.raises(client.ApiException) as info:
        client.CoreV1Api(kube).create_namespaced_pod("default", as_body(pod("dry")), dry_run="All")
    assert info.value.status == 400
    assert "does not support dry run" in error_status(info.value)["message"]


def test_controller_pod_creations_go_through_admission(tmp_path: Path, webhook: FakeWebhook) -> None:
    with (
        KubesimServer(nodes=2, pools=1, time_scale=0.01) as sim,
        kube_client(sim.kubeconfig_path) as api_client,
    ):
        register(
            api_client,
            "validating",
            "deny",
            webhook_entry("deny.kubesim.test", f"{webhook.url}/deny", webhook.ca_bundle),
        )
        job = {
            "metadata": {"name": "denied"},
            "spec": {
                "completions": 1,
                "parallelism": 1,
                "template": {
                    "metadata": {"labels": {"deny": "yes"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox:1.36"}],
                    },
                },
            },
        }
        client.BatchV1Api(api_client).create_namespaced_job("default", as_body(job))
        eventually(lambda: sim.stats()["pods"]["create_rejected"] >= 2, "two pod creations rejected", 20)
        stats = sim.stats()
    assert stats["pods"]["create_rejected"] >= 2
    assert stats["pods"]["create_accepted"] == 0
    assert stats["admission"]["denied"] == stats["pods"]["create_rejected"]
