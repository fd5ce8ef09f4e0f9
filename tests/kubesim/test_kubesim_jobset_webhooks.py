"""JobSet's pod webhooks in kubesim's admission chain: served in-process by the JobSet manager, called at
the place their configuration names give them among external webhooks, denying as upstream's would, and
counted apart (`/debug/stats` `jobset_webhooks`); `--jobset-webhooks false` turns them off."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
from kubernetes import client

from kubesim.__main__ import build_parser, options_from_args
from kubesim.apiserver.server import ApiServer
from kubesim.controllers.informer import Informer
from kubesim.controllers.jobset_webhooks import JobSetPodWebhooks, pod_webhook_configurations
from kubesim.interface import KubeApi, WebhookReply
from kubesim.testing import KubesimProcess, KubesimServer
from tests.kubesim.kubesim_webhook_fixture import FakeWebhook, register, webhook_entry
from tests.support.kube import as_body, error_status, kube_client, labels_of

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
PRIORITY = "jobset.sigs.k8s.io/priority"
NOT_SET = 'admission webhook "vpod.kb.io" denied the request: follower pod node selector not set'


def jobset_pod(name: str, *, follower: bool = False) -> dict[str, Any]:
    """A pod as JobSet's child Jobs make them; a follower (index 1) uses exclusive placement."""
    labels = {
        JOBSET_NAME: "js",
        "jobset.sigs.k8s.io/replicatedjob-name": "w",
        "jobset.sigs.k8s.io/job-index": "0",
    }
    annotations = {JOBSET_NAME: "js"}
    if follower:
        annotations |= {
            "alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool",
            "batch.kubernetes.io/job-completion-index": "1",
        }
    return {
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
    }


@pytest.fixture
def sim() -> Iterator[KubesimServer]:
    with KubesimServer(nodes=4, pools=2) as server:
        yield server


@pytest.fixture
def kube(sim: KubesimServer) -> Iterator[client.ApiClient]:
    with kube_client(sim.kubeconfig_path) as api_client:
        yield api_client


def test_mpod_runs_between_the_external_configurations_its_name_sorts_between(
    sim: KubesimServer, kube: client.ApiClient, webhook: FakeWebhook
) -> None:
    url = f"{webhook.url}/mutate"
    register(
        kube, "mutating", "exclusive-placement", webhook_entry("before.kubesim.test", url, webhook.ca_bundle)
    )
    register(kube, "mutating", "zz-after", webhook_entry("after.kubesim.test", url, webhook.ca_bundle))
    sim.reset_stats()

    created = client.CoreV1Api(kube).create_namespaced_pod("default", as_body(jobset_pod("ordered")))

    seen = [
        r["request"]["object"]["metadata"]["labels"]
        for r in webhook.reviews
        if r["request"]["name"] == "ordered"
    ]
    assert [PRIORITY in labels for labels in seen] == [False, True]  # JobSet's mpod.kb.io ran in between
    assert labels_of(created)[PRIORITY] == "0"
    assert labels_of(created)["mutated"] == "2"
    stats = sim.stats()
    assert stats["admission"] == {"calls": 2, "denied": 0, "errors": 0}  # external calls only
    assert stats["jobset_webhooks"] == {"calls": 2, "denied": 0}  # mpod.kb.io + vpod.kb.io


def test_a_follower_without_a_scheduled_leader_is_denied_as_jobset_denies_it(
    sim: KubesimServer, kube: client.ApiClient
) -> None:
    sim.reset_stats()
    with pytest.raises(client.ApiException) as info:
        client.CoreV1Api(kube).create_namespaced_pod(
            "default", as_body(jobset_pod("follower", follower=True))
        )
    body = error_status(info.value)
    assert (info.value.status, body["reason"], body["message"]) == (403, "Forbidden", NOT_SET)
    stats = sim.stats()
    assert stats["jobset_webhooks"] == {"calls": 2, "denied": 1}
    assert stats["admission"] == {"calls": 0, "denied": 0, "errors": 0}
    assert stats["pods"]["create_rejected"] == 1


def test_pods_outside_jobset_are_never_sent_to_jobsets_webhooks(
    sim: KubesimServer, kube: client.ApiClient
) -> None:
    sim.reset_stats()
    plain = jobset_pod("plain")
    plain["metadata"]["labels"].pop(JOBSET_NAME)  # the objectSelector reads the label
    client.CoreV1Api(kube).create_namespaced_pod("default", as_body(plain))
    assert sim.stats()["jobset_webhooks"] == {"calls": 0, "denied": 0}


