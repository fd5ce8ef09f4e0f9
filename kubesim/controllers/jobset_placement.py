"""Pure parts of JobSet's exclusive placement (kubernetes-sigs/jobset): what its pod webhooks and pod
reconciler decide, on plain pod and node dicts.

Upstream: `pkg/webhooks/pod_webhook.go` (Default, setExclusiveAffinities, ValidateCreate,
leaderPodForFollower, genLeaderPodName, podsOwnedBySameJob, topologyFromPod),
`pkg/controllers/pod_controller.go` (the event filter, IndexPodName, IndexPodJob, removePodNameSuffix,
validatePodPlacements, followerPodTopology, leaderPodTopology, updatePodCondition) and
`pkg/util/placement/placement.go` (IsLeaderPod, GenPodName). Errors carry upstream's messages verbatim:
they reach the client as the webhook's denial message.
"""

from __future__ import annotations

import copy

from placement.constants import (
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_JOB_INDEX_LABEL,
    JOBSET_JOB_KEY_LABEL,
    JOBSET_NAME_LABEL,
    JOBSET_REPLICATED_JOB_NAME_LABEL,
    LEADER_COMPLETION_INDEX,
)

from .jobset_constants import (
    EXCLUSIVE_PLACEMENT_VIOLATION_MESSAGE,
    EXCLUSIVE_PLACEMENT_VIOLATION_REASON,
    NODE_SELECTOR_STRATEGY_ANNOTATION,
    PRIORITY_LABEL,
)
from .objects import Obj, annotations_of, controller_uid, is_deleting, is_terminal, labels_of

DISRUPTION_TARGET: str = "DisruptionTarget"
_MIN_JOBSET_POD_NAME_PARTS = 5
"""<jobset>-<replicatedJob>-<jobIndex>-<podIndex>-<randomSuffix>."""


class PlacementError(Exception):
    """A Go `error` of JobSet's placement code; `message` is upstream's text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NodeNotFound(PlacementError):
    """The cache has no such node: controller-runtime's NotFound status error (code 404)."""

    def __init__(self, name: str) -> None:
        super().__init__(f'nodes "{name}" not found')
        self.name = name


def _name(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("name") or "")


def _namespace(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("namespace") or "")


def _node_name(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def is_jobset_pod(pod: Obj) -> bool:
    """Default / ValidateCreate: a pod is JobSet's when it carries the jobset-name *annotation*."""
    return JOBSET_NAME_LABEL in annotations_of(pod)


def uses_node_selector_strategy(pod: Obj) -> bool:
    return NODE_SELECTOR_STRATEGY_ANNOTATION in annotations_of(pod)


def exclusive_topology(pod: Obj) -> str | None:
    """The exclusive-topology annotation's value (the topology key), None when the pod has none."""
    annotations = annotations_of(pod)
    if JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION not in annotations:
        return None
    return str(annotations[JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION])


def is_leader_pod(pod: Obj) -> bool:
    """placement.IsLeaderPod: the completion-index *annotation* is "0"."""
    return annotations_of(pod).get(JOB_COMPLETION_INDEX_ANNOTATION) == LEADER_COMPLETION_INDEX


def is_scheduled(pod: Obj) -> bool:
    return bool(_node_name(pod))


# --- the mutating webhook (Default) ---------------------------------------------------------------------


def add_priority_label(pod: Obj) -> None:
    """Default: `jobset.sigs.k8s.io/priority` = spec.priority, when the pod has a priority."""
    priority = (pod.get("spec") or {}).get("priority")
    if priority is None:
        return
    meta = pod.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), PRIORITY_LABEL: str(priority)}


