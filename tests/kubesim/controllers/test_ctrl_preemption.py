"""Scheduler preemption (DefaultPreemption PostFilter, k/k pkg/scheduler/framework/preemption/preemption.go
and plugins/defaultpreemption/default_preemption.go) on the in-process cluster, and its pure choices."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.controllers.preemption import Candidate, Victim, num_candidates, pick_one_node
from placement.constants import GKE_NODEPOOL_LABEL
from tests.kubesim.controllers.ctrl_harness import Cluster, Run, cluster, pod_spec

pytestmark = pytest.mark.timeout(120)

Obj = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"
CLASSES = {"low": 10, "mid": 100, "high": 1000}


def _pod(
    name: str, priority_class: str, gpus: int = 8, labels: dict[str, str] | None = None, **spec: Any
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {**pod_spec(gpus=gpus), "priorityClassName": priority_class, **spec},
    }


async def _classes(c: Cluster, never: bool = False) -> None:
    for name, value in CLASSES.items():
        body: Obj = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        if never and name == "high":
            body["preemptionPolicy"] = "Never"
        await c.server.create("priorityclasses", body)


async def _node_names(c: Cluster) -> list[str]:
    items, _ = await c.server.list("nodes")
    return sorted(n["metadata"]["name"] for n in items)


async def _get(c: Cluster, name: str) -> Obj | None:
    items, _ = await c.server.list("pods", namespace="default", field_selector=f"metadata.name={name}")
    return items[0] if items else None


async def _running_on(c: Cluster, pods: dict[str, str]) -> None:
    """Create pods bound to nodes (spec.nodeName) and wait until each runs."""
    for name, spec in pods.items():
        priority_class, node, *rest = spec.split(":")
        gpus = int(rest[0]) if rest else 8
        await c.server.create("pods", _pod(name, priority_class, gpus, nodeName=node), namespace="default")
    for name in pods:

        async def running(pod_name: str = name) -> bool:
            pod = await _get(c, pod_name)
            return pod is not None and pod.get("status", {}).get("phase") == "Running"

        await c.wait_for(running, 30, f"{name} running")


async def _bound_to(c: Cluster, name: str) -> str | None:
    pod = await _get(c, name)
    return None if pod is None else pod["spec"].get("nodeName")


async def _unschedulable_message(c: Cluster, name: str) -> str | None:
    pod = await _get(c, name)
    for item in (pod or {}).get("status", {}).get("conditions", []):
        if item["type"] == "PodScheduled" and item["status"] == "False":
            return str(item["message"])
    return None


def test_a_high_priority_pod_preempts_the_lowest_priority_victim_and_is_nominated(run: Run) -> None:
    """Both nodes are full; the node whose victim has the lowest priority is chosen; the victim gets
    DisruptionTarget/PreemptionByScheduler, is deleted gracefully, and the preemptor binds there."""

    async def scenario() -> None:
        async with cluster(nodes=2, pools=1) as c:
            await _classes(c)
            first, second = await _node_names(c)
            await _running_on(c, {"low": f"low:{second}", "mid": f"mid:{first}"})
            await c.server.create("pods", _pod("high", "high"), namespace="default")
            preempted = await c.wait_for(lambda: _disrupted(c, "low"), 30, "DisruptionTarget on the victim")
            assert preempted["reason"] == "PreemptionByScheduler"
            assert (
                preempted["message"] == "default-scheduler: preempting to accommodate a higher priority pod"
            )
            high = await c.wait_for(lambda: _nominated(c, "high"), 30, "nomination")
            assert high == second
            assert await c.wait_for(lambda: _bound_to(c, "high"), 30, "preemptor bound") == second
            assert await _get(c, "low") is None
            assert (await _get(c, "mid") or {})["spec"]["nodeName"] == first
            assert c.stats.scheduler_preemption_victims == 1

    run(scenario())


async def _disrupted(c: Cluster, name: str) -> Obj | None:
    pod = await _get(c, name)
    for item in (pod or {}).get("status", {}).get("conditions", []):
        if item["type"] == "DisruptionTarget":
            return dict(item)
    return None


async def _nominated(c: Cluster, name: str) -> str | None:
    pod = await _get(c, name)
    nominated = (pod or {}).get("status", {}).get("nominatedNodeName")
    return str(nominated) if nominated is not None else None


def test_only_the_victims_the_pod_needs_are_preempted(run: Run) -> None:
    """Reprieve: of two low pods of 4 GPUs, the more important one (higher priority) is kept."""

    async def scenario() -> None:
        async with cluster(nodes=1, pools=1) as c:
            await _classes(c)
            (only,) = await _node_names(c)
            await _running_on(c, {"low": f"low:{only}:4", "mid": f"mid:{only}:4"})
            await c.server.create("pods", _pod("high", "high", 4), namespace="default")
            assert await c.wait_for(lambda: _bound_to(c, "high"), 30, "preemptor bound") == only
            assert await _get(c, "low") is None
            assert await _disrupted(c, "mid") is None
            assert c.stats.scheduler_preemption_victims == 1

    run(scenario())


def test_preemption_policy_never_waits_instead(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=1, pools=1) as c:
            await _classes(c, never=True)
            (only,) = await _node_names(c)
            await _running_on(c, {"low": f"low:{only}"})
            await c.server.create("pods", _pod("high", "high"), namespace="default")
            message = await c.wait_for(lambda: _unschedulable_message(c, "high"), 30, "Unschedulable")
            assert message.endswith("preemption: not eligible due to preemptionPolicy=Never.")
            assert await _disrupted(c, "low") is None
            assert c.stats.scheduler_preemption_victims == 0

    run(scenario())


def test_no_cross_node_preemption_for_anti_affinity(run: Run) -> None:
    """The pod may only go to the second node, which is free, but a low-priority pod on the first node of
    the same pool forbids the pool by anti-affinity: removing pods of the second node cannot help, so
    nothing is preempted (upstream preempts only on the node it nominates)."""

    async def scenario() -> None:
        async with cluster(nodes=2, pools=1) as c:
            await _classes(c)
            first, second = await _node_names(c)
            blocker = _pod("blocker", "low", 1, labels={"app": "x"}, nodeName=first)
            await c.server.create("pods", blocker, namespace="default")
            anti = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": GKE_NODEPOOL_LABEL}
                    ]
                }
            }
            high = _pod("high", "high", 1, affinity=anti, nodeSelector={HOSTNAME: second})
            await c.server.create("pods", high, namespace="default")
            message = await c.wait_for(lambda: _unschedulable_message(c, "high"), 30, "Unschedulable")
            assert message == (
                "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                "1 node(s) didn't match pod anti-affinity rules. preemption: 0/2 nodes are available: "
                "1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
            )
            assert await _disrupted(c, "blocker") is None

    run(scenario())


def test_anti_affinity_is_resolved_by_preempting_on_the_same_node(run: Run) -> None:
    """The blocking pod runs on the node the pod can use: preempting it makes the pod fit there."""

    async def scenario() -> None:
        async with cluster(nodes=2, pools=1) as c:
            await _classes(c)
            first, _ = await _node_names(c)
            blocker = _pod("blocker", "low", 1, labels={"app": "x"}, nodeName=first)
            await c.server.create("pods", blocker, namespace="default")
            anti = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": GKE_NODEPOOL_LABEL}
                    ]
                }
            }
            high = _pod("high", "high", 1, affinity=anti, nodeSelector={HOSTNAME: first})
            await c.server.create("pods", high, namespace="default")
            assert await c.wait_for(lambda: _bound_to(c, "high"), 30, "preemptor bound") == first
            assert await _get(c, "blocker") is None

    run(scenario())


def _victims(node: str, *victims: tuple[int, str]) -> Candidate:
    return Candidate(
        node,
        tuple(Victim(f"{node}/{i}", {}, priority, started) for i, (priority, started) in enumerate(victims)),
    )


T1, T2, T3 = "2024-01-01T00:00:01Z", "2024-01-01T00:00:02Z", "2024-01-01T00:00:03Z"


@pytest.mark.parametrize(
    ("candidates", "chosen"),
    [
        # lowest highest-priority victim
        ([_victims("a", (100, T1)), _victims("b", (10, T1), (10, T1))], "b"),
        # then lowest sum of priorities
        ([_victims("a", (10, T1), (10, T1)), _victims("b", (10, T1), (5, T1))], "b"),
        # negative priorities: the sum is offset so that fewer pods still weigh less
        ([_victims("a", (-5, T1), (-5, T1)), _victims("b", (-5, T1))], "b"),
        # then fewest victims (equal sums)
        (
            [
                _victims("a", (10, T1), (10, T1)),
                _victims("b", (10, T1), (-1073741819, T1), (-1073741819, T1)),
            ],
            "a",
        ),
        # then the latest start among the highest-priority victims
        ([_victims("a", (10, T1)), _victims("b", (10, T3)), _victims("c", (10, T2))], "b"),
        # then the first found
        ([_victims("a", (10, T1)), _victims("b", (10, T1))], "a"),
    ],
)
def test_pick_one_node_for_preemption(candidates: list[Candidate], chosen: str) -> None:
    assert pick_one_node(candidates).node == chosen


@pytest.mark.parametrize(("nodes", "expected"), [(1, 1), (50, 50), (100, 100), (999, 100), (5000, 500)])
def test_num_candidates(nodes: int, expected: int) -> None:
    assert num_candidates(nodes) == expected
