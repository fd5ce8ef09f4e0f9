"""Projected caches: only the fields the rules read are stored (issue 16).

Table-driven checks of `kubekit.projection.project`, the proof that every rule decides the same on a
projected leader pod or node as on the whole object, and informers over real HTTP against kubesim that
never store a node's or a leader pod's unrelated fields (from the list and from watch events)."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from kubekit.client import Kube, Timeouts, build_api_client
from kubekit.informer import Informer
from kubekit.projection import FieldProjection, project
from kubesim.testing import KubesimServer
from placement.cached_fields import LEADER_POD_FIELDS, NODE_FIELDS, QUEUE_NODE_FIELDS
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_GATE,
    GANG_QUEUED_AT_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    GKE_NODEPOOL_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_NAME_LABEL,
    JOBSET_RESTART_ATTEMPT_LABEL,
    LEADER_SCHEDULED_GATE,
    RELEASED_AT_ANNOTATION,
    RESIZE_LABEL,
    RESIZE_PENDING,
    ROLE_LABEL,
    ROLE_LEADER,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
)
from placement.gang import build_gang, gang_of, node_view, plan_admission
from placement.leader import leader_problem, pick_leader, rival_leaders
from placement.objects import JobRef, node_name
from placement.resize import decide_follower_repair, decide_gate_release, decide_resize, topology_key
from tests.placement.placement_pods import JOB, UID, ZONE, node, pod
from tests.support.waiting import eventually

Obj = dict[str, Any]

LEADER_POD_KEYS = {
    "metadata": {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "deletionTimestamp",
        "creationTimestamp",
        "ownerReferences",
        "labels",
        "annotations",
    },
    "spec": {"nodeName", "schedulingGates", "priority"},
    "status": {"phase"},
}


@pytest.mark.parametrize(
    ("value", "spec", "expected"),
    [
        ({"a": 1, "b": 2}, {"a": True}, {"a": 1}),
        ({"a": {"x": 1, "y": 2}}, {"a": {"x": True}}, {"a": {"x": 1}}),
        ({"m": {"k1": "v", "k2": "w"}}, {"m": frozenset({"k1", "k3"})}, {"m": {"k1": "v"}}),
        ({"a": None}, {"a": {"x": True}}, {}),
        ({"a": "not a map"}, {"a": frozenset({"k"})}, {}),
        ({}, {"a": True}, {}),
        ("not a map", {"a": True}, {}),
        ({"a": None}, {"a": True}, {"a": None}),
    ],
    ids=[
        "whole",
        "nested",
        "keys-of-map",
        "null-nested",
        "scalar-keys",
        "missing",
        "not-a-map",
        "null-whole",
    ],
)
def test_project_keeps_only_what_the_spec_names(value: Any, spec: dict[str, object], expected: Obj) -> None:
    assert project(value, spec) == expected


def noisy(obj: Obj) -> Obj:
    """`obj` with the fields a real cluster adds and no rule reads."""
    noisy_obj = copy.deepcopy(obj)
    meta = noisy_obj.setdefault("metadata", {})
    meta.setdefault("labels", {})["team"] = "research"
    meta.setdefault("annotations", {})["kubectl.kubernetes.io/last-applied-configuration"] = "x" * 2000
    meta["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    meta["creationTimestamp"] = "2026-01-01T00:00:00Z"
    spec = noisy_obj.setdefault("spec", {})
    spec["volumes"] = [{"name": "data", "emptyDir": {}}]
    spec.setdefault("containers", [{"name": "c", "image": "i"}])
    status = noisy_obj.setdefault("status", {})
    status["conditions"] = [{"type": "Ready", "status": "True"}]
    status["images"] = [{"names": ["registry/image:tag"], "sizeBytes": 1}]
    return noisy_obj


def assert_only(obj: Obj, allowed: dict[str, set[str]]) -> None:
    assert set(obj) <= set(allowed), obj
    for section, fields in allowed.items():
        assert set(obj.get(section) or {}) <= fields, (section, obj.get(section))


def test_a_projected_leader_pod_keeps_no_unrelated_field() -> None:
    leader = noisy(pod(0, node="node-1", phase="Running", deleting=True))
    projected = FieldProjection(LEADER_POD_FIELDS)(leader)
    assert_only(projected, LEADER_POD_KEYS)
    assert "team" not in projected["metadata"]["labels"]
    assert set(projected["metadata"]["annotations"]) == {
        JOB_COMPLETION_INDEX_ANNOTATION,
        JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    }
    assert FieldProjection(LEADER_POD_FIELDS)(projected) == projected  # idempotent


def test_a_projected_node_keeps_its_labels_only() -> None:
    whole = noisy(node("node-1", {ZONE: "zone-a", "team": "research"}))
    projected = FieldProjection(NODE_FIELDS)(whole)
    assert projected == {"metadata": {"name": "node-1", "labels": {ZONE: "zone-a", "team": "research"}}}


def test_the_queue_keeps_a_node_as_name_labels_and_unschedulable_only() -> None:
    node = {
        "metadata": {"name": "n", "labels": {"a": "b"}, "resourceVersion": "7", "managedFields": [{}]},
        "spec": {"unschedulable": True, "taints": [{}]},
        "status": {"images": [{}] * 10},
    }
    assert FieldProjection(QUEUE_NODE_FIELDS)(node) == {
        "metadata": {"name": "n", "labels": {"a": "b"}, "resourceVersion": "7"},
        "spec": {"unschedulable": True},
    }


LEADERS = {
    "bound": pod(0, node="node-1"),
    "unbound": pod(0),
    "terminating": pod(0, node="node-1", deleting=True),
    "finished": pod(0, node="node-1", phase="Succeeded"),
    "other-job": pod(0, node="node-1", job_name="other"),
    "other-uid": pod(0, node="node-1", uid="old-uid"),
    "follower": pod(1, node="node-1"),
    "no-topology": pod(0, node="node-2", topology=None),
}
NODES = {"node-1": node("node-1", {ZONE: "zone-a"}), "node-2": node("node-2", {ZONE: "zone-b"})}


def shrunk_job() -> Obj:
    return {
        "metadata": {
            "name": JOB,
            "namespace": "team-a",
            "uid": UID,
            "labels": {RESIZE_LABEL: RESIZE_PENDING},
            "annotations": {TARGET_COMPLETIONS_ANNOTATION: "4", TARGET_PARALLELISM_ANNOTATION: "4"},
        },
        "spec": {"completionMode": "Indexed", "completions": 1, "parallelism": 1},
    }


def decisions(candidates: list[Obj], nodes: dict[str, Obj]) -> list[object]:
    """Everything the webhook and the resizer decide from cached leaders and nodes."""
    owner = JobRef(JOB, UID)
    leader = pick_leader(candidates, owner)
    leader_node = nodes.get(str(node_name(leader))) if leader is not None else None
    rivals = [(rival, nodes.get(str(node_name(rival)))) for rival in rival_leaders(candidates, leader, owner)]
    gated = pod(3, spec={"schedulingGates": [{"name": LEADER_SCHEDULED_GATE}]})
    pinned = pod(3, spec={"nodeSelector": {ZONE: "zone-b"}})
    index = candidates.index(leader) if leader is not None else None
    return [
        index,
        leader_problem(leader, owner),
        [candidates.index(rival) for rival, _node in rivals],
        topology_key(leader) if leader is not None else None,
        decide_resize(shrunk_job(), leader, gang=None),
        decide_gate_release(gated, leader, leader_node, rivals, gang=None),
        decide_follower_repair(pinned, leader, leader_node, rivals, "2026-01-01T00:00:00Z"),
    ]


@pytest.mark.parametrize(
    "names",
    [[name] for name in LEADERS]
    + [["bound", "terminating"], ["bound", "no-topology"], ["unbound", "other-uid"]],
    ids="+".join,
)
def test_every_rule_decides_the_same_on_projected_objects(names: list[str]) -> None:
    whole = [noisy(LEADERS[name]) for name in names]
    whole_nodes = {name: noisy(value) for name, value in NODES.items()}
    projected = [FieldProjection(LEADER_POD_FIELDS)(obj) for obj in whole]
    projected_nodes = {name: FieldProjection(NODE_FIELDS)(obj) for name, obj in whole_nodes.items()}
    assert decisions(projected, projected_nodes) == decisions(whole, whole_nodes)


def leader_pod(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {ROLE_LABEL: ROLE_LEADER, "team": "research"},
            "annotations": {
                JOB_COMPLETION_INDEX_ANNOTATION: "0",
                JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL,
                "note": "y" * 500,
            },
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def test_informers_over_http_store_only_the_projected_fields() -> None:
    """From the list and from watch events: a node keeps name and labels, a leader pod only what the rules
    read, even when the change that arrives touches only unrelated fields."""
    with KubesimServer(nodes=3, pools=1, controllers=False) as sim:
        kube = Kube(build_api_client(None, sim.url, user_agent="test"), Timeouts(read=10))
        http = httpx.Client(base_url=sim.url, timeout=10)
        pods_path = "/api/v1/namespaces/default/pods"
        http.post(pods_path, json=leader_pod("listed")).raise_for_status()
        nodes = Informer(
            kube,
            "nodes",
            name="nodes",
            namespace=None,
            label_selector=None,
            project=FieldProjection(NODE_FIELDS),
        )
        leaders = Informer(
            kube,
            "pods",
            name="leaders",
            namespace=None,
            label_selector=f"{ROLE_LABEL}={ROLE_LEADER}",
            project=FieldProjection(LEADER_POD_FIELDS),
        )
        try:
            nodes.start()
            leaders.start()
            eventually(lambda: nodes.synced.is_set() and leaders.synced.is_set(), "both caches synced")
            assert len(nodes.store) == 3
            for cached in nodes.store.items():
                assert set(cached) == {"metadata"}
                assert set(cached["metadata"]) <= {"name", "resourceVersion", "labels"}
                assert GKE_NODEPOOL_LABEL in cached["metadata"]["labels"]
            first = nodes.store.items()[0]["metadata"]["name"]
            http.patch(
                f"/api/v1/nodes/{first}",
                json={"metadata": {"labels": {"extra": "1"}, "annotations": {"big": "z" * 500}}},
                headers={"Content-Type": "application/merge-patch+json"},
            ).raise_for_status()
            eventually(
                lambda: (
                    (nodes.store.get(first) or {}).get("metadata", {}).get("labels", {}).get("extra") == "1"
                ),
                "the watched node change",
            )
            assert set(nodes.store.get(first) or {}) == {"metadata"}
            assert "annotations" not in (nodes.store.get(first) or {})["metadata"]
            http.post(pods_path, json=leader_pod("watched")).raise_for_status()
            eventually(lambda: leaders.store.get("default/watched") is not None, "the watched leader")
            for cached in leaders.store.items():
                assert_only(cached, LEADER_POD_KEYS)
                assert "team" not in cached["metadata"]["labels"]
                assert "note" not in cached["metadata"]["annotations"]
                assert cached["metadata"]["annotations"][JOB_COMPLETION_INDEX_ANNOTATION] == "0"
        finally:
            for informer in (nodes, leaders):
                informer.stop()
                informer.join(5)
            kube.close()
            http.close()


def test_list_applies_the_transform_page_by_page() -> None:
    """`Kube.list_objects(transform=...)` hands back only the transformed items (None drops one)."""
    with KubesimServer(nodes=4, pools=1, controllers=False) as sim:
        kube = Kube(build_api_client(None, sim.url, user_agent="test"), Timeouts(read=10))
        seen: list[str] = []

        def transform(obj: Obj) -> Obj | None:
            seen.append(obj["metadata"]["name"])
            return None if len(seen) == 1 else FieldProjection(NODE_FIELDS)(obj)

        try:
            items, version = kube.list_objects(
                "nodes", namespace=None, label_selector=None, transform=transform
            )
        finally:
            kube.close()
    assert len(seen) == 4
    assert len(items) == 3
    assert version
    assert all(set(item["metadata"]) <= {"name", "resourceVersion", "labels"} for item in items)


def test_metadata_only_lists_and_watches_partial_object_metadata() -> None:
    """With the official client as the webhook uses it: `metadata_only` gets PartialObjectMetadata from
    kubesim for the list and for every watch event (nothing but metadata crosses the wire)."""
    with KubesimServer(nodes=3, pools=1, controllers=False) as sim:
        kube = Kube(build_api_client(None, sim.url, user_agent="test"), Timeouts(read=10))
        http = httpx.Client(base_url=sim.url, timeout=10)
        informer = Informer(
            kube, "nodes", name="nodes", namespace=None, label_selector=None, project=dict, metadata_only=True
        )
        try:
            items, _ = kube.list_objects("nodes", namespace=None, label_selector=None, metadata_only=True)
            assert {item["kind"] for item in items} == {"PartialObjectMetadata"}
            assert all(set(item) == {"kind", "apiVersion", "metadata"} for item in items)
            informer.start()
            eventually(informer.synced.is_set, "the metadata-only cache synced")
            first = items[0]["metadata"]["name"]
            http.patch(
                f"/api/v1/nodes/{first}",
                json={"metadata": {"labels": {"extra": "1"}}},
                headers={"Content-Type": "application/merge-patch+json"},
            ).raise_for_status()
            eventually(
                lambda: (
                    (informer.store.get(first) or {}).get("metadata", {}).get("labels", {}).get("extra")
                    == "1"
                ),
                "the watched change",
            )
            assert all(cached["kind"] == "PartialObjectMetadata" for cached in informer.store.items())
            assert all("status" not in cached for cached in informer.store.items())
        finally:
            informer.stop()
            informer.join(5)
            kube.close()
            http.close()


def gang_leader(job: str, *, gated: bool, node: str | None = None, released_at: str | None = None) -> Obj:
    """A leader of an all-or-nothing JobSet's Job as the webhook writes it, with unrelated noise."""
    leader = noisy(pod(0, node=node, job_name=job))
    meta = leader["metadata"]
    meta["labels"] |= {JOBSET_NAME_LABEL: "train", JOBSET_RESTART_ATTEMPT_LABEL: "1"}
    meta["annotations"] |= {
        ALL_OR_NOTHING_ANNOTATION: "true",
        GANG_SIZE_ANNOTATION: "2",
        GANG_QUEUED_AT_ANNOTATION: "2026-01-01T00:00:00Z",
    }
    if released_at is not None:
        meta["annotations"][RELEASED_AT_ANNOTATION] = released_at
    leader["spec"]["priority"] = 100
    if gated:
        leader["spec"]["schedulingGates"] = [{"name": ALL_OR_NOTHING_GATE}, {"name": "other.example/gate"}]
    return leader


