"""Every label, annotation, gate and value this project reads or writes (docs/design.md, "Keys").

The one place these strings live: import them, never retype them.
"""

from enum import StrEnum
from typing import Final

DOMAIN: Final = "exclusive-placement.io"

# --- Input: what users (or JobSet) put on a Job / pod template -------------------------------------
TOPOLOGY_ANNOTATION: Final = f"{DOMAIN}/topology"
"""Our topology key annotation; wins over JobSet's when both are set."""
STRATEGY_ANNOTATION: Final = f"{DOMAIN}/strategy"
"""Optional per-Job strategy; the webhook's configured default otherwise."""

# --- Written by this project ----------------------------------------------------------------------
JOB_KEY_LABEL: Final = f"{DOMAIN}/job-key"
"""Pod label every affinity term selects on: JobSet's job-key when present, else a stable hash."""
ROLE_LABEL: Final = f"{DOMAIN}/role"
PRIORITY_LABEL: Final = f"{DOMAIN}/priority"
"""Pod label: the pod's `spec.priority` ("0" when unset); the leader's anti-affinity is scoped to it
(docs/design.md, "Priorities and preemption"), as JobSet's `jobset.sigs.k8s.io/priority`."""
DEFAULT_PRIORITY: Final = 0
"""The priority of a pod without one: the Priority admission plugin's value when no PriorityClass is
the global default (`scheduling.DefaultPriorityWhenNoDefaultClassExists`), and the scheduler's reading of
an unset `spec.priority` (`corev1helpers.PodPriority`)."""
ROLE_LEADER: Final = "leader"
ROLE_FOLLOWER: Final = "follower"

TARGET_COMPLETIONS_ANNOTATION: Final = f"{DOMAIN}/target-completions"
TARGET_PARALLELISM_ANNOTATION: Final = f"{DOMAIN}/target-parallelism"
TARGET_MAX_FAILED_INDEXES_ANNOTATION: Final = f"{DOMAIN}/target-max-failed-indexes"
"""spec.maxFailedIndexes lowered to 1 while the Job is at size 1 (docs/design.md, "Shrinking safely")."""
ELASTIC_FALLBACK_ANNOTATION: Final = f"{DOMAIN}/elastic-fallback"
"""On a Job the webhook admitted with `gate` although it asked for `elastic` (by annotation or default): why
elastic was not possible. The admission warning is seen once by whoever created the Job (for a JobSet child
Job, the JobSet controller); this stays readable (`kubectl exclusive-placement explain`)."""
LEADER_DOMAIN_ANNOTATION: Final = f"{DOMAIN}/leader-domain"
KUEUE_QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"
"""The LocalQueue a Job or JobSet asks Kueue to queue it in."""
"""On a resized Job: its leader's domain (the topology label's value on the leader's Node), written by the
resizer in the resize patch itself. The pod MutatingAdmissionPolicy pins the followers to it (docs/webhook.md,
"The policy path"); a resize key (`placement.reserved`): nobody else may write it."""
RESIZE_LABEL: Final = f"{DOMAIN}/resize"
RESIZE_PENDING: Final = "pending"
RESIZE_DONE: Final = "done"
PIN_FOLLOWERS_LABEL: Final = f"{DOMAIN}/pin-followers"
"""Job label "true" while the follower MutatingAdmissionPolicy should pin the Job's followers: the binding's
`paramRef.selector` (docs/webhook.md, "Two paths for pods"). The resizer writes it in the resize patch,
with `leader-domain`, and removes it once the Job finished (`placement.retire`), so the policy's params are
the resized Jobs still running, not every one a namespace ever kept. A resize key (`placement.reserved`)."""
PIN_FOLLOWERS: Final = "true"
PIN_SHARD_LABEL: Final = f"{DOMAIN}/pin-shard"
"""Label the Job webhook writes on a Job it shrinks (elastic) and on its pod template, so the Job's pods carry
it: `placement.objects.pin_shard`, a stable hash of `<namespace>/<name>` modulo the follower shards. The
chart binds the follower policy once per shard, each binding matching the pods of one shard and taking as
params only the pin-followers Jobs of that shard, so a follower is evaluated against the running resized
Jobs of its shard, not of its whole namespace (docs/webhook.md, "Two paths for pods"). Not a resize key: a
wrong value only makes the Job's own followers unpinnable by the API server (they are then gated and the
resizer pins them)."""
DEFAULT_FOLLOWER_SHARDS: Final = 64
"""How many shards the follower policy's bindings split a namespace's resized Jobs into (the webhook's
`--follower-shards`, the chart's `webhook.admission.pods.followerShards`). 1: one shard, label "0"."""
MAX_FOLLOWER_SHARDS: Final = 64

LEADER_SCHEDULED_GATE: Final = f"{DOMAIN}/leader-scheduled"
"""Scheduling gate on followers (scheduling-gate strategy) until the leader binds."""

PLACEMENT_VIOLATION_REASON: Final = "ExclusivePlacementViolation"
"""Reason of the DisruptionTarget condition on a follower the resizer deletes (JobSet's own reason)."""

