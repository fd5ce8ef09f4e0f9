"""JobSet's own names that only kubesim's JobSet model uses (kubernetes-sigs/jobset, v1alpha2).

The keys the product reads too (job-key, jobset-name, exclusive-topology, ...) live in
`placement.constants`; these are the ones only JobSet's controller, webhooks and pod reconciler write
or read: `api/jobset/v1alpha2/jobset_types.go`, `pkg/constants/constants.go`, and the names of the
webhook configurations a JobSet install registers (`config/default` with namePrefix `jobset-`,
`config/components/webhook/manifests.yaml` and its objectSelector patches).
"""

from typing import Final

# --- api/jobset/v1alpha2/jobset_types.go ---------------------------------------------------------------
NODE_SELECTOR_STRATEGY_ANNOTATION: Final = "alpha.jobset.sigs.k8s.io/node-selector"
"""NodeSelectorStrategyKey: exclusive placement by pre-labelled nodes; the pod webhooks skip such pods."""
NAMESPACED_JOB_LABEL: Final = "alpha.jobset.sigs.k8s.io/namespaced-job"
"""NamespacedJobKey: node label the node-selector strategy selects on (`<namespace>_<job>`)."""
NO_SCHEDULE_TAINT_KEY: Final = "alpha.jobset.sigs.k8s.io/no-schedule"
"""NoScheduleTaintKey: taint the node-selector strategy's pods tolerate."""

# --- pkg/constants/constants.go -------------------------------------------------------------------------
PRIORITY_LABEL: Final = "jobset.sigs.k8s.io/priority"
"""PriorityKey: the pod webhook copies spec.priority here; the anti-affinity term is scoped by it."""
EXCLUSIVE_PLACEMENT_VIOLATION_REASON: Final = "ExclusivePlacementViolation"
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