@pytest.mark.parametrize(
    "leaders",
    [
        [gang_leader("a", gated=True), gang_leader("b", gated=True)],
        [
            gang_leader("a", gated=False, released_at="2026-01-01T00:00:05.000001Z"),
            gang_leader("b", gated=True),
        ],
        [
            gang_leader("a", gated=False, node="node-1", released_at="2026-01-01T00:00:05Z"),
            gang_leader("b", gated=False, node="node-2", released_at="2026-01-01T00:00:05Z"),
        ],
    ],
    ids=["queued", "releasing", "placed"],
)
def test_the_all_or_nothing_queue_decides_the_same_on_projected_leaders(leaders: list[Obj]) -> None:
    """The resizer caches projected leaders: the queue's gangs (id, size, order, gates, clocks) and its
    plan must come out the same as from the whole pods."""

    def queue(pods: list[Obj]) -> tuple[object, ...]:
        gang_id = gang_of(pods[0])
        assert gang_id is not None
        gang = build_gang(gang_id, pods)
        nodes = [node_view(noisy(node(f"node-{i}", {ZONE: f"zone-{i}"}))) for i in range(3)]
        plan = plan_admission([gang] if gang else [], nodes, {}, 1_800_000_000.0, 300.0)
        return gang_id, gang, plan

    projected = [FieldProjection(LEADER_POD_FIELDS)(leader) for leader in leaders]
    assert queue(projected) == queue(leaders)
