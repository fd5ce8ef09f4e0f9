"""The webhook reads Kueue's queue of a queued exclusive workload's CREATE, over ASGI against the fake API
server serving Kueue's LocalQueues, ClusterQueues and ResourceFlavors: a ClusterQueue of TAS flavors only
(Kueue then places every workload with Topology Aware Scheduling) denies it; any failure to read admits it
with a warning; an UPDATE reads nothing. A plain exclusive Job that names no queue has its namespace's
`default` LocalQueue read (Kueue's LocalQueue defaulting): where it exists, or cannot be read, `elastic`
falls back to `gate` at full size."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest

from devstack.manifests import exclusive_jobset
from placement.constants import (
    ELASTIC_FALLBACK_ANNOTATION,
    KUEUE_QUEUE_NAME_LABEL,
    STRATEGY_ANNOTATION,
    TARGET_COMPLETIONS_ANNOTATION,
)
from placement.kueue import DEFAULT_LOCAL_QUEUE, KUEUE_GROUP, KUEUE_VERSION
from placement.kueue_tas import CLUSTER_QUEUES, LOCAL_QUEUES, RESOURCE_FLAVORS, QueueUnread
from placement.patch import apply
from tests.support.asgi import AsgiClient
from tests.support.fake_api import FakeKubeApi, Served
from tests.support.metrics import sample
from tests.support.waiting import eventually
from tests.webhook.test_webhook_jobset_validation import jobset_review
from tests.webhook.webhook_support import Running, fixture_review, settings_for
from webhook.kueue_queues import KueueQueues
from webhook.metrics import Metrics
from webhook.review import AdmissionReview, decode_patch
from webhook.server import build

KUEUE = f"{KUEUE_GROUP}/{KUEUE_VERSION}"
NAMESPACE = "team-a"
QUEUE_RESOURCES = (LOCAL_QUEUES, CLUSTER_QUEUES, RESOURCE_FLAVORS)
LOOKUP_TIMEOUT = 0.25


def kueue_object(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": KUEUE, "kind": kind, "metadata": meta, "spec": spec}


def serve_kueue(api: FakeKubeApi, *flavors: tuple[str, str | None]) -> None:
    """Kueue's queue resources, LocalQueue team-a/user-queue -> ClusterQueue gpu-queue -> `flavors`
    (name, Topology or None)."""
    api.serve(Served(KUEUE, LOCAL_QUEUES, "LocalQueue"))
    api.serve(Served(KUEUE, CLUSTER_QUEUES, "ClusterQueue", namespaced=False))
    api.serve(Served(KUEUE, RESOURCE_FLAVORS, "ResourceFlavor", namespaced=False))
    api.put(LOCAL_QUEUES, kueue_object("LocalQueue", "user-queue", {"clusterQueue": "gpu-queue"}, NAMESPACE))
    group = {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": name} for name, _ in flavors]}
    api.put(CLUSTER_QUEUES, kueue_object("ClusterQueue", "gpu-queue", {"resourceGroups": [group]}))
    for name, topology in flavors:
        spec = {"nodeLabels": {"pool": "gpu"}, **({"topologyName": topology} if topology else {})}
        api.put(RESOURCE_FLAVORS, kueue_object("ResourceFlavor", name, spec))


@pytest.fixture
def webhook(fake_api: FakeKubeApi) -> Iterator[Running]:
    built = build(settings_for(fake_api.url, live_lookup_timeout_seconds=LOOKUP_TIMEOUT))
    with AsgiClient(built.app) as client:
        eventually(lambda: client.get("/readyz").status_code == 200, "the webhook ready")
        yield Running(client, built, fake_api)


def queued_jobset() -> dict[str, Any]:
    jobset = exclusive_jobset("trainer", jobs=2, pods_per_job=2, namespace=NAMESPACE)
    jobset["metadata"]["labels"] = {KUEUE_QUEUE_NAME_LABEL: "user-queue"}
    return jobset


def queue_reads(api: FakeKubeApi) -> list[str]:
    return [call.what for resource in QUEUE_RESOURCES for call in api.calls_of("get", resource)]


def lookups(webhook: Running, result: str) -> float:
    return sample(
        webhook.webhook.metrics.registry, "exclusive_placement_kueue_queue_lookups_total", result=result
    )


def test_a_jobset_queued_where_kueue_places_everything_with_tas_is_denied(webhook: Running) -> None:
    serve_kueue(webhook.api, ("h100-tas", "pools"))
    response = webhook.post("/validate-jobsets", jobset_review(queued_jobset()))["response"]
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "LocalQueue team-a/user-queue feeds ClusterQueue gpu-queue" in message
    assert "(h100-tas (Topology pools))" in message
    assert queue_reads(webhook.api) == [
        "localqueues/user-queue",
        "clusterqueues/gpu-queue",
        "resourceflavors/h100-tas",
    ]
    assert lookups(webhook, "read") == 1


def test_a_jobset_queued_where_a_flavor_has_no_topology_is_allowed_without_a_warning(
    webhook: Running,
) -> None:
    serve_kueue(webhook.api, ("h100", None), ("h100-tas", "pools"))
    response = webhook.post("/validate-jobsets", jobset_review(queued_jobset()))["response"]
    assert response["allowed"] is True
    assert "warnings" not in response


def test_a_plain_exclusive_job_queued_where_kueue_places_everything_with_tas_is_denied(
    webhook: Running,
) -> None:
    serve_kueue(webhook.api, ("h100-tas", "pools"))
    review = fixture_review("indexed-job.json")
    review["request"]["object"]["metadata"]["labels"] = {KUEUE_QUEUE_NAME_LABEL: "user-queue"}
    review["request"]["namespace"] = NAMESPACE
    response = webhook.post("/mutate-jobs", review)["response"]
    assert response["allowed"] is False
    assert "ClusterQueue gpu-queue, whose flavors are all Topology Aware Scheduling flavors" in str(response)


@pytest.mark.parametrize("kueue_installed", [True, False], ids=["no such LocalQueue", "no Kueue"])
def test_nothing_to_read_is_nothing_to_check(webhook: Running, kueue_installed: bool) -> None:
    if kueue_installed:
        serve_kueue(webhook.api, ("h100-tas", "pools"))
    jobset = queued_jobset()
    jobset["metadata"]["labels"][KUEUE_QUEUE_NAME_LABEL] = "other-queue"
    response = webhook.post("/validate-jobsets", jobset_review(jobset))["response"]
    assert response["allowed"] is True
    assert "warnings" not in response
    assert lookups(webhook, "not_found") == 1


def test_a_queue_that_cannot_be_read_admits_the_jobset_with_a_warning(webhook: Running) -> None:
    serve_kueue(webhook.api, ("h100-tas", "pools"))
    webhook.api.fail_next(500, verb="get", resource=CLUSTER_QUEUES)
    response = webhook.post("/validate-jobsets", jobset_review(queued_jobset()))["response"]
    assert response["allowed"] is True
    (warning,) = response["warnings"]
    assert warning.startswith("exclusive placement: could not read Kueue's LocalQueue team-a/user-queue")
    assert "not checked whether Kueue places this workload with Topology Aware Scheduling" in warning
    assert lookups(webhook, "error") == 1


def test_a_local_queue_that_does_not_answer_admits_the_jobset_with_a_warning(webhook: Running) -> None:
    serve_kueue(webhook.api, ("h100-tas", "pools"))
    hold = webhook.api.hold_next(verb="get", resource=LOCAL_QUEUES)
    try:
        response = webhook.post("/validate-jobsets", jobset_review(queued_jobset()))["response"]
    finally:
        hold.release()
    assert response["allowed"] is True
    (warning,) = response["warnings"]
    assert warning.startswith("exclusive placement: could not read Kueue's LocalQueue team-a/user-queue")


def test_an_update_reads_no_queue(webhook: Running) -> None:
    serve_kueue(webhook.api, ("h100-tas", "pools"))
    jobset = queued_jobset()
    changed = {**jobset, "metadata": {**jobset["metadata"], "annotations": {}}}
    review = jobset_review(jobset, operation="UPDATE", old=changed)
    assert webhook.post("/validate-jobsets", review)["response"]["allowed"] is True
    assert queue_reads(webhook.api) == []


class StuckQueueApi:
    """A Kueue whose LocalQueue GET answers only once released."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def get_local_queue(self, namespace: str, name: str) -> dict[str, Any]:
        self.released.wait(10)
        return kueue_object("LocalQueue", name, {"clusterQueue": "gpu-queue"}, namespace)

    def get_cluster_queue(self, name: str) -> dict[str, Any]:
        return kueue_object("ClusterQueue", name, {})

    def get_resource_flavor(self, name: str) -> dict[str, Any]:
        return kueue_object("ResourceFlavor", name, {})