# --- All-or-nothing placement per JobSet (docs/design.md, "All-or-nothing") -------------------------------
ALL_OR_NOTHING_ANNOTATION: Final = f"{DOMAIN}/all-or-nothing"
"""On a JobSet: "true" / "false" overrides the webhook's default (`--all-or-nothing`). Written "true" by the
Job webhook on the child Jobs and their pod templates of an all-or-nothing JobSet (so its pods carry it)."""
ALL_OR_NOTHING_GATE: Final = f"{DOMAIN}/all-or-nothing"
"""Scheduling gate on the leader pods of all-or-nothing Jobs until the resizer admits their JobSet."""
ALL_OR_NOTHING_LABEL: Final = f"{DOMAIN}/all-or-nothing"
"""Job label "true", written by the Job webhook with ALL_OR_NOTHING_ANNOTATION on the Job alone: what the
resizer's informer of admitted all-or-nothing Jobs selects (an annotation cannot be selected)."""
GANG_SIZE_ANNOTATION: Final = f"{DOMAIN}/gang-size"
"""Written with ALL_OR_NOTHING_ANNOTATION: how many exclusive Jobs the JobSet has (one domain each)."""
GANG_QUEUED_AT_ANNOTATION: Final = f"{DOMAIN}/gang-queued-at"
"""Written with ALL_OR_NOTHING_ANNOTATION: the JobSet's creationTimestamp, the gang's place in the FIFO."""
RELEASED_AT_ANNOTATION: Final = f"{DOMAIN}/released-at"
"""Written by the resizer on an all-or-nothing leader with the gate's removal (RFC 3339): the timeout's
clock, readable by any resizer replica."""
ALL_OR_NOTHING_STEPPED_OVER_REASON: Final = "AllOrNothingSteppedOver"
"""Reason of the resizer's Event on a JobSet that waited past the bound and is stepped over (read back by
`kubectl exclusive-placement status`: how long it waited is the resizer's count, in no object)."""
ALL_OR_NOTHING_TIMEOUT_REASON: Final = "ExclusivePlacementAllOrNothingTimeout"
"""Reason of the DisruptionTarget condition the resizer once put on the leaders it deleted after a time-out;
it suspends their Jobs instead now."""


# --- Strategies (docs/design.md, "Strategies") --------------------------------------------------------
class Strategy(StrEnum):
    """How followers are kept out of the domain until their leader is placed; the annotation's values."""

    ELASTIC = "elastic"
    """Admit the Job at size 1; the resizer restores its size once the leader binds."""
    GATE = "gate"
    """JobSet's behaviour: reject follower pods until the leader is scheduled."""
    SCHEDULING_GATE = "scheduling-gate"
    """Create followers with a scheduling gate; the resizer pins and releases them."""
    AFFINITY = "affinity"
    """Every pod gets the leader's affinity terms (JobSet's original implementation)."""


STRATEGIES: Final[tuple[Strategy, ...]] = tuple(Strategy)
DEFAULT_STRATEGY: Final = Strategy.ELASTIC

# --- JobSet's keys (read; JobSet's controller writes them) --------------------------------------------
JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: Final = "alpha.jobset.sigs.k8s.io/exclusive-topology"
JOBSET_NODE_SELECTOR_ANNOTATION: Final = "alpha.jobset.sigs.k8s.io/node-selector"
"""JobSet's node-selector mode (pools pre-labelled by the user): pods are left to their own nodeSelector."""
JOBSET_NAME_LABEL: Final = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID_LABEL: Final = "jobset.sigs.k8s.io/jobset-uid"
"""JobSet's controller labels its child Jobs and their pods with the JobSet's uid."""
JOBSET_REPLICATED_JOB_NAME_LABEL: Final = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_JOB_INDEX_LABEL: Final = "jobset.sigs.k8s.io/job-index"
JOBSET_JOB_KEY_LABEL: Final = "jobset.sigs.k8s.io/job-key"
JOBSET_RESTART_ATTEMPT_LABEL: Final = "jobset.sigs.k8s.io/restart-attempt"
JOBSET_REPLICATED_JOB_REPLICAS_LABEL: Final = "jobset.sigs.k8s.io/replicatedjob-replicas"
JOBSET_GROUP: Final = "jobset.x-k8s.io"
JOBSET_VERSION: Final = "v1alpha2"
JOBSET_KIND: Final = "JobSet"
JOBSET_PLURAL: Final = "jobsets"
JOBSET_IN_ORDER: Final = "InOrder"
"""spec.startupPolicy.startupPolicyOrder that starts replicated Jobs one after another."""
JOBSET_DEPENDENCY_READY: Final = "Ready"
"""spec.replicatedJobs[].dependsOn[].status that waits for the named replicated Job's readiness."""

# --- Kubernetes' own keys ------------------------------------------------------------------------------
JOB_COMPLETION_INDEX_ANNOTATION: Final = "batch.kubernetes.io/job-completion-index"
JOB_COMPLETION_INDEX_LABEL: Final = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL: Final = "job-name"
LEGACY_CONTROLLER_UID_LABEL: Final = "controller-uid"
DISRUPTION_TARGET_CONDITION: Final = "DisruptionTarget"
"""Pod condition a podFailurePolicy can match (`onPodConditions`) to ignore a deletion."""
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
GKE_NODEPOOL_LABEL: Final = "cloud.google.com/gke-nodepool"
RACK_LABEL: Final = "topology.kubernetes.io/rack"
METADATA_NAME_LABEL: Final = "kubernetes.io/metadata.name"
"""Namespace label the API server sets; used by namespaceSelector exemptions."""
GPU_RESOURCE: Final = "nvidia.com/gpu"

LEADER_COMPLETION_INDEX: Final = "0"
MAX_HOSTNAME_LENGTH: Final = 63
"""A pod hostname `<job>-<index>` is a DNS label."""
