"""Projected caches: only the fields the rules read are stored (issue 16).

Table-driven checks of `kubekit.projection.project`, the proof that every rule decides the same on a
projected leader pod or node as on the whole object. Informers over real HTTP that never store a node's or
a leader pod's unrelated fields run against kube-apiserver: tests/kube/test_kube_clients.py."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubekit.projection import FieldProjection, project
from placement.cached_fields import (
    GANG_JOB_FIELDS,
    HOLDER_POD_FIELDS,
    LEADER_POD_FIELDS,
    NODE_FIELDS,
    PINNING_JOB_FIELDS,
    QUEUE_NODE_FIELDS,
)
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_GATE,
    ALL_OR_NOTHING_LABEL,
    GANG_QUEUED_AT_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_KEY_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_NAME_LABEL,
    JOBSET_RESTART_ATTEMPT_LABEL,
    LEADER_SCHEDULED_GATE,
    PIN_FOLLOWERS,
    PIN_FOLLOWERS_LABEL,
    PRIORITY_LABEL,
    RELEASED_AT_ANNOTATION,
    RESIZE_LABEL,
    RESIZE_PENDING,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
)
from placement.gang import (
    admitted_gang,
    build_gang,
    gang_of,
    held_nodes,
    node_view,
    plan_admission,
    record_of_pods,
)
from placement.leader import leader_problem, pick_leader, rival_leaders
from placement.objects import JobRef, node_name
from placement.resize import decide_follower_repair, decide_gate_release, decide_resize, topology_key
from placement.retire import decide_retire
from tests.placement.placement_pods import JOB, UID, ZONE, node, pod
from tests.support.builders import make_job, make_pod

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
    whole["spec"] = {"unschedulable": True, "taints": [{"key": "k"}], "podCIDR": "10.0.0.0/24"}
    whole["status"] |= {"allocatable": {"cpu": "16"}, "capacity": {"cpu": "16"}, "nodeInfo": {"x": "y"}}
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
        gang = build_gang(gang_id, pods, record_of_pods(gang_id, pods))
        nodes = [node_view(noisy(node(f"node-{i}", {ZONE: f"zone-{i}"}))) for i in range(3)]
        plan = plan_admission([gang] if gang else [], nodes, {}, 1_800_000_000.0, 300.0)
        return gang_id, gang, plan

    projected = [FieldProjection(LEADER_POD_FIELDS)(leader) for leader in leaders]
    assert queue(projected) == queue(leaders)


def test_the_queue_trusts_and_counts_the_same_on_projected_gang_jobs_and_holders() -> None:
    """The resizer caches admitted all-or-nothing Jobs and job-key holders projected: the gang record and the
    held nodes must come out the same as from the whole objects."""
    job = (
        make_job("a-w-0", "team")
        .uid("a-w-0-uid")
        .indexed(1)
        .in_gang("a", 3, queued_at="2026-01-01T00:00:00Z", attempt="2")
        .label(ALL_OR_NOTHING_LABEL, "true")
        .controlled_by_jobset("a", "a-uid")
        .obj()
    )
    holders = [
        make_pod("h-0", "team").label(JOB_KEY_LABEL, "x").label(PRIORITY_LABEL, "7").node("node-0").obj(),
        make_pod("h-1", "other").label(JOB_KEY_LABEL, "y").node("node-1").spec(priority=100).obj(),
    ]
    assert admitted_gang(FieldProjection(GANG_JOB_FIELDS)(noisy(job))) == admitted_gang(job) is not None
    projected = [FieldProjection(HOLDER_POD_FIELDS)(noisy(pod)) for pod in holders]
    assert held_nodes(projected) == held_nodes(holders) != {}


@pytest.mark.parametrize("conditions", [(), ("Complete",), ("FailureTarget", "Failed")], ids=repr)
def test_the_retire_decides_the_same_on_a_projected_pinning_job(conditions: tuple[str, ...]) -> None:
    """The resizer caches Jobs labelled pin-followers projected: the retire's decision and its patch (the
    uid it tests) must come out the same as from the whole Job."""
    job = noisy(
        make_job("train-0", "team").uid("job-uid").indexed(8).label(PIN_FOLLOWERS_LABEL, PIN_FOLLOWERS).obj()
    )
    job["status"]["conditions"] = [{"type": kind, "status": "True"} for kind in ("Suspended", *conditions)]
    projected = FieldProjection(PINNING_JOB_FIELDS)(job)
    assert decide_retire(projected) == decide_retire(job)
    assert (decide_retire(job).patch is None) == (not conditions)
    assert set(projected["metadata"]) == {"name", "namespace", "uid", "labels"}