def test_the_whole_read_is_bounded_by_its_budget() -> None:
    api = StuckQueueApi()
    metrics = Metrics()

    async def read_then_release() -> object:
        try:
            return await KueueQueues(api, metrics, budget=0.05).read(NAMESPACE, "user-queue")
        finally:
            api.released.set()  # before asyncio.run waits for the worker thread

    queue = asyncio.run(read_then_release())
    assert queue == QueueUnread("team-a/user-queue", "no answer within 0.05 s")
    assert sample(metrics.registry, "exclusive_placement_kueue_queue_lookups_total", result="error") == 1


def default_local_queue(api: FakeKubeApi, cluster_queue: str = "gpu-queue") -> None:
    spec = {"clusterQueue": cluster_queue}
    api.put(LOCAL_QUEUES, kueue_object("LocalQueue", DEFAULT_LOCAL_QUEUE, spec, NAMESPACE))


def admit_unqueued_plain_job(webhook: Running) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fixture's exclusive Indexed Job of 3 pods in team-a, naming no LocalQueue: (response, the Job as
    admitted)."""
    review = fixture_review("indexed-job.json")
    answer = webhook.post("/mutate-jobs", review)
    admitted = apply(review["request"]["object"], decode_patch(cast(AdmissionReview, answer)))
    return answer["response"], admitted


def test_a_plain_job_naming_no_queue_where_kueue_defaults_it_to_a_local_queue_falls_back_to_gate(
    webhook: Running,
) -> None:
    serve_kueue(webhook.api, ("h100", None))
    default_local_queue(webhook.api)
    response, admitted = admit_unqueued_plain_job(webhook)
    assert response["allowed"] is True
    (warning,) = response["warnings"]
    assert "its namespace has LocalQueue team-a/default: Kueue's LocalQueue defaulting" in warning
    assert "using gate" in warning
    assert (admitted["spec"]["completions"], admitted["spec"]["parallelism"]) == (3, 3)
    assert "LocalQueue defaulting" in admitted["metadata"]["annotations"][ELASTIC_FALLBACK_ANNOTATION]
    assert TARGET_COMPLETIONS_ANNOTATION not in admitted["metadata"]["annotations"]
    assert admitted["spec"]["template"]["metadata"]["annotations"][STRATEGY_ANNOTATION] == "gate"
    assert queue_reads(webhook.api) == [
        "localqueues/default",
        "clusterqueues/gpu-queue",
        "resourceflavors/h100",
    ]


def test_a_default_local_queue_whose_cluster_queue_does_not_exist_still_queues_the_job(
    webhook: Running,
) -> None:
    serve_kueue(webhook.api, ("h100", None))
    default_local_queue(webhook.api, cluster_queue="not-yet-created")
    response, admitted = admit_unqueued_plain_job(webhook)
    assert response["allowed"] is True
    assert (admitted["spec"]["completions"], admitted["spec"]["parallelism"]) == (3, 3)
    assert lookups(webhook, "read") == 1


@pytest.mark.parametrize("kueue_installed", [True, False], ids=["no default LocalQueue", "no Kueue"])
def test_a_plain_job_naming_no_queue_without_a_default_local_queue_is_shrunk(
    webhook: Running, kueue_installed: bool
) -> None:
    if kueue_installed:
        serve_kueue(webhook.api, ("h100", None))
    response, admitted = admit_unqueued_plain_job(webhook)
    assert response["allowed"] is True
    assert "warnings" not in response
    assert (admitted["spec"]["completions"], admitted["spec"]["parallelism"]) == (1, 1)
    assert admitted["metadata"]["annotations"][TARGET_COMPLETIONS_ANNOTATION] == "3"
    assert lookups(webhook, "not_found") == 1


def test_a_plain_job_naming_no_queue_where_the_default_one_places_everything_with_tas_is_denied(
    webhook: Running,
) -> None:
    serve_kueue(webhook.api, ("h100-tas", "pools"))
    default_local_queue(webhook.api)
    response, _ = admit_unqueued_plain_job(webhook)
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "queue-name=default (none set: Kueue's LocalQueue defaulting sets it)" in message
    assert "LocalQueue team-a/default feeds ClusterQueue gpu-queue" in message


def test_a_default_local_queue_that_cannot_be_read_falls_back_to_gate_with_both_warnings(
    webhook: Running,
) -> None:
    serve_kueue(webhook.api, ("h100", None))
    default_local_queue(webhook.api)
    webhook.api.fail_next(500, verb="get", resource=LOCAL_QUEUES)
    response, admitted = admit_unqueued_plain_job(webhook)
    assert response["allowed"] is True
    assert (admitted["spec"]["completions"], admitted["spec"]["parallelism"]) == (3, 3)
    unread, fallback = response["warnings"]
    assert unread.startswith("exclusive placement: could not read Kueue's LocalQueue team-a/default")
    assert "LocalQueue team-a/default could not be read" in fallback
    assert "using gate" in fallback


def test_a_jobset_child_job_reads_no_queue(webhook: Running) -> None:
    serve_kueue(webhook.api, ("h100", None))
    default_local_queue(webhook.api)
    review = fixture_review("indexed-job.json")
    job = review["request"]["object"]
    job["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "trainer",
            "uid": "u-1",
            "controller": True,
        }
    ]
    webhook.post("/mutate-jobs", review)
    assert queue_reads(webhook.api) == []
