"""kube-scheduler's rules on the in-process cluster: the filter order and what each filter counts, node
affinity parsing, the PreFilter narrowing, inter-pod affinity counted per pod, the Unschedulable message."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.cluster import pool_name
from kubesim.controllers.preemption import NO_VICTIMS, NOT_HELPFUL
from placement.constants import GKE_NODEPOOL_LABEL
from tests.kubesim.controllers.ctrl_harness import Cluster, Run, cluster, pod_spec

pytestmark = pytest.mark.timeout(120)

Obj = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"
REGION = "topology.kubernetes.io/region"


def _pod(name: str, gpus: int = 1, labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {**pod_spec(gpus=gpus), **spec},
    }


def _required_node_affinity(*terms: Obj) -> Obj:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def _pod_affinity(*terms: Obj) -> Obj:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def _exists(key: str, topology: str) -> Obj:
    return {
        "labelSelector": {"matchExpressions": [{"key": key, "operator": "Exists"}]},
        "topologyKey": topology,
    }


async def _nodes(c: Cluster) -> list[Obj]:
    items, _ = await c.server.list("nodes")
    return sorted(items, key=lambda n: n["metadata"]["name"])


async def _condition(c: Cluster, name: str) -> dict[str, Any] | None:
    pod = await c.server.get("pods", name, namespace="default")
    for item in pod.get("status", {}).get("conditions", []):
        if item["type"] == "PodScheduled" and item["status"] == "False":
            return dict(item)
    return None


async def _event(c: Cluster, name: str, reason: str) -> Obj | None:
    selector = f"involvedObject.name={name},reason={reason}"
    items, _ = await c.server.list("events", namespace="default", field_selector=selector)
    return items[0] if items else None


async def _message(c: Cluster, name: str) -> str:
    condition = await c.wait_for(lambda: _condition(c, name), 30, f"{name} Unschedulable")
    assert condition["reason"] == "Unschedulable"
    return str(condition["message"])


async def _node_of(c: Cluster, name: str) -> str | None:
    node: str | None = (await c.server.get("pods", name, namespace="default"))["spec"].get("nodeName")
    return node


def test_filter_evaluations_count_every_plugin_upstream_runs_on_every_node_it_visits(run: Run) -> None:
    """10 nodes (< 100: every node is searched). The 2 nodes of the selected pool run NodeUnschedulable,
    NodeName, TaintToleration, NodeAffinity and NodeResourcesFit (5 each); of the 8 others, a cordoned node
    stops at NodeUnschedulable (1), a tainted one at TaintToleration (3), the rest at NodeAffinity (4)."""

    async def scenario() -> None:
        async with cluster(nodes=10, pools=5, components=("scheduler",)) as c:
            nodes = await _nodes(c)
            others = [n for n in nodes if n["metadata"]["labels"][GKE_NODEPOOL_LABEL] != pool_name(2)]
            await c.server.patch("nodes", others[0]["metadata"]["name"], {"spec": {"unschedulable": True}})
            taint = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
            await c.server.patch("nodes", others[1]["metadata"]["name"], {"spec": {"taints": [taint]}})
            await c.wait_for(lambda: len(c.controllers.scheduler.cache.special) == 2, 30, "node updates seen")
            pod = _pod("selected", nodeSelector={GKE_NODEPOOL_LABEL: pool_name(2)})
            await c.server.create("pods", pod, namespace="default")
            await c.wait_for(lambda: _node_of(c, "selected"), 30, "pod bound")
            assert c.stats.scheduler_attempts == 1
            assert c.stats.scheduler_filter_evaluations == 2 * 5 + 1 + 3 + 6 * 4

    run(scenario())


def test_taints_are_checked_before_node_affinity(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2, components=("scheduler",)) as c:
            for node in await _nodes(c):
                if node["metadata"]["labels"][GKE_NODEPOOL_LABEL] == pool_name(0):
                    taints = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
                    await c.server.patch("nodes", node["metadata"]["name"], {"spec": {"taints": taints}})
            pod = _pod("big", gpus=16, nodeSelector={GKE_NODEPOOL_LABEL: pool_name(1)})
            await c.server.create("pods", pod, namespace="default")
            assert await _message(c, "big") == (
                "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, "
                "2 node(s) had untolerated taint {dedicated: ml}. "
                f"preemption: 0/4 nodes are available: 2 {NO_VICTIMS}, 2 {NOT_HELPFUL}."
            )

    run(scenario())


def test_every_short_resource_of_a_node_is_a_reason(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=2, pools=1, components=("scheduler",)) as c:
            pod = _pod(
                "huge",
                gpus=16,
                containers=[
                    {
                        "name": "main",
                        "image": "busybox:1.36",
                        "resources": {"requests": {"cpu": "500", "nvidia.com/gpu": "16"}},
                    }
                ],
            )
            await c.server.create("pods", pod, namespace="default")
            assert await _message(c, "huge") == (
                "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient nvidia.com/gpu. "
                f"preemption: 0/2 nodes are available: 2 {NO_VICTIMS}."
            )

    run(scenario())


def test_an_invalid_label_value_in_node_affinity_makes_the_pod_unschedulable(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2, components=("scheduler",)) as c:
            affinity = _required_node_affinity(
                {
                    "matchExpressions": [
                        {"key": GKE_NODEPOOL_LABEL, "operator": "NotIn", "values": ["bad value!"]}
                    ]
                }
            )
            await c.server.create("pods", _pod("invalid", affinity=affinity), namespace="default")
            assert await _message(c, "invalid") == (
                "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector. "
                f"preemption: 0/4 nodes are available: 4 {NOT_HELPFUL}."
            )

    run(scenario())


def test_a_node_pinned_by_match_fields_narrows_the_search_like_prefilter_result(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2, components=("scheduler",)) as c:
            name = (await _nodes(c))[0]["metadata"]["name"]
            pin = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}
            await c.server.create(
                "pods", _pod("pinned", gpus=9, affinity=_required_node_affinity(pin)), namespace="default"
            )
            assert await _message(c, "pinned") == (
                "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, "
                "3 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
                f"preemption: 0/4 nodes are available: 1 {NO_VICTIMS}, 3 {NOT_HELPFUL}."
            )
            conflict = {
                "matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [name]},
                    {"key": "metadata.name", "operator": "In", "values": ["elsewhere"]},
                ]
            }
            affinity = _required_node_affinity(conflict)
            await c.server.create("pods", _pod("conflict", affinity=affinity), namespace="default")
            assert await _message(c, "conflict") == (
                "0/4 nodes are available: pod affinity terms conflict. "
                f"preemption: 0/4 nodes are available: 4 {NOT_HELPFUL}."
            )

    run(scenario())


def test_a_not_ready_node_without_taints_still_takes_pods(run: Run) -> None:
    """kube-scheduler has no Ready filter; NotReady nodes are kept away by the node lifecycle controller's
    taints, which this node does not have."""

    async def scenario() -> None:
        async with cluster(nodes=2, pools=1, components=("scheduler",)) as c:
            name = (await _nodes(c))[0]["metadata"]["name"]
            node = await c.server.get("nodes", name)
            conditions = [
                {**item, "status": "False"} if item["type"] == "Ready" else item
                for item in node["status"]["conditions"]
            ]
            await c.server.patch("nodes", name, {"status": {"conditions": conditions}}, subresource="status")
            await c.server.create("pods", _pod("here", nodeSelector={HOSTNAME: name}), namespace="default")
            assert await c.wait_for(lambda: _node_of(c, "here"), 30, "pod bound") == name

    run(scenario())


def test_every_affinity_term_must_be_matched_by_the_same_existing_pod(run: Run) -> None:
    """One existing pod carries `foo`, another `bar`: no single pod matches both terms, and the incoming pod
    matches neither itself, so no node passes (kube-scheduler's podMatchesAllAffinityTerms)."""

    async def scenario() -> None:
        async with cluster(nodes=4, pools=2, components=("scheduler",)) as c:
            first, _, third, _ = [n["metadata"]["name"] for n in await _nodes(c)]
            await c.server.create(
                "pods", _pod("foo", labels={"foo": ""}, nodeName=first), namespace="default"
            )
            await c.server.create(
                "pods", _pod("bar", labels={"bar": ""}, nodeName=third), namespace="default"
            )
            affinity = _pod_affinity(_exists("foo", REGION), _exists("bar", HOSTNAME))
            await c.server.create("pods", _pod("both", affinity=affinity), namespace="default")
            assert (
                await _message(c, "both")
                == "0/4 nodes are available: 4 node(s) didn't match pod affinity rules. "
                f"preemption: 0/4 nodes are available: 4 {NOT_HELPFUL}."
            )

    run(scenario())


def test_the_first_pod_of_a_group_passes_when_no_pod_matches_all_its_terms(run: Run) -> None:
    """An existing pod matches one of the two terms only: upstream's counts stay empty, the incoming pod
    matches both of its own terms, so it is the first of its group and may go anywhere."""

    async def scenario() -> None:
        async with cluster(nodes=4, pools=2, components=("scheduler",)) as c:
            first = (await _nodes(c))[0]["metadata"]["name"]
            await c.server.create(
                "pods", _pod("half", labels={"foo": ""}, nodeName=first), namespace="default"
            )
            affinity = _pod_affinity(_exists("foo", GKE_NODEPOOL_LABEL), _exists("bar", GKE_NODEPOOL_LABEL))
            leader = _pod("leader", labels={"foo": "", "bar": ""}, affinity=affinity)
            await c.server.create("pods", leader, namespace="default")
            await c.wait_for(lambda: _node_of(c, "leader"), 30, "the first pod of its group bound")

    run(scenario())


def test_no_nodes_is_a_scheduler_error_not_unschedulable(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=1, pools=1, components=("scheduler",)) as c:
            (node,) = await _nodes(c)
            await c.server.delete("nodes", node["metadata"]["name"])
            await c.wait_for(lambda: not c.controllers.scheduler.nodes, 30, "node gone")
            await c.server.create("pods", _pod("lonely"), namespace="default")
            condition = await c.wait_for(lambda: _condition(c, "lonely"), 30, "PodScheduled=False")
            assert (condition["reason"], condition["message"]) == (
                "SchedulerError",
                "no nodes available to schedule pods",
            )
            assert c.stats.scheduler_unschedulable == 0
            # handleSchedulingFailure records the event for an error as for a rejection
            event = await c.wait_for(lambda: _event(c, "lonely", "FailedScheduling"), 30, "the event")
            assert event["message"] == "no nodes available to schedule pods"

    run(scenario())


def test_pods_of_another_scheduler_are_left_alone(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=2, pools=1, components=("scheduler",)) as c:
            await c.server.create(
                "pods", _pod("theirs", schedulerName="other-scheduler"), namespace="default"
            )
            await c.server.create("pods", _pod("ours"), namespace="default")
            await c.wait_for(lambda: _node_of(c, "ours"), 30, "our pod bound")
            assert "default/theirs" not in c.controllers.scheduler.queue
            assert await _node_of(c, "theirs") is None
            assert c.stats.scheduler_attempts == 1

    run(scenario())
