"""Pure node-level scheduling predicates: resources, taints/tolerations, node selector and node affinity.

The scheduler's per-node filters NodeUnschedulable, TaintToleration, NodeAffinity and NodeResourcesFit
(kubernetes/kubernetes pkg/scheduler/framework/plugins/*), each a function of one pod and one node.
Node selector terms are compiled once per pod the way k8s.io/component-helpers' nodeaffinity package does it
(`NewLazyErrorNodeSelector`): a term whose requirements do not convert to a selector (an unknown operator,
an invalid label key or value, a `Gt` bound that is no integer) matches no node, and the others still may.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placement.constants import GPU_RESOURCE

from .objects import Obj
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

UNSCHEDULABLE_TAINT: Mapping[str, str] = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
"""A pod tolerating this taint also ignores `spec.unschedulable` (NodeUnschedulable's Filter)."""


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """core/v1 Toleration.ToleratesTaint: effect (empty = all), key (empty = all), then Equal/Exists."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


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


def taint_reason(taint: Mapping[str, Any]) -> str:
    """TaintToleration's Filter message for the first untolerated taint."""
    return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"


# --- label syntax (k8s.io/apimachinery pkg/util/validation) ----------------------------------------------

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_INT64 = re.compile(r"^[+-]?[0-9]+$")


def label_key_error(key: str) -> str | None:
    """IsQualifiedName: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"key {key!r}: prefix part must be a DNS subdomain"
    if not name or len(name) > 63 or not _NAME.match(name):
        return f"key {key!r}: name part must consist of alphanumeric characters, '-', '_' or '.' (63 at most)"
    return None


def label_value_error(value: str) -> str | None:
    """IsValidLabelValue: empty, or at most 63 alphanumerics, '-', '_' or '.', alphanumeric at both ends."""
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return (
            f"Invalid value: {value!r}: a valid label must be an empty string or consist of alphanumeric "
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        )
    return None


def _int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64), or None."""
    if not _INT64.match(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


# --- node selector and required node affinity ----------------------------------------------------------


@dataclass(frozen=True)
class LabelRequirement:
    """labels.Requirement from a NodeSelectorRequirement (In, NotIn, Exists, DoesNotExist, Gt, Lt)."""

    key: str
    operator: str
    values: frozenset[str]
    bound: int = 0
    """The integer of a Gt/Lt requirement."""

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        operator = self.operator
        if operator == "In":
            return value is not None and value in self.values
        if operator == "NotIn":
            return value is None or value not in self.values
        if operator == "Exists":
            return value is not None
        if operator == "DoesNotExist":
            return value is None
        actual = None if value is None else _int64(value)
        if actual is None:
            return False
        return actual > self.bound if operator == "Gt" else actual < self.bound


@dataclass(frozen=True)
class FieldRequirement:
    """One matchFields entry: `key` (metadata.name is the only node field) equal or not equal to `value`."""

    key: str
    value: str
    equal: bool

    def matches(self, fields: Mapping[str, str]) -> bool:
        return (fields.get(self.key, "") == self.value) == self.equal


def _label_requirement(raw: Mapping[str, Any]) -> LabelRequirement | str:
    """nodeSelectorRequirementsAsSelector + labels.NewRequirement: the requirement, or why it is invalid."""
    key = str(raw.get("key") or "")
    operator = str(raw.get("operator") or "")
    values = [str(v) for v in raw.get("values") or []]
    errors: list[str] = []
    if operator not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
        return f"operator: Unsupported value: {operator!r}"
    key_error = label_key_error(key)
    if key_error:
        errors.append(key_error)
    bound = 0
    if operator in ("In", "NotIn") and not values:
        errors.append("values: for 'in', 'notin' operators, values set can't be empty")
    if operator in ("Exists", "DoesNotExist") and values:
        errors.append("values: values set must be empty for exists and does not exist")
    if operator in ("Gt", "Lt"):
        if len(values) != 1:
            errors.append("values: for 'Gt', 'Lt' operators, exactly one value is required")
        parsed = [_int64(v) for v in values]
        if any(p is None for p in parsed):
            errors.append("values: for 'Gt', 'Lt' operators, the value must be an integer")
        elif len(parsed) == 1 and parsed[0] is not None:
            bound = parsed[0]
    errors += [e for e in (label_value_error(v) for v in values) if e]
    if errors:
        return "; ".join(errors)
    return LabelRequirement(key, operator, frozenset(values), bound)


def _field_requirement(raw: Mapping[str, Any]) -> FieldRequirement | str:
    """nodeSelectorRequirementsAsFieldSelector: In/NotIn with exactly one value."""
    operator = str(raw.get("operator") or "")
    values = [str(v) for v in raw.get("values") or []]
    if operator not in ("In", "NotIn"):
        return f"operator: Unsupported value: {operator!r}"
    if len(values) != 1:
        return f"values: Invalid value: {values!r}: must have one element"
    return FieldRequirement(str(raw.get("key") or ""), values[0], operator == "In")


@dataclass(frozen=True)
class NodeSelectorTerm:
    """A compiled NodeSelectorTerm: its requirements are ANDed; a term with a parse error matches nothing."""

    labels: tuple[LabelRequirement, ...] | None
    fields: tuple[FieldRequirement, ...] | None
    error: str | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> NodeSelectorTerm:
        labels: list[LabelRequirement] | None = None
        fields: list[FieldRequirement] | None = None
        errors: list[str] = []
        if raw.get("matchExpressions"):
            labels = []
            for item in raw["matchExpressions"]:
                parsed = _label_requirement(item)
                if isinstance(parsed, str):
                    errors.append(f"matchExpressions: {parsed}")
                else:
                    labels.append(parsed)
        if raw.get("matchFields"):
            fields = []
            for item in raw["matchFields"]:
                field = _field_requirement(item)
                if isinstance(field, str):
                    errors.append(f"matchFields: {field}")
                else:
                    fields.append(field)
        return cls(
            None if labels is None else tuple(labels),
            None if fields is None else tuple(fields),
            "; ".join(errors) or None,
        )

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if self.error is not None:
            return False
        if self.labels is not None and not all(r.matches(labels) for r in self.labels):
            return False
        fields = {"metadata.name": name} if name else {}
        return self.fields is None or not fields or all(r.matches(fields) for r in self.fields)


@dataclass(frozen=True)
class RequiredNodeAffinity:
    """`spec.nodeSelector` plus `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`
    (component-helpers nodeaffinity.GetRequiredNodeAffinity): the selector must match, then one term must."""

    node_selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[NodeSelectorTerm, ...] | None = None
    """None: the pod has no required node affinity. Terms with neither expressions nor fields are dropped."""

    @classmethod
    def of(cls, pod: Obj) -> RequiredNodeAffinity:
        spec = pod.get("spec") or {}
        selector = tuple((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items())
        node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if required is None:
            return cls(selector, None)
        terms = tuple(
            NodeSelectorTerm.parse(t)
            for t in required.get("nodeSelectorTerms") or []
            if t and (t.get("matchExpressions") or t.get("matchFields"))
        )
        return cls(selector, terms)

    @property
    def active(self) -> bool:
        """False when NodeAffinity's PreFilter returns Skip (no selector, no required affinity)."""
        return bool(self.node_selector) or self.terms is not None

    def match(self, name: str, labels: Mapping[str, str]) -> tuple[bool, bool]:
        """(matches, parse error reported): LazyErrorNodeSelector.Match reports the terms' parse errors only
        when no term matched."""
        if any(labels.get(k) != v for k, v in self.node_selector):
            return False, False
        if self.terms is None:
            return True, False
        for term in self.terms:
            if term.matches(name, labels):
                return True, False
        return False, any(t.error is not None for t in self.terms)

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        return self.match(name, labels)[0]

    def prefilter_node_names(self) -> frozenset[str] | None:
        """NodeAffinity's PreFilterResult: the node names every term pins with `metadata.name In`, unioned
        over the terms; None when some term pins no name (all nodes); empty when the pins conflict."""
        if not self.terms:
            return None
        names: set[str] = set()
        for term in self.terms:
            pinned: set[str] | None = None
            for requirement in term.fields or ():
                if requirement.key == "metadata.name" and requirement.equal:
                    pinned = {requirement.value} if pinned is None else pinned & {requirement.value}
            if pinned is None:
                return None
            names |= pinned
        return frozenset(names)


def required_node_affinity_matches(pod: Obj, node: Obj) -> bool:
    meta = node.get("metadata") or {}
    return RequiredNodeAffinity.of(pod).matches(str(meta.get("name") or ""), meta.get("labels") or {})


def node_selector_matches(pod: Obj, node: Obj) -> bool:
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())
