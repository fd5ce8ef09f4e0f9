"""Pure node-level scheduling predicates: resources, taints/tolerations, node selector and node affinity.

The scheduler's cheap filters (NodeUnschedulable, NodeAffinity, TaintToleration, NodeResourcesFit), each a
function of one pod and one node, evaluated before the inter-pod affinity filter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placement.constants import GPU_RESOURCE

from .objects import Obj, condition_true
from .quantity import int_value, milli_value

RESOURCES: tuple[str, ...] = ("cpu", "memory", GPU_RESOURCE, "pods")


@dataclass(frozen=True)
class Resources:
    """cpu in millicores, memory in bytes, GPUs, pod count."""

    cpu: int = 0
    memory: int = 0
    gpu: int = 0
    pods: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu + other.cpu, self.memory + other.memory, self.gpu + other.gpu, self.pods + other.pods
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu - other.cpu, self.memory - other.memory, self.gpu - other.gpu, self.pods - other.pods
        )

    def shortfalls(self, request: Resources, allocatable: Resources) -> list[str]:
        """Names of the resources `request` does not fit in `allocatable` given `self` already requested."""
        missing: list[str] = []
        if self.pods + request.pods > allocatable.pods:
            missing.append("Too many pods")
        if request.cpu and self.cpu + request.cpu > allocatable.cpu:
            missing.append("Insufficient cpu")
        if request.memory and self.memory + request.memory > allocatable.memory:
            missing.append("Insufficient memory")
        if request.gpu and self.gpu + request.gpu > allocatable.gpu:
            missing.append(f"Insufficient {GPU_RESOURCE}")
        return missing


def _resources(values: Mapping[str, Any], pods: int) -> Resources:
    return Resources(
        cpu=milli_value(values.get("cpu", 0)),
        memory=int_value(values.get("memory", 0)),
        gpu=int_value(values.get(GPU_RESOURCE, 0)),
        pods=pods,
    )


def pod_requests(pod: Obj) -> Resources:
    """Sum of the containers' requests (limits when requests are absent), at least the largest init
    container's, plus overhead (the scheduler's computePodResourceRequest)."""
    spec = pod.get("spec") or {}
    total = Resources(pods=1)
    for container in spec.get("containers") or []:
        total = total + _container_requests(container)
    for container in spec.get("initContainers") or []:
        init = _container_requests(container)
        total = Resources(
            max(total.cpu, init.cpu), max(total.memory, init.memory), max(total.gpu, init.gpu), 1
        )
    if spec.get("overhead"):
        total = total + _resources(spec["overhead"], 0)
    return total


def _container_requests(container: Mapping[str, Any]) -> Resources:
    resources = container.get("resources") or {}
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    return _resources(merged, 0)


def node_allocatable(node: Obj) -> Resources:
    status = node.get("status") or {}
    values = status.get("allocatable") or status.get("capacity") or {}
    return _resources(values, int_value(values.get("pods", 110)))


# --- taints and tolerations ----------------------------------------------------------------------------


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"
    if key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def first_untolerated(
    tolerations: Sequence[Mapping[str, Any]], taints: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The first NoSchedule/NoExecute taint not tolerated (PreferNoSchedule never filters)."""
    for taint in taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


# --- node selector and required node affinity ----------------------------------------------------------


def _requirement_matches(requirement: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    key = requirement.get("key") or ""
    operator = requirement.get("operator")
    wanted = [str(v) for v in requirement.get("values") or []]
    present = key in values
    if operator == "In":
        return present and values[key] in wanted
    if operator == "NotIn":
        return not present or values[key] not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        if not present or len(wanted) != 1:
            return False
        try:
            actual, bound = int(values[key]), int(wanted[0])
        except ValueError:
            return False
        return actual > bound if operator == "Gt" else actual < bound
    raise ValueError(f"{operator!r} is not a valid node selector operator")


def node_selector_term_matches(term: Mapping[str, Any], node: Obj) -> bool:
    """A NodeSelectorTerm: all matchExpressions on labels and matchFields (metadata.name) hold;
    a term with neither matches no node."""
    expressions = term.get("matchExpressions") or []
    field_expressions = term.get("matchFields") or []
    if not expressions and not field_expressions:
        return False
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    fields = {"metadata.name": str(meta.get("name") or "")}
    return all(_requirement_matches(r, labels) for r in expressions) and all(
        _requirement_matches(r, fields) for r in field_expressions
    )


def required_node_affinity_matches(pod: Obj, node: Obj) -> bool:
    """spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution: terms are ORed."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(node_selector_term_matches(t, node) for t in required.get("nodeSelectorTerms") or [])


def node_selector_matches(pod: Obj, node: Obj) -> bool:
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def node_is_schedulable(node: Obj) -> str | None:
    """Why a node takes no new pods (cordoned or not Ready), or None."""
    if (node.get("spec") or {}).get("unschedulable"):
        return "node(s) were unschedulable"
    if not condition_true(node, "Ready"):
        return "node(s) were not ready"
    return None
