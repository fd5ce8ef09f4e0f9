"""The fields of cached objects that the rules read: what the webhook's and the resizer's informers keep.

Caches hold only these (`kubekit.projection.FieldProjection`); a rule that starts reading another field of
a cached leader pod or node must name it here, or the projection tests fail (`tests/placement` checks that
every rule decides the same on the projected object as on the full one).

- A leader pod is read by `placement.leader` (completion index, owning Job by ownerReference or labels,
  deletionTimestamp, phase, nodeName), `placement.admission.leader_state` (name, nodeName) and
  `placement.resize` (its topology annotations, name). Keys and logs use namespace/name; the uid and
  resourceVersion identify the copy.
- The resizer's all-or-nothing queue (`placement.gang`: `gang_of`, `build_gang`, `leader_view`) reads a
  leader's JobSet name, uid (the Events it writes about the JobSet carry it) and restart attempt labels,
  its all-or-nothing, gang-size, gang-queued-at and
  released-at annotations, its creationTimestamp, its scheduling gates and `spec.priority`.
- The queue trusts a gang's size and place only from its Jobs (`GANG_JOB_FIELDS`), and counts a domain
  taken by the bound pods carrying the job-key label (`HOLDER_POD_FIELDS`).
- The retire of a finished Job from the follower policy's params reads its `pin-followers` label, its
  conditions and its uid (`PINNING_JOB_FIELDS`).
- The rewind of a suspended, resized Job reads its resize keys, `spec.suspend` and its progress
  (`REWIND_JOB_FIELDS`).
- The queue reads a node's labels and `spec.unschedulable` (`QUEUE_NODE_FIELDS`). The webhook reads a
  node's labels (`placement.affinity.leader_domain`: the topology key is any label a Job names, so every
  label is kept), and for its capacity warnings `spec.unschedulable` and `status.allocatable`, read on
  arrival into a `placement.capacity.NodeRoom` (ints), not cached as text; nothing else (no conditions,
  images, capacity, addresses).

Plain nested maps: `True` keeps a field whole, a frozenset keeps only those keys of a string map.
"""

from __future__ import annotations

from typing import Final

from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_LABEL,
    CONTROLLER_UID_LABEL,
    GANG_QUEUED_AT_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_COMPLETION_INDEX_LABEL,
    JOB_KEY_LABEL,
    JOB_NAME_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_NAME_LABEL,
    JOBSET_RESTART_ATTEMPT_LABEL,
    JOBSET_UID_LABEL,
    LEADER_DOMAIN_ANNOTATION,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
    PIN_FOLLOWERS_LABEL,
    PRIORITY_LABEL,
    RELEASED_AT_ANNOTATION,
    RESIZE_LABEL,
    ROLE_LABEL,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_MAX_FAILED_INDEXES_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)

FieldSpec = dict[str, object]

LEADER_POD_LABELS: Final = frozenset(
    {
        ROLE_LABEL,
        JOB_NAME_LABEL,
        LEGACY_JOB_NAME_LABEL,
        CONTROLLER_UID_LABEL,
        LEGACY_CONTROLLER_UID_LABEL,
        JOB_COMPLETION_INDEX_LABEL,
        JOBSET_NAME_LABEL,
        JOBSET_UID_LABEL,
        JOBSET_RESTART_ATTEMPT_LABEL,
    }
)
LEADER_POD_ANNOTATIONS: Final = frozenset(
    {
        JOB_COMPLETION_INDEX_ANNOTATION,
        TOPOLOGY_ANNOTATION,
        JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
        ALL_OR_NOTHING_ANNOTATION,
        GANG_SIZE_ANNOTATION,
        GANG_QUEUED_AT_ANNOTATION,
        RELEASED_AT_ANNOTATION,
    }
)