def test_serve_flag_turns_jobsets_webhooks_off() -> None:
    args = build_parser().parse_args(["serve", "--jobset-webhooks", "false"])
    assert options_from_args(args).controller_overrides == {"jobset_webhooks": False}
    with KubesimProcess(nodes=2, pools=1, jobset_webhooks=False) as proc:
        with kube_client(proc.kubeconfig_path) as api_client:
            client.CoreV1Api(api_client).create_namespaced_pod(
                "default", as_body(jobset_pod("follower", follower=True))
            )
        assert proc.stats()["jobset_webhooks"] == {"calls": 0, "denied": 0}


# --- the admission chain's in-process registry --------------------------------------------------------


def _configuration(name: str, webhook: str) -> dict[str, Any]:
    rules = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]
    return {
        "metadata": {"name": name},
        "webhooks": [{"name": webhook, "rules": rules, "sideEffects": "None"}],
    }


def test_in_process_configurations_are_ordered_by_name_and_can_be_removed() -> None:
    async def scenario() -> None:
        server = ApiServer(seed=0)
        order: list[str] = []

        def recorder(name: str) -> Any:
            async def handle(obj: dict[str, Any]) -> WebhookReply:
                order.append(name)
                obj["metadata"].setdefault("labels", {})[name] = "seen"
                return WebhookReply(obj=obj)

            return handle

        remove = {
            name: server.admission.serve_in_process(
                _configuration(name, f"{name}.test"), {f"{name}.test": recorder(name)}, mutating=True
            )
            for name in ("zeta", "alpha", "mid")
        }
        pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
        created = await server.create("pods", pod, namespace="default")
        assert order == ["alpha", "mid", "zeta"]
        assert {k: v for k, v in created["metadata"]["labels"].items()} == {
            "alpha": "seen",
            "mid": "seen",
            "zeta": "seen",
        }

        remove["mid"]()
        order.clear()
        await server.create("pods", {**pod, "metadata": {"name": "q"}}, namespace="default")
        assert order == ["alpha", "zeta"]
        with pytest.raises(ValueError, match="already served"):
            server.admission.serve_in_process(
                _configuration("alpha", "alpha.test"), {"alpha.test": recorder("a")}, mutating=True
            )
        with pytest.raises(ValueError, match="no in-process handler"):
            server.admission.serve_in_process(_configuration("other", "other.test"), {}, mutating=False)
        assert server.stats.admission_calls == 0
        await server.aclose()

    asyncio.run(scenario())


# --- cost (printed with -s, never asserted) ------------------------------------------------------------

CREATES = 300


def _child_pod(job: int, index: int) -> dict[str, Any]:
    labels = {
        JOBSET_NAME: "js",
        "jobset.sigs.k8s.io/replicatedjob-name": "w",
        "jobset.sigs.k8s.io/job-index": str(job),
    }
    annotations = {
        JOBSET_NAME: "js",
        "alpha.jobset.sigs.k8s.io/exclusive-topology": "pool",
        "batch.kubernetes.io/job-completion-index": str(index),
    }
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": f"js-w-{job}",
        "uid": f"uid-{job}",
        "controller": True,
    }
    meta = {
        "name": f"js-w-{job}-{index}-abcde",
        "namespace": "default",
        "labels": labels,
        "annotations": annotations,
    }
    return {
        "metadata": {**meta, "ownerReferences": [owner]},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }


async def _creates_ms(served: bool, index: int) -> tuple[float, int]:
    """ms per create of `CREATES` child-Job pods of completion `index` (1: each leader is in the cache)."""
    server = ApiServer(seed=0)
    pods, nodes = Informer(cast(KubeApi, None), "pods"), Informer(cast(KubeApi, None), "nodes")
    nodes.assume({"metadata": {"name": "n", "labels": {"pool": "p"}}})
    for job in range(CREATES):
        pods.assume({**_child_pod(job, 0), "spec": {"nodeName": "n"}})
    pods.synced.set()
    nodes.synced.set()
    hooks = JobSetPodWebhooks(pods=pods, nodes=nodes, stats=server.stats)
    if served:
        for configuration, mutating in pod_webhook_configurations():
            server.admission.serve_in_process(configuration, hooks.handlers(), mutating=mutating)
    start = time.perf_counter()
    for job in range(CREATES):
        await server.create("pods", _child_pod(job, index), namespace="default", copy=False)
    elapsed = (time.perf_counter() - start) / CREATES * 1000
    await server.aclose()
    return elapsed, server.stats.jobset_webhook_calls


def test_jobset_webhooks_cost_per_pod_create() -> None:
    figures = {}
    for what, index in (("leader", 0), ("follower", 1)):
        bare, bare_calls = asyncio.run(_creates_ms(False, index))
        served, calls = asyncio.run(_creates_ms(True, index))
        assert (bare_calls, calls) == (0, 2 * CREATES)
        figures[what] = (bare, served)
    print(
        "JobSet's in-process pod webhooks: "
        + ", ".join(
            f"{what} {bare:.3f} -> {served:.3f} ms/create" for what, (bare, served) in figures.items()
        )
    )
