"""Queueing hints of the plugins kubesim models: which cluster events each registers (`EventsToRegister`)
and whether an event may make a pod it rejected schedulable (its `isSchedulableAfter...` function).

kubernetes/kubernetes pkg/scheduler/framework/plugins/{nodeunschedulable,tainttoleration,nodeaffinity,
noderesources,interpodaffinity,schedulinggates}, with SchedulerQueueingHints enabled (no preCheck), as of the
master branch: InterPodAffinity re-queues on the deletion of a pod whose own anti-affinity matched the
waiting pod (kubernetes#135325), on a label change of the waiting pod itself (#135394), and treats the
waiting pod's anti-affinity terms as matched when any one matches (#139161).
A hint answers True for Queue, False for QueueSkip; a hint that cannot parse what it needs answers Queue,
as upstream does when a hint returns an error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .cluster_events import Action, ClusterEvent, Resource
from .interpod import AffinityTerm, NamespaceLabels, required_terms
from .nodefit import RequiredNodeAffinity, first_untolerated, node_allocatable
from .objects import Obj, labels_of
from .podinfo import (
    INTER_POD_AFFINITY,
    NODE_AFFINITY,
    NODE_RESOURCES_FIT,
    NODE_UNSCHEDULABLE,
    SCHEDULING_GATES,
    TAINT_TOLERATION,
    PodInfo,
)

Hint = Callable[[PodInfo, ClusterEvent, NamespaceLabels], bool]


@dataclass(frozen=True)
class Registration:
    resource: Resource
    actions: Action
    hint: Hint

    def matches(self, event: ClusterEvent) -> bool:
        return self.resource is event.resource and bool(self.actions & event.action)


def _name_of(obj: Obj | None) -> str:
    return str((obj or {}).get("metadata", {}).get("name") or "")


def _node_name(pod: Obj | None) -> str:
    return str((pod or {}).get("spec", {}).get("nodeName") or "")


# --- NodeUnschedulable, TaintToleration, SchedulingGates -----------------------------------------------


def _unschedulable_after_node_change(_pod: PodInfo, event: ClusterEvent, _ns: NamespaceLabels) -> bool:
    """NodeUnschedulable: a schedulable node was added, or a node became schedulable."""
    new_cordoned = bool((event.new or {}).get("spec", {}).get("unschedulable"))
    was_cordoned = event.old is None or bool(event.old.get("spec", {}).get("unschedulable"))
    return was_cordoned and not new_cordoned


def _after_own_update(pod: PodInfo, event: ClusterEvent, _ns: NamespaceLabels) -> bool:
    """The update is of the waiting pod itself (its tolerations changed, or its gates were lifted)."""
    return pod.is_pod(event.new)


def _taints_after_node_change(pod: PodInfo, event: ClusterEvent, _ns: NamespaceLabels) -> bool:
    """TaintToleration: the node's taints went from untolerated (or absent node) to tolerated."""

    def untolerated(node: Obj | None) -> bool:
        if node is None:
            return True
        return first_untolerated(pod.tolerations, node.get("spec", {}).get("taints") or []) is not None

    return untolerated(event.old) and not untolerated(event.new)


# --- NodeAffinity -------------------------------------------------------------------------------------


def _node_affinity_after_node_change(pod: PodInfo, event: ClusterEvent, _ns: NamespaceLabels) -> bool:
    """NodeAffinity: the added node matches, or an updated node went from not matching to matching."""
    affinity: RequiredNodeAffinity = pod.node_affinity
    matched, error = affinity.match(_name_of(event.new), labels_of(event.new or {}))
    if error:
        return True
    if not matched:
        return False
    if event.old is None:
        return True
    was_matched, was_error = affinity.match(_name_of(event.old), labels_of(event.old))
    return was_error or not was_matched


# --- NodeResourcesFit -----------------------------------------------------------------------------------


def _fit_after_pod_delete(_pod: PodInfo, event: ClusterEvent, _ns: NamespaceLabels) -> bool:
    """NodeResourcesFit: any scheduled (or nominated) pod's deletion may free room."""
    old = event.old or {}
    return bool(_node_name(old) or old.get("status", {}).get("nominatedNodeName"))


def _fit_after_node_change(pod: PodInfo, event: ClusterEvent, _ns: NamespaceLabels) -> bool:
    """NodeResourcesFit: the node could hold the pod when empty (isFit), and was added or grew in a
    resource the pod requests (haveAnyRequestedResourcesIncreased)."""
    request = pod.request
    new = node_allocatable(event.new or {})
    if new.pods < 1 or request.cpu > new.cpu or request.memory > new.memory or request.gpu > new.gpu:
        return False
    if event.old is None:
        return True
    old = node_allocatable(event.old)
    return (
        new.pods > old.pods
        or (request.cpu > 0 and new.cpu > old.cpu)
        or (request.memory > 0 and new.memory > old.memory)
        or (request.gpu > 0 and new.gpu > old.gpu)
    )


# --- InterPodAffinity -----------------------------------------------------------------------------------

_NO_NAMESPACE_LABELS: NamespaceLabels = {}


def _matches_all(terms: list[AffinityTerm], pod: Obj) -> bool:
    """podMatchesAllAffinityTerms as the hint calls it: the hint rebuilds the waiting pod's terms without
    PreFilter's namespaceSelector expansion and passes no namespace labels, so a non-empty namespaceSelector
    only ever matches the namespaces the term lists (an upstream quirk, reproduced)."""
    namespace = str(pod.get("metadata", {}).get("namespace") or "default")
    labels = labels_of(pod)
    return bool(terms) and all(t.matches_pod(namespace, labels, _NO_NAMESPACE_LABELS) for t in terms)


