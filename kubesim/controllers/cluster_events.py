"""The cluster events kube-scheduler's queue reacts to, derived from informer updates.

kubernetes/kubernetes pkg/scheduler/framework/events.go: `NodeSchedulingPropertiesChange` turns a node update
into one event per changed scheduling property, `PodSchedulingPropertiesChange` does the same for a pod
update (falling back to a generic Update); pkg/scheduler/eventhandlers.go decides which informer callbacks
emit which event (an assigned pod's add/update/delete, a node's add/update; a node deletion emits none).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .objects import Obj, labels_of


class Resource(enum.Enum):
    POD = "Pod"
    NODE = "Node"


class Action(enum.IntFlag):
    """fwk.ActionType: the bits plugins register for."""

    ADD = enum.auto()
    DELETE = enum.auto()
    UPDATE_NODE_ALLOCATABLE = enum.auto()
    UPDATE_NODE_LABEL = enum.auto()
    UPDATE_NODE_TAINT = enum.auto()
    UPDATE_NODE_CONDITION = enum.auto()
    UPDATE_NODE_ANNOTATION = enum.auto()
    UPDATE_POD_LABEL = enum.auto()
    UPDATE_POD_TOLERATION = enum.auto()
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = enum.auto()
    UPDATE_POD_OTHER = enum.auto()
    """An update no specific extractor recognises (upstream's updatePodOther)."""


@dataclass(frozen=True)
class ClusterEvent:
    resource: Resource
    action: Action
    old: Obj | None = None
    new: Obj | None = None


def node_added(node: Obj) -> ClusterEvent:
    return ClusterEvent(Resource.NODE, Action.ADD, None, node)


def node_updated(old: Obj, new: Obj) -> list[ClusterEvent]:
    """NodeSchedulingPropertiesChange: one event per changed property, in upstream's extractor order."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    actions: list[Action] = []
    if bool(old_spec.get("unschedulable")) and not new_spec.get("unschedulable"):
        actions.append(Action.UPDATE_NODE_TAINT)
    if (old.get("status") or {}).get("allocatable") != (new.get("status") or {}).get("allocatable"):
        actions.append(Action.UPDATE_NODE_ALLOCATABLE)
    if labels_of(old) != labels_of(new):
        actions.append(Action.UPDATE_NODE_LABEL)
    if (old_spec.get("taints") or []) != (new_spec.get("taints") or []):
        actions.append(Action.UPDATE_NODE_TAINT)
    if _condition_statuses(old) != _condition_statuses(new):
        actions.append(Action.UPDATE_NODE_CONDITION)
    if (old.get("metadata") or {}).get("annotations") != (new.get("metadata") or {}).get("annotations"):
        actions.append(Action.UPDATE_NODE_ANNOTATION)
    return [ClusterEvent(Resource.NODE, action, old, new) for action in actions]


def _condition_statuses(node: Obj) -> dict[str, str]:
    return {
        str(c.get("type")): str(c.get("status")) for c in (node.get("status") or {}).get("conditions") or []
    }


def pod_added(pod: Obj) -> ClusterEvent:
    return ClusterEvent(Resource.POD, Action.ADD, None, pod)


def pod_deleted(pod: Obj) -> ClusterEvent:
    return ClusterEvent(Resource.POD, Action.DELETE, pod, None)


def pod_updated(old: Obj, new: Obj) -> list[ClusterEvent]:
    """PodSchedulingPropertiesChange: label, scheduling-gate removal and toleration changes (resources are
    immutable here, so no scale-down), else one generic update."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    actions: list[Action] = []
    if labels_of(old) != labels_of(new):
        actions.append(Action.UPDATE_POD_LABEL)
    if old_spec.get("schedulingGates") and not new_spec.get("schedulingGates"):
        actions.append(Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
    if (old_spec.get("tolerations") or []) != (new_spec.get("tolerations") or []):
        actions.append(Action.UPDATE_POD_TOLERATION)
    return [ClusterEvent(Resource.POD, action, old, new) for action in actions or [Action.UPDATE_POD_OTHER]]