def add_exclusive_affinities(pod: Obj) -> None:
    """setExclusiveAffinities: append the leader's required pod affinity (its own job-key) and
    anti-affinity (any other job-key of the same priority), both on the exclusive topology key."""
    labels = labels_of(pod)
    job_key = str(labels.get(JOBSET_JOB_KEY_LABEL, ""))
    topology_key = exclusive_topology(pod) or ""
    affinity = pod.setdefault("spec", {}).setdefault("affinity", {})
    pod_affinity = affinity.setdefault("podAffinity", {})
    anti_affinity = affinity.setdefault("podAntiAffinity", {})
    same_job = {
        "labelSelector": {
            "matchExpressions": [{"key": JOBSET_JOB_KEY_LABEL, "operator": "In", "values": [job_key]}]
        },
        "topologyKey": topology_key,
        "namespaceSelector": {},
    }
    other_jobs_same_priority = {
        "labelSelector": {
            "matchExpressions": [
                {"key": JOBSET_JOB_KEY_LABEL, "operator": "Exists"},
                {"key": JOBSET_JOB_KEY_LABEL, "operator": "NotIn", "values": [job_key]},
                {"key": PRIORITY_LABEL, "operator": "In", "values": [str(labels.get(PRIORITY_LABEL, ""))]},
            ]
        },
        "topologyKey": topology_key,
        "namespaceSelector": {},
    }
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    pod_affinity[required] = [*(pod_affinity.get(required) or []), same_job]
    anti_affinity[required] = [*(anti_affinity.get(required) or []), other_jobs_same_priority]


def set_follower_node_selector(pod: Obj, topology_key: str, topology_value: str) -> None:
    spec = pod.setdefault("spec", {})
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), topology_key: topology_value}


def node_topology(node: Obj, topology_key: str) -> str:
    """topologyFromPod / leaderPodTopology: the leader's node's value of the topology label."""
    labels = labels_of(node)
    if topology_key not in labels:
        raise PlacementError(f"node does not have topology label: {topology_key}")
    return str(labels[topology_key])


# --- leader lookup (leaderPodForFollower) ----------------------------------------------------------------


def gen_pod_name(jobset: str, replicated_job: str, job_index: str, pod_index: str) -> str:
    """placement.GenPodName: `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>`."""
    return f"{jobset}-{replicated_job}-{job_index}-{pod_index}"


def leader_pod_name(pod: Obj) -> str:
    """genLeaderPodName: the name (without random suffix) of index 0 of the follower's child Job."""
    labels = labels_of(pod)
    for key in (JOBSET_NAME_LABEL, JOBSET_REPLICATED_JOB_NAME_LABEL, JOBSET_JOB_INDEX_LABEL):
        if key not in labels:
            raise PlacementError(f"pod missing label: {key}")
    return gen_pod_name(
        str(labels[JOBSET_NAME_LABEL]),
        str(labels[JOBSET_REPLICATED_JOB_NAME_LABEL]),
        str(labels[JOBSET_JOB_INDEX_LABEL]),
        LEADER_COMPLETION_INDEX,
    )


def remove_pod_name_suffix(pod_name: str) -> str | None:
    """removePodNameSuffix: drop the last `-` part; None for names of fewer than five parts."""
    parts = pod_name.split("-")
    if len(parts) < _MIN_JOBSET_POD_NAME_PARTS:
        return None
    return "-".join(parts[:-1])


def index_pod_name(pod: Obj) -> list[str]:
    """IndexPodName (the `podName` field index): exclusive-placement pods by name without suffix."""
    if exclusive_topology(pod) is None:
        return []
    name = remove_pod_name_suffix(_name(pod))
    return [] if name is None else [name]


def index_pod_job(pod: Obj) -> list[str]:
    """IndexPodJob (the `podJobKey` field index): exclusive-placement pods by their job-key label."""
    if exclusive_topology(pod) is None:
        return []
    job_key = labels_of(pod).get(JOBSET_JOB_KEY_LABEL)
    return [] if job_key is None else [str(job_key)]


def in_namespace(index: list[str], pod: Obj) -> list[str]:
    """controller-runtime keys a field index by namespace too (`client.InNamespace` + MatchingFields)."""
    return [f"{_namespace(pod)}/{value}" for value in index]


