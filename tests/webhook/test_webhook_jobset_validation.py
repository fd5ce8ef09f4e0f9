"""/validate-jobsets and the topology warning, over ASGI against the fake API server with node pools; the
node label keys kept from the informer's events."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.manifests import exclusive_jobset
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    GKE_NODEPOOL_LABEL,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    JOBSET_GROUP,
    JOBSET_KIND,
    JOBSET_VERSION,
    RESIZE_LABEL,
    STRATEGY_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from placement.patch import apply
from tests.support.asgi import AsgiClient
from tests.support.fake_api import FakeKubeApi
from tests.support.waiting import eventually
from tests.webhook.webhook_support import Running, fixture_review, jobset_of_fixture, node_obj, settings_for
from webhook.node_labels import NodeLabelKeys
from webhook.review import decode_patch
from webhook.server import build


@pytest.fixture
def with_pools(fake_api: FakeKubeApi) -> Iterator[Running]:
    """The webhook on a cluster of two node pools (labelled GKE_NODEPOOL_LABEL)."""
    for name, pool in (("node-a", "pool-a"), ("node-b", "pool-b")):
        fake_api.put("nodes", node_obj(name, pool))
    webhook = build(settings_for(fake_api.url))
    with AsgiClient(webhook.app) as client:
        eventually(lambda: client.get("/readyz").status_code == 200, "the webhook ready")
        eventually(lambda: GKE_NODEPOOL_LABEL in webhook.node_labels.label_keys(), "node labels known")
        yield Running(client, webhook, fake_api)


def jobset_review(jobset: dict[str, Any], operation: str = "CREATE", old: Any = None) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": JOBSET_GROUP, "version": JOBSET_VERSION, "kind": JOBSET_KIND},
            "resource": {"group": JOBSET_GROUP, "version": JOBSET_VERSION, "resource": "jobsets"},
            "namespace": "team-a",
            "operation": operation,
            "object": jobset,
            "oldObject": old,
        },
    }


def test_a_jobset_with_an_unknown_strategy_is_denied_with_the_valid_values(with_pools: Running) -> None:
    review = jobset_review(exclusive_jobset("trainer", jobs=2, pods_per_job=2, strategy="fastest"))
    response = with_pools.post("/validate-jobsets", review)["response"]
    assert response["allowed"] is False
    assert response["uid"] == review["request"]["uid"]
    message = response["status"]["message"]
    assert "unknown exclusive placement strategy 'fastest'" in message
    assert "valid values: elastic, gate, scheduling-gate, affinity" in message


def test_a_malformed_all_or_nothing_is_denied_and_a_valid_jobset_allowed(with_pools: Running) -> None:
    jobset = exclusive_jobset("trainer", jobs=2, pods_per_job=2)
    valid = jobset_review(jobset)
    assert with_pools.post("/validate-jobsets", valid)["response"] == {
        "uid": valid["request"]["uid"],
        "allowed": True,
    }
    jobset["metadata"]["annotations"][ALL_OR_NOTHING_ANNOTATION] = "yes"
    response = with_pools.post("/validate-jobsets", jobset_review(jobset))["response"]
    assert response["allowed"] is False
    assert 'valid values: "true", "false"' in response["status"]["message"]


def test_an_update_that_leaves_the_annotations_alone_is_allowed(with_pools: Running) -> None:
    broken = exclusive_jobset("trainer", jobs=2, pods_per_job=2, strategy="fastest")
    review = jobset_review(broken, operation="UPDATE", old=broken)
    assert with_pools.post("/validate-jobsets", review)["response"]["allowed"] is True


def test_a_topology_key_no_node_carries_is_warned_about_on_jobsets_and_jobs(with_pools: Running) -> None:
    jobset = exclusive_jobset("trainer", jobs=2, pods_per_job=2, topology_key="cloud.google.com/gke-nodepol")
    response = with_pools.post("/validate-jobsets", jobset_review(jobset))["response"]
    assert response["allowed"] is True
    assert response["warnings"] == [
        "exclusive placement: no node carries the label cloud.google.com/gke-nodepol (the topology key), so "
        f"the leader cannot be scheduled until one does; did you mean {GKE_NODEPOOL_LABEL}?"
    ]
    job = fixture_review("indexed-job.json")
    assert (
        job["request"]["object"]["metadata"]["annotations"][TOPOLOGY_ANNOTATION]
        == "topology.kubernetes.io/zone"
    )
    job_response = with_pools.post("/mutate-jobs", job)["response"]
    assert "no node carries the label topology.kubernetes.io/zone" in job_response["warnings"][-1]


def test_other_kinds_and_operations_are_out_of_scope(with_pools: Running) -> None:
    review = jobset_review(exclusive_jobset("trainer", jobs=1, pods_per_job=1, strategy="fastest"), "DELETE")
    assert with_pools.post("/validate-jobsets", review)["response"]["allowed"] is True


@pytest.fixture
def gpu_pools(fake_api: FakeKubeApi) -> Iterator[Running]:
    """The webhook on 2 node pools of 2 nodes x 8 GPUs each (allocatable, as a kubelet reports it)."""
    for pool in ("pool-a", "pool-b"):
        for index in range(2):
            node = node_obj(f"{pool}-{index}", pool)
            node["status"] = {"allocatable": {"cpu": "32", GPU_RESOURCE: "8", "pods": "110"}}
            fake_api.put("nodes", node)
    webhook = build(settings_for(fake_api.url))
    with AsgiClient(webhook.app) as client:
        eventually(lambda: client.get("/readyz").status_code == 200, "the webhook ready")
        eventually(lambda: len(webhook.node_labels.rooms()) == 4, "the nodes' room known")
        yield Running(client, webhook, fake_api)


def test_a_jobset_of_more_exclusive_jobs_than_pools_is_told_at_admission(gpu_pools: Running) -> None:
    jobset = exclusive_jobset("trainer", jobs=3, pods_per_job=2)
    response = gpu_pools.post("/validate-jobsets", jobset_review(jobset))["response"]
    assert response["allowed"] is True
    assert response["warnings"] == [
        f"exclusive placement: JobSet trainer: 3 Jobs need 3 {GKE_NODEPOOL_LABEL} domains; 2 exist: they "
        "can never all run at once (all-or-nothing: it never starts)"
    ]


def test_a_job_too_large_for_any_pool_is_told_at_admission(gpu_pools: Running) -> None:
    jobset = exclusive_jobset("trainer", jobs=2, pods_per_job=8, gpus_per_pod=4)
    response = gpu_pools.post("/validate-jobsets", jobset_review(jobset))["response"]
    expected = (
        f"8 pods x 4 {GPU_RESOURCE} need 32 {GPU_RESOURCE} in one {GKE_NODEPOOL_LABEL} domain; the largest "
        "has 16 (room for 4 such pods)"
    )
    assert response["warnings"] == [
        f"exclusive placement: JobSet trainer: replicated Job w: {expected}: such a Job waits until a "
        "domain that large exists"
    ]
    review = fixture_review("indexed-job.json")
    job = review["request"]["object"]
    job["metadata"]["annotations"][TOPOLOGY_ANNOTATION] = GKE_NODEPOOL_LABEL
    job["spec"] |= {"completions": 8, "parallelism": 8}
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {GPU_RESOURCE: "4"}}
    job_response = gpu_pools.post("/mutate-jobs", review)["response"]
    name = job["metadata"]["name"]
    assert (
        f"exclusive placement: Job {name}: {expected}: it waits until a domain that large exists"
        in job_response["warnings"]
    )


# --- the node label keys -------------------------------------------------------------------------------


def test_node_label_keys_follow_the_informers_events() -> None:
    keys = NodeLabelKeys()
    a, b = node_obj("a", "pool-a"), node_obj("b", None)
    keys.on_relist([a, b])
    assert keys.label_keys() == {GKE_NODEPOOL_LABEL, HOSTNAME_LABEL}
    keys.on_delete(a)
    assert keys.label_keys() == {HOSTNAME_LABEL}
    relabelled = node_obj("b", "pool-b")
    keys.on_upsert(b, relabelled)
    assert keys.label_keys() == {GKE_NODEPOOL_LABEL, HOSTNAME_LABEL}
    keys.on_upsert(relabelled, b)
    assert keys.label_keys() == {HOSTNAME_LABEL}
    keys.on_relist([])
    assert keys.label_keys() == frozenset()


def test_the_nodes_room_follows_the_informers_events() -> None:
    keys = NodeLabelKeys(refresh_seconds=0)
    a = node_obj("a", "pool-a")
    a["status"] = {"allocatable": {GPU_RESOURCE: "8"}}
    keys.on_relist([a])
    assert [room.allocatable for room in keys.rooms()] == [{GPU_RESOURCE: 8000}]
    cordoned = {**a, "spec": {"unschedulable": True}}
    keys.on_upsert(a, cordoned)
    assert [room.schedulable for room in keys.rooms()] == [False]
    keys.on_delete(cordoned)
    assert keys.rooms() == ()


def test_the_rooms_are_looked_at_again_at_most_every_refresh_period() -> None:
    keys = NodeLabelKeys(refresh_seconds=3600)
    keys.on_relist([node_obj("a", "pool-a")])
    first = keys.rooms()
    keys.on_upsert(None, node_obj("b", "pool-b"))
    assert keys.rooms() is first  # what was computed of the first look stays in use


def test_a_jobsets_own_strategy_is_the_default_of_its_child_jobs(running: Running) -> None:
    """Read with the JobSet (one GET, as its startup order and all-or-nothing are)."""
    owner = jobset_of_fixture()
    owner["metadata"]["annotations"] = {STRATEGY_ANNOTATION: "scheduling-gate"}
    running.api.put("jobsets", owner)
    review = fixture_review("jobset-child-job.json")
    answer = running.post("/mutate-jobs", review)
    job = apply(review["request"]["object"], decode_patch(answer))  # type: ignore[arg-type]
    assert job["spec"]["template"]["metadata"]["annotations"][STRATEGY_ANNOTATION] == "scheduling-gate"
    assert RESIZE_LABEL not in (job["metadata"].get("labels") or {})
    assert job["spec"]["completions"] == review["request"]["object"]["spec"]["completions"]


def test_the_projection_caches_labels_only_and_notes_the_room_beside_them() -> None:
    keys = NodeLabelKeys(refresh_seconds=0)
    whole = node_obj("a", "pool-a")
    whole["spec"] = {"unschedulable": True, "taints": [{"key": "k"}]}
    whole["status"] = {"allocatable": {GPU_RESOURCE: "8", "hugepages-1Gi": "0"}, "images": [{"names": ["i"]}]}
    cached = keys.project(whole)
    assert set(cached) == {"metadata"}
    assert keys.project(cached) == cached  # idempotent
    keys.on_upsert(None, cached)
    (room,) = keys.rooms()
    assert (room.schedulable, dict(room.allocatable)) == (False, {GPU_RESOURCE: 8000})
    assert room.labels is cached["metadata"]["labels"]  # one copy of the labels
    relabelled = keys.project({**whole, "metadata": {**whole["metadata"], "labels": {"x": "y"}}})
    keys.on_upsert(cached, relabelled)
    (room,) = keys.rooms()
    assert (room.labels, room.schedulable) == ({"x": "y"}, False)