LEADER_POD_FIELDS: Final[FieldSpec] = {
    "metadata": {
        "name": True,
        "namespace": True,
        "uid": True,
        "resourceVersion": True,
        "deletionTimestamp": True,
        "creationTimestamp": True,
        "ownerReferences": True,
        "labels": LEADER_POD_LABELS,
        "annotations": LEADER_POD_ANNOTATIONS,
    },
    "spec": {"nodeName": True, "schedulingGates": True, "priority": True},
    "status": {"phase": True},
}

NODE_FIELDS: Final[FieldSpec] = {"metadata": {"name": True, "resourceVersion": True, "labels": True}}
"""What the webhook caches of a Node: its labels (topology keys, leaders' domains). For the capacity
warnings (`placement.capacity`) whether it is cordoned and its allocatable (parsed into ints) are read as
the node arrives (`webhook.node_labels.NodeLabelKeys.project`) and kept beside it, not as text."""

GANG_JOB_FIELDS: Final[FieldSpec] = {
    "metadata": {
        "name": True,
        "namespace": True,
        "uid": True,
        "resourceVersion": True,
        "ownerReferences": True,
        "labels": frozenset({ALL_OR_NOTHING_LABEL, JOBSET_NAME_LABEL, JOBSET_RESTART_ATTEMPT_LABEL}),
        "annotations": frozenset(
            {ALL_OR_NOTHING_ANNOTATION, GANG_SIZE_ANNOTATION, GANG_QUEUED_AT_ANNOTATION}
        ),
    },
    "spec": {"suspend": True},
}
"""What the queue reads of an admitted all-or-nothing Job (`placement.gang.admitted_gang`): the record the
webhook wrote, its JobSet owner, its uid (its leaders' ownerReference); whether it is suspended."""

PINNING_JOB_FIELDS: Final[FieldSpec] = {
    "metadata": {
        "name": True,
        "namespace": True,
        "uid": True,
        "resourceVersion": True,
        "labels": frozenset({PIN_FOLLOWERS_LABEL}),
    },
    "status": {"conditions": True},
}
"""What the resizer reads of a Job labelled `pin-followers` (`placement.retire.decide_retire`): the label,
whether a condition says it finished, its uid (the patch tests it)."""

REWIND_JOB_FIELDS: Final[FieldSpec] = {
    "metadata": {
        "name": True,
        "namespace": True,
        "uid": True,
        "resourceVersion": True,
        "generation": True,
        "deletionTimestamp": True,
        "labels": frozenset({RESIZE_LABEL, PIN_FOLLOWERS_LABEL}),
        "annotations": frozenset(
            {LEADER_DOMAIN_ANNOTATION, TARGET_COMPLETIONS_ANNOTATION, TARGET_MAX_FAILED_INDEXES_ANNOTATION}
        ),
    },
    "spec": {"suspend": True},
    "status": {
        "conditions": True,
        "succeeded": True,
        "completedIndexes": True,
        "failedIndexes": True,
    },
}
"""What the resizer reads of a resized Job to rewind it while suspended (`placement.rewind.decide_rewind`):
its resize state and recorded domain, the webhook's record, whether it is suspended, finished or made any
progress, its uid and generation (the patch tests them)."""

HOLDER_POD_FIELDS: Final[FieldSpec] = {
    "metadata": {
        "name": True,
        "namespace": True,
        "uid": True,
        "resourceVersion": True,
        "labels": frozenset({JOB_KEY_LABEL, PRIORITY_LABEL}),
    },
    "spec": {"nodeName": True, "priority": True},
    "status": {"phase": True},
}
"""What the queue reads of a bound pod carrying the job-key label (`placement.gang.held_nodes`)."""

QUEUE_NODE_FIELDS: Final[FieldSpec] = {
    "metadata": {"name": True, "resourceVersion": True, "labels": True},
    "spec": {"unschedulable": True},
}
"""What the resizer's all-or-nothing queue reads of a Node (`placement.gang.node_view`): its labels (the
topology keys come from pods at run time, so all of them) and whether it is cordoned."""