def pods_owned_by_same_job(leader: Obj, follower: Obj) -> None:
    """podsOwnedBySameJob: raise unless both pods' controller owner references share a uid."""
    follower_owner = controller_uid(follower)
    if follower_owner is None:
        raise PlacementError("follower pod has no owner reference")
    leader_owner = controller_uid(leader)
    if leader_owner is None:
        raise PlacementError(f'leader pod "{_name(leader)}" has no owner reference')
    if follower_owner != leader_owner:
        raise PlacementError(
            f"follower pod owner UID ({follower_owner}) != leader pod owner UID ({leader_owner})"
        )


def select_leader(follower: Obj, leader_name: str, candidates: list[Obj]) -> Obj:
    """leaderPodForFollower after the index lookup: ignore deleting and terminal pods, require exactly
    one leader, owned by the follower's Job."""
    live = [p for p in candidates if not is_deleting(p) and not is_terminal(p)]
    if len(live) != 1:
        raise PlacementError(
            f"expected 1 leader pod ({leader_name}), but got {len(live)}. "
            "this is an expected, transient error"
        )
    pods_owned_by_same_job(live[0], follower)
    return live[0]


# --- the validating webhook (ValidateCreate) --------------------------------------------------------------

FOLLOWER_NODE_SELECTOR_NOT_SET = "follower pod node selector not set"
LEADER_NOT_SCHEDULED = (
    "leader pod not yet scheduled, not creating follower pod. this is an expected, transient error"
)


def follower_selector_problem(pod: Obj, topology_key: str) -> str | None:
    """ValidateCreate's nodeSelector checks for a follower; the denial message, or None when set."""
    selector = (pod.get("spec") or {}).get("nodeSelector")
    if not selector:  # the API server omits an empty map: the webhook decodes it as nil
        return FOLLOWER_NODE_SELECTOR_NOT_SET
    if topology_key not in selector:
        return f"follower pod node selector for topology domain not found. missing selector: {topology_key}"
    return None


# --- the pod reconciler --------------------------------------------------------------------------------


def reconciles(pod: Obj) -> bool:
    """The reconciler's event filter: scheduled, exclusive-placement leader pods not being deleted."""
    return (
        is_leader_pod(pod)
        and is_scheduled(pod)
        and exclusive_topology(pod) is not None
        and not is_deleting(pod)
    )


def leader_pod_topology(node: Obj | None, topology_key: str) -> str:
    """leaderPodTopology: "" when the leader's node is not in the cache (NotFound is ignored upstream)."""
    return "" if node is None else node_topology(node, topology_key)


def follower_topology(pod: Obj, topology_key: str) -> str | None:
    """followerPodTopology: the follower's nodeSelector value for the key (None when it has none)."""
    selector = (pod.get("spec") or {}).get("nodeSelector")
    if not selector or topology_key not in selector:
        return None
    return str(selector[topology_key])


def placements_valid(leader_topology: str, pods: list[Obj], topology_key: str) -> bool:
    """validatePodPlacements: every follower's nodeSelector names the leader's domain. A mismatch with an
    unknown leader domain (its node is gone) is an error, so the reconciler retries instead."""
    for pod in pods:
        if is_leader_pod(pod):
            continue
        follower = follower_topology(pod, topology_key)
        if follower is None or follower != leader_topology:
            if leader_topology == "":
                raise PlacementError("leader topology is unknown (node not found)")
            return False
    return True


def with_violation_condition(pod: Obj, now: str) -> Obj | None:
    """updatePodCondition with DisruptionTarget=True (ExclusivePlacementViolation): the pod with the
    condition added or its status flipped, or None when the pod already has it True."""
    condition = {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": EXCLUSIVE_PLACEMENT_VIOLATION_REASON,
        "message": EXCLUSIVE_PLACEMENT_VIOLATION_MESSAGE,
        "lastTransitionTime": now,
    }
    updated = copy.deepcopy(pod)
    conditions: list[Obj] = list((updated.get("status") or {}).get("conditions") or [])
    for position, existing in enumerate(conditions):
        if existing.get("type") == DISRUPTION_TARGET:
            if existing.get("status") == "True":
                return None
            conditions[position] = condition
            break
    else:
        conditions.append(condition)
    updated.setdefault("status", {})["conditions"] = conditions
    return updated