def _matches_any(terms: list[AffinityTerm], pod: Obj) -> bool:
    namespace = str(pod.get("metadata", {}).get("namespace") or "default")
    labels = labels_of(pod)
    return any(t.matches_pod(namespace, labels, _NO_NAMESPACE_LABELS) for t in terms)


def _interpod_after_pod_change(pod: PodInfo, event: ClusterEvent, namespaces: NamespaceLabels) -> bool:
    """InterPodAffinity (isSchedulableAfterPodChange)."""
    old, new = event.old, event.new
    if new is not None and old is not None and pod.is_pod(new) and labels_of(old) != labels_of(new):
        return True
    if (new is not None and not _node_name(new)) or (old is not None and not _node_name(old)):
        return False
    if pod.parse_error is not None and pod.parse_error[0] == INTER_POD_AFFINITY:
        return True
    terms, anti_terms = pod.affinity_terms, pod.anti_terms
    if old is not None and new is not None:
        if not _matches_all(terms, old) and _matches_all(terms, new):
            return True
        return _matches_any(anti_terms, old) and not _matches_any(anti_terms, new)
    if new is not None:
        return _matches_all(terms, new)
    if old is None:
        return False
    if _matches_any(anti_terms, old):
        return True
    try:
        its_anti_terms = required_terms(old, "podAntiAffinity")
    except ValueError:
        return True
    return any(t.matches_pod(pod.namespace, pod.labels, namespaces) for t in its_anti_terms)


def _interpod_after_node_change(pod: PodInfo, event: ClusterEvent, _ns: NamespaceLabels) -> bool:
    """InterPodAffinity (isSchedulableAfterNodeChange): a node now offering a new domain of an affinity
    term's key; for anti-affinity any added node, or a node that left or changed a term's domain."""
    if pod.parse_error is not None and pod.parse_error[0] == INTER_POD_AFFINITY:
        return True
    new_labels = labels_of(event.new or {})
    old_labels = None if event.old is None else labels_of(event.old)
    for term in pod.affinity_terms:
        value = new_labels.get(term.topology_key)
        if value is not None and (old_labels is None or old_labels.get(term.topology_key) != value):
            return True
    for term in pod.anti_terms:
        if old_labels is None:
            return True
        value = old_labels.get(term.topology_key)
        if value is not None and new_labels.get(term.topology_key) != value:
            return True
    return False


# --- the registry ---------------------------------------------------------------------------------------

_POD, _NODE = Resource.POD, Resource.NODE

REGISTRATIONS: Mapping[str, tuple[Registration, ...]] = {
    NODE_UNSCHEDULABLE: (
        Registration(_NODE, Action.ADD | Action.UPDATE_NODE_TAINT, _unschedulable_after_node_change),
        Registration(_POD, Action.UPDATE_POD_TOLERATION, _after_own_update),
    ),
    TAINT_TOLERATION: (
        Registration(_NODE, Action.ADD | Action.UPDATE_NODE_TAINT, _taints_after_node_change),
        Registration(_POD, Action.UPDATE_POD_TOLERATION, _after_own_update),
    ),
    NODE_AFFINITY: (
        Registration(_NODE, Action.ADD | Action.UPDATE_NODE_LABEL, _node_affinity_after_node_change),
    ),
    NODE_RESOURCES_FIT: (
        Registration(_POD, Action.DELETE, _fit_after_pod_delete),
        Registration(_NODE, Action.ADD | Action.UPDATE_NODE_ALLOCATABLE, _fit_after_node_change),
    ),
    INTER_POD_AFFINITY: (
        Registration(_POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE, _interpod_after_pod_change),
        Registration(_NODE, Action.ADD | Action.UPDATE_NODE_LABEL, _interpod_after_node_change),
    ),
    SCHEDULING_GATES: (Registration(_POD, Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED, _after_own_update),),
}

_ALL = tuple(r for registrations in REGISTRATIONS.values() for r in registrations)


def interesting(event: ClusterEvent) -> bool:
    """isEventOfInterest: some plugin registered for the event (others are dropped at once)."""
    return any(r.matches(event) for r in _ALL)


def worth_requeuing(
    pod: PodInfo, rejectors: Iterable[str], event: ClusterEvent, namespaces: NamespaceLabels
) -> bool:
    """isPodWorthRequeuing: a pod with no rejecting plugin always moves; otherwise it moves when the hint of
    one of its rejecting plugins registered for the event says Queue."""
    plugins = tuple(rejectors)
    if not plugins:
        return True
    return any(
        registration.hint(pod, event, namespaces)
        for plugin in plugins
        for registration in REGISTRATIONS.get(plugin, ())
        if registration.matches(event)
    )


def affinity_terms_match(pod: PodInfo, other: Obj, namespaces: NamespaceLabels) -> bool:
    """getUnschedulablePodsWithCrossTopologyTerm: whether one of the waiting pod's required affinity terms
    matches a scheduled pod that was added or updated (only such waiting pods are offered that event)."""
    namespace = str(other.get("metadata", {}).get("namespace") or "default")
    labels = labels_of(other)
    return any(t.matches_pod(namespace, labels, namespaces) for t in pod.affinity_terms)
