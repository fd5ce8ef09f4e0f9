"""The scheduler's parsed view of one pod (upstream's framework.PodInfo plus what PreFilter computes once).

Everything a scheduling cycle or a queueing hint needs from the pod spec, parsed once per pod version.
A spec that cannot be parsed is recorded as the rejection of the plugin that would fail on it
(InterPodAffinity's PreFilter answers UnschedulableAndUnresolvable "parsing pod: ...").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .interpod import AffinityTerm, required_terms
from .nodefit import UNSCHEDULABLE_TAINT, RequiredNodeAffinity, Resources, pod_requests, tolerates
from .objects import Obj, labels_of, object_key, uid_of

INTER_POD_AFFINITY = "InterPodAffinity"
NODE_AFFINITY = "NodeAffinity"
NODE_RESOURCES_FIT = "NodeResourcesFit"
NODE_UNSCHEDULABLE = "NodeUnschedulable"
SCHEDULING_GATES = "SchedulingGates"
TAINT_TOLERATION = "TaintToleration"


@dataclass(frozen=True)
class PodInfo:
    key: str
    uid: str
    namespace: str
    labels: Mapping[str, str]
    request: Resources
    tolerations: tuple[Mapping[str, Any], ...]
    tolerates_unschedulable: bool
    node_affinity: RequiredNodeAffinity
    affinity_terms: list[AffinityTerm] = field(default_factory=list)
    anti_terms: list[AffinityTerm] = field(default_factory=list)
    parse_error: tuple[str, str] | None = None
    """(plugin, message) when the spec cannot be parsed: the pod is unschedulable with that rejection."""
    priority: int = 0
    """spec.priority (0 when unset): which nominated pods are counted on a node before this one."""

    @classmethod
    def of(cls, pod: Obj) -> PodInfo:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        tolerations = tuple(spec.get("tolerations") or [])
        parse_error: tuple[str, str] | None = None
        try:
            request = pod_requests(pod)
        except ValueError as error:
            request, parse_error = Resources(pods=1), (NODE_RESOURCES_FIT, str(error))
        affinity_terms: list[AffinityTerm] = []
        anti_terms: list[AffinityTerm] = []
        try:
            affinity_terms = required_terms(pod, "podAffinity")
            anti_terms = required_terms(pod, "podAntiAffinity")
        except ValueError as error:
            parse_error = parse_error or (INTER_POD_AFFINITY, f"parsing pod: {error}")
        return cls(
            key=object_key(pod),
            uid=uid_of(pod),
            namespace=str(meta.get("namespace") or "default"),
            labels=dict(labels_of(pod)),
            request=request,
            tolerations=tolerations,
            tolerates_unschedulable=any(tolerates(t, UNSCHEDULABLE_TAINT) for t in tolerations),
            node_affinity=RequiredNodeAffinity.of(pod),
            affinity_terms=affinity_terms,
            anti_terms=anti_terms,
            parse_error=parse_error,
            priority=int(spec.get("priority") or 0),
        )

    def is_pod(self, pod: Obj | None) -> bool:
        """Whether `pod` is this pod (upstream compares UIDs)."""
        if pod is None:
            return False
        uid = uid_of(pod)
        return uid == self.uid if uid and self.uid else object_key(pod) == self.key
