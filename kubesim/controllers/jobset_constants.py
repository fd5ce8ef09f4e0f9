"""JobSet's own names that only kubesim's JobSet model uses (kubernetes-sigs/jobset, v1alpha2).

The keys the product reads too (job-key, jobset-name, exclusive-topology, node-selector, ...) live in
`placement.constants`; these are the ones only JobSet's controller, webhooks and pod reconciler write
or read: `api/jobset/v1alpha2/jobset_types.go`, `pkg/constants/constants.go`, and the names of the
webhook configurations a JobSet install registers (`config/default` with namePrefix `jobset-`,
`config/components/webhook/manifests.yaml` and its objectSelector patches).
"""

from typing import Final

from placement.constants import JOBSET_NODE_SELECTOR_ANNOTATION as NODE_SELECTOR_STRATEGY_ANNOTATION
from placement.constants import PLACEMENT_VIOLATION_REASON as EXCLUSIVE_PLACEMENT_VIOLATION_REASON

__all__ = [
    "DEPENDENCY_COMPLETE",
    "DEPENDENCY_READY",
    "EXCLUSIVE_PLACEMENT_VIOLATION_MESSAGE",
    "EXCLUSIVE_PLACEMENT_VIOLATION_REASON",
    "IN_ORDER",
    "JOBSET_MANAGER_CLIENT",
    "MAX_PARALLELISM",
    "MUTATING_CONFIGURATION",
    "MUTATING_POD_WEBHOOK",
    "NAMESPACED_JOB_LABEL",
    "NODE_SELECTOR_STRATEGY_ANNOTATION",
    "NO_SCHEDULE_TAINT_KEY",
    "PRIORITY_LABEL",
    "STARTUP_COMPLETED",
    "STARTUP_IN_PROGRESS",
    "VALIDATING_CONFIGURATION",
    "VALIDATING_POD_WEBHOOK",
]

# --- api/jobset/v1alpha2/jobset_types.go ---------------------------------------------------------------
# NodeSelectorStrategyKey (exclusive placement by pre-labelled nodes; the pod webhooks skip such pods) is
# read by the product too: `placement.constants.JOBSET_NODE_SELECTOR_ANNOTATION`.
NAMESPACED_JOB_LABEL: Final = "alpha.jobset.sigs.k8s.io/namespaced-job"
"""NamespacedJobKey: node label the node-selector strategy selects on (`<namespace>_<job>`)."""
NO_SCHEDULE_TAINT_KEY: Final = "alpha.jobset.sigs.k8s.io/no-schedule"
"""NoScheduleTaintKey: taint the node-selector strategy's pods tolerate."""
IN_ORDER: Final = "InOrder"
"""StartupPolicyOptions InOrder: replicated Jobs are started one after another."""
DEPENDENCY_READY: Final = "Ready"
DEPENDENCY_COMPLETE: Final = "Complete"
STARTUP_IN_PROGRESS: Final = "StartupPolicyInProgress"
STARTUP_COMPLETED: Final = "StartupPolicyCompleted"

# --- pkg/constants/constants.go -------------------------------------------------------------------------
PRIORITY_LABEL: Final = "jobset.sigs.k8s.io/priority"
"""PriorityKey: the pod webhook copies spec.priority here; the anti-affinity term is scoped by it."""
# ExclusivePlacementViolationReason is the product's too: `placement.constants.PLACEMENT_VIOLATION_REASON`.
EXCLUSIVE_PLACEMENT_VIOLATION_MESSAGE: Final = "Pod violated JobSet exclusive placement policy"
MAX_PARALLELISM: Final = 50
"""MaxParallelism: concurrent deletions of the pod reconciler."""

# --- config/components/webhook (kustomize release manifests, namePrefix "jobset-") ----------------------
MUTATING_CONFIGURATION: Final = "jobset-mutating-webhook-configuration"
VALIDATING_CONFIGURATION: Final = "jobset-validating-webhook-configuration"
MUTATING_POD_WEBHOOK: Final = "mpod.kb.io"
VALIDATING_POD_WEBHOOK: Final = "vpod.kb.io"

# --- the JobSet manager ------------------------------------------------------------------------------------
JOBSET_MANAGER_CLIENT: Final = "jobset-controller"
"""The client name of every request of the JobSet manager (one rest config, one QPS budget)."""
