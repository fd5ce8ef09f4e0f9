"""The scheduler's view of one node, and the pure scoring helpers of a scheduling cycle."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .nodefit import Resources, node_allocatable
from .objects import Obj, labels_of

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


@dataclass
class NodeState:
    name: str
    labels: dict[str, str]
    obj: Obj
    allocatable: Resources
    requested: Resources = field(default_factory=Resources)
    pods: set[str] = field(default_factory=set)
    unschedulable: bool = False
    """`spec.unschedulable` (cordoned): NodeUnschedulable rejects pods not tolerating the unschedulable taint.
    kube-scheduler has no filter on the Ready condition: a NotReady node is kept out by the node lifecycle
    controller's not-ready/unreachable NoSchedule taints (TaintToleration)."""
    hard_taints: list[dict[str, Any]] = field(default_factory=list)
    """Its NoSchedule/NoExecute taints, the only ones the filter looks at."""
    free_cpu: int = 0
    free_memory: int = 0
    free_gpu: int = 0
    free_pods: int = 0

    def refresh(self, node: Obj) -> None:
        self.obj = node
        self.labels = dict(labels_of(node))
        self.allocatable = node_allocatable(node)
        self.unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
        taints = (node.get("spec") or {}).get("taints") or []
        self.hard_taints = [t for t in taints if t.get("effect") in ("NoSchedule", "NoExecute")]
        self.account()

    @property
    def special(self) -> bool:
        """Cordoned or tainted: the first two filters may reject it before NodeAffinity looks at it."""
        return self.unschedulable or bool(self.hard_taints)

    def account(self) -> None:
        """Recompute the free capacity after `allocatable` or `requested` changed."""
        free = self.allocatable - self.requested
        self.free_cpu, self.free_memory, self.free_gpu, self.free_pods = (
            free.cpu,
            free.memory,
            free.gpu,
            free.pods,
        )


def num_feasible_nodes_to_find(all_nodes: int, percentage: int) -> int:
    """kube-scheduler's numFeasibleNodesToFind: adaptive 50% - nodes/125, floors of 5% and 100 nodes."""
    if all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return all_nodes
    if percentage <= 0:
        percentage = max(50 - all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    found = all_nodes * percentage // 100
    return max(found, MIN_FEASIBLE_NODES_TO_FIND)


def least_allocated_score(node: NodeState, request: Resources) -> int:
    """NodeResourcesFit LeastAllocated over cpu and memory (weights 1), 0..100."""
    scores = []
    for capacity, used in (
        (node.allocatable.cpu, node.requested.cpu + request.cpu),
        (node.allocatable.memory, node.requested.memory + request.memory),
    ):
        scores.append(0 if capacity <= 0 or used > capacity else (capacity - used) * 100 // capacity)
    return sum(scores) // len(scores)


def unschedulable_message(total: int, reasons: Counter[str], prefilter: str = "") -> str:
    """FitError.Error (pkg/scheduler/framework/types.go): `0/N nodes are available: ` then the PreFilter
    rejection, or the histogram of node reasons as "count reason" strings sorted as strings."""
    if prefilter:
        return f"0/{total} nodes are available: {prefilter}."
    detail = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))
    return f"0/{total} nodes are available: {detail}." if detail else f"0/{total} nodes are available:"
