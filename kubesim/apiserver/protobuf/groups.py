"""batch/v1, apps/v1, scheduling.k8s.io/v1, rbac.authorization.k8s.io/v1 and policy/v1 messages.

Field numbers: kubernetes/api `<group>/v1/generated.proto`; presence: the Go structs' json tags in
`<group>/v1/types.go`. Every field of these messages is declared.
"""

from __future__ import annotations

from kubesim.apiserver.protobuf.core import OBJECT_REFERENCE, POD_TEMPLATE_SPEC
from kubesim.apiserver.protobuf.meta import CONDITION, INT_OR_STRING, LABEL_SELECTOR, OBJECT_META, TIME
from kubesim.apiserver.protobuf.schema import (
    BOOL,
    INT32,
    INT64,
    STRING,
    Presence,
    field,
    mapping,
    message,
    repeated,
)

BATCH = "k8s.io.api.batch.v1"
APPS = "k8s.io.api.apps.v1"
SCHEDULING = "k8s.io.api.scheduling.v1"
RBAC = "k8s.io.api.rbac.v1"
POLICY = "k8s.io.api.policy.v1"

JOB = f"{BATCH}.Job"
JOB_SPEC = f"{BATCH}.JobSpec"
JOB_STATUS = f"{BATCH}.JobStatus"
JOB_CONDITION = f"{BATCH}.JobCondition"
UNCOUNTED_TERMINATED_PODS = f"{BATCH}.UncountedTerminatedPods"
POD_FAILURE_POLICY = f"{BATCH}.PodFailurePolicy"
POD_FAILURE_POLICY_RULE = f"{BATCH}.PodFailurePolicyRule"
ON_EXIT_CODES = f"{BATCH}.PodFailurePolicyOnExitCodesRequirement"
ON_POD_CONDITIONS = f"{BATCH}.PodFailurePolicyOnPodConditionsPattern"
SUCCESS_POLICY = f"{BATCH}.SuccessPolicy"
SUCCESS_POLICY_RULE = f"{BATCH}.SuccessPolicyRule"
CRON_JOB = f"{BATCH}.CronJob"
CRON_JOB_SPEC = f"{BATCH}.CronJobSpec"
CRON_JOB_STATUS = f"{BATCH}.CronJobStatus"
JOB_TEMPLATE_SPEC = f"{BATCH}.JobTemplateSpec"
DEPLOYMENT = f"{APPS}.Deployment"
DEPLOYMENT_SPEC = f"{APPS}.DeploymentSpec"
DEPLOYMENT_STRATEGY = f"{APPS}.DeploymentStrategy"
ROLLING_UPDATE_DEPLOYMENT = f"{APPS}.RollingUpdateDeployment"
DEPLOYMENT_STATUS = f"{APPS}.DeploymentStatus"
DEPLOYMENT_CONDITION = f"{APPS}.DeploymentCondition"
PRIORITY_CLASS = f"{SCHEDULING}.PriorityClass"
ROLE = f"{RBAC}.Role"
CLUSTER_ROLE = f"{RBAC}.ClusterRole"
AGGREGATION_RULE = f"{RBAC}.AggregationRule"
POLICY_RULE = f"{RBAC}.PolicyRule"
ROLE_BINDING = f"{RBAC}.RoleBinding"
CLUSTER_ROLE_BINDING = f"{RBAC}.ClusterRoleBinding"
SUBJECT = f"{RBAC}.Subject"
ROLE_REF = f"{RBAC}.RoleRef"
POD_DISRUPTION_BUDGET = f"{POLICY}.PodDisruptionBudget"
POD_DISRUPTION_BUDGET_SPEC = f"{POLICY}.PodDisruptionBudgetSpec"
POD_DISRUPTION_BUDGET_STATUS = f"{POLICY}.PodDisruptionBudgetStatus"

OPTIONAL, ALWAYS, NULLABLE = Presence.OPTIONAL, Presence.ALWAYS, Presence.NULLABLE

_BATCH = (
    message(
        BATCH,
        "Job",
        field("metadata", 1, OBJECT_META),
        field("spec", 2, JOB_SPEC),
        field("status", 3, JOB_STATUS),
    ),
    message(
        BATCH,
        "JobSpec",
        field("parallelism", 1, INT32, OPTIONAL),
        field("completions", 2, INT32, OPTIONAL),
        field("activeDeadlineSeconds", 3, INT64, OPTIONAL),
        field("selector", 4, LABEL_SELECTOR, OPTIONAL),
        field("manualSelector", 5, BOOL, OPTIONAL),
        field("template", 6, POD_TEMPLATE_SPEC),
        field("backoffLimit", 7, INT32, OPTIONAL),
        field("ttlSecondsAfterFinished", 8, INT32, OPTIONAL),
        field("completionMode", 9, STRING, OPTIONAL),
        field("suspend", 10, BOOL, OPTIONAL),
        field("podFailurePolicy", 11, POD_FAILURE_POLICY, OPTIONAL),
        field("backoffLimitPerIndex", 12, INT32, OPTIONAL),
        field("maxFailedIndexes", 13, INT32, OPTIONAL),
        field("podReplacementPolicy", 14, STRING, OPTIONAL),
        field("managedBy", 15, STRING, OPTIONAL),
        field("successPolicy", 16, SUCCESS_POLICY, OPTIONAL),
    ),
    message(
        BATCH,
        "JobStatus",
        repeated("conditions", 1, JOB_CONDITION),
        field("startTime", 2, TIME, OPTIONAL),
        field("completionTime", 3, TIME, OPTIONAL),
        field("active", 4, INT32),
        field("succeeded", 5, INT32),
        field("failed", 6, INT32),
        field("completedIndexes", 7, STRING),
        field("uncountedTerminatedPods", 8, UNCOUNTED_TERMINATED_PODS, OPTIONAL),
        field("ready", 9, INT32, OPTIONAL),
        field("failedIndexes", 10, STRING, OPTIONAL),
        field("terminating", 11, INT32, OPTIONAL),
    ),
    message(
        BATCH,
        "JobCondition",
        field("type", 1, STRING, ALWAYS),
        field("status", 2, STRING, ALWAYS),
        field("lastProbeTime", 3, TIME),
        field("lastTransitionTime", 4, TIME),
        field("reason", 5, STRING),
        field("message", 6, STRING),
    ),
    message(
        BATCH,
        "UncountedTerminatedPods",
        repeated("succeeded", 1, STRING),
        repeated("failed", 2, STRING),
    ),
    message(BATCH, "PodFailurePolicy", repeated("rules", 1, POD_FAILURE_POLICY_RULE, NULLABLE)),
    message(
        BATCH,
        "PodFailurePolicyRule",
        field("action", 1, STRING, ALWAYS),
        field("onExitCodes", 2, ON_EXIT_CODES, OPTIONAL),
        repeated("onPodConditions", 3, ON_POD_CONDITIONS),
    ),
    message(
        BATCH,
        "PodFailurePolicyOnExitCodesRequirement",
        field("containerName", 1, STRING, OPTIONAL),
        field("operator", 2, STRING, ALWAYS),
        repeated("values", 3, INT32, NULLABLE),
    ),
    message(
        BATCH,
        "PodFailurePolicyOnPodConditionsPattern",
        field("type", 1, STRING, ALWAYS),
        field("status", 2, STRING, ALWAYS),
    ),
    message(BATCH, "SuccessPolicy", repeated("rules", 1, SUCCESS_POLICY_RULE, NULLABLE)),
    message(
        BATCH,
        "SuccessPolicyRule",
        field("succeededIndexes", 1, STRING, OPTIONAL),
        field("succeededCount", 2, INT32, OPTIONAL),
    ),
    message(
        BATCH,
        "CronJob",
        field("metadata", 1, OBJECT_META),
        field("spec", 2, CRON_JOB_SPEC),
        field("status", 3, CRON_JOB_STATUS),
    ),
    message(
        BATCH,
        "CronJobSpec",
        field("schedule", 1, STRING, ALWAYS),
        field("startingDeadlineSeconds", 2, INT64, OPTIONAL),
        field("concurrencyPolicy", 3, STRING),
        field("suspend", 4, BOOL, OPTIONAL),
        field("jobTemplate", 5, JOB_TEMPLATE_SPEC),
        field("successfulJobsHistoryLimit", 6, INT32, OPTIONAL),
        field("failedJobsHistoryLimit", 7, INT32, OPTIONAL),
        field("timeZone", 8, STRING, OPTIONAL),
    ),
    message(
        BATCH,
        "CronJobStatus",
        repeated("active", 1, OBJECT_REFERENCE),
        field("lastScheduleTime", 4, TIME, OPTIONAL),
        field("lastSuccessfulTime", 5, TIME, OPTIONAL),
    ),
    message(BATCH, "JobTemplateSpec", field("metadata", 1, OBJECT_META), field("spec", 2, JOB_SPEC)),
)

_APPS = (
    message(
        APPS,
        "Deployment",
        field("metadata", 1, OBJECT_META),
        field("spec", 2, DEPLOYMENT_SPEC),
        field("status", 3, DEPLOYMENT_STATUS),
    ),
    message(
        APPS,
        "DeploymentSpec",
        field("replicas", 1, INT32, OPTIONAL),
        field("selector", 2, LABEL_SELECTOR, NULLABLE),
        field("template", 3, POD_TEMPLATE_SPEC),
        field("strategy", 4, DEPLOYMENT_STRATEGY),
        field("minReadySeconds", 5, INT32),
        field("revisionHistoryLimit", 6, INT32, OPTIONAL),
        field("paused", 7, BOOL),
        field("progressDeadlineSeconds", 9, INT32, OPTIONAL),
    ),
    message(
        APPS,
        "DeploymentStrategy",
        field("type", 1, STRING),
        field("rollingUpdate", 2, ROLLING_UPDATE_DEPLOYMENT, OPTIONAL),
    ),
    message(
        APPS,
        "RollingUpdateDeployment",
        field("maxUnavailable", 1, INT_OR_STRING, OPTIONAL),
        field("maxSurge", 2, INT_OR_STRING, OPTIONAL),
    ),
    message(
        APPS,
        "DeploymentStatus",
        field("observedGeneration", 1, INT64),
        field("replicas", 2, INT32),
        field("updatedReplicas", 3, INT32),
        field("availableReplicas", 4, INT32),
        field("unavailableReplicas", 5, INT32),
        repeated("conditions", 6, DEPLOYMENT_CONDITION),
        field("readyReplicas", 7, INT32),
        field("collisionCount", 8, INT32, OPTIONAL),
        field("terminatingReplicas", 9, INT32, OPTIONAL),
    ),
    message(
        APPS,
        "DeploymentCondition",
        field("type", 1, STRING, ALWAYS),
        field("status", 2, STRING, ALWAYS),
        field("reason", 4, STRING),
        field("message", 5, STRING),
        field("lastUpdateTime", 6, TIME),
        field("lastTransitionTime", 7, TIME),
    ),
)

_SCHEDULING = (
    message(
        SCHEDULING,
        "PriorityClass",
        field("metadata", 1, OBJECT_META),
        field("value", 2, INT32, ALWAYS),
        field("globalDefault", 3, BOOL),
        field("description", 4, STRING),
        field("preemptionPolicy", 5, STRING, OPTIONAL),
    ),
)

_RBAC = (
    message(
        RBAC,
        "Role",
        field("metadata", 1, OBJECT_META),
        repeated("rules", 2, POLICY_RULE, NULLABLE),
    ),
    message(
        RBAC,
        "ClusterRole",
        field("metadata", 1, OBJECT_META),
        repeated("rules", 2, POLICY_RULE, NULLABLE),
        field("aggregationRule", 3, AGGREGATION_RULE, OPTIONAL),
    ),
    message(RBAC, "AggregationRule", repeated("clusterRoleSelectors", 1, LABEL_SELECTOR)),
    message(
        RBAC,
        "PolicyRule",
        repeated("verbs", 1, STRING, NULLABLE),
        repeated("apiGroups", 2, STRING),
        repeated("resources", 3, STRING),
        repeated("resourceNames", 4, STRING),
        repeated("nonResourceURLs", 5, STRING),
    ),
    message(
        RBAC,
        "RoleBinding",
        field("metadata", 1, OBJECT_META),
        repeated("subjects", 2, SUBJECT),
        field("roleRef", 3, ROLE_REF),
    ),
    message(
        RBAC,
        "ClusterRoleBinding",
        field("metadata", 1, OBJECT_META),
        repeated("subjects", 2, SUBJECT),
        field("roleRef", 3, ROLE_REF),
    ),
    message(
        RBAC,
        "Subject",
        field("kind", 1, STRING, ALWAYS),
        field("apiGroup", 2, STRING),
        field("name", 3, STRING, ALWAYS),
        field("namespace", 4, STRING),
    ),
    message(
        RBAC,
        "RoleRef",
        field("apiGroup", 1, STRING, ALWAYS),
        field("kind", 2, STRING, ALWAYS),
        field("name", 3, STRING, ALWAYS),
    ),
)

_POLICY = (
    message(
        POLICY,
        "PodDisruptionBudget",
        field("metadata", 1, OBJECT_META),
        field("spec", 2, POD_DISRUPTION_BUDGET_SPEC),
        field("status", 3, POD_DISRUPTION_BUDGET_STATUS),
    ),
    message(
        POLICY,
        "PodDisruptionBudgetSpec",
        field("minAvailable", 1, INT_OR_STRING, OPTIONAL),
        field("selector", 2, LABEL_SELECTOR, OPTIONAL),
        field("maxUnavailable", 3, INT_OR_STRING, OPTIONAL),
        field("unhealthyPodEvictionPolicy", 4, STRING, OPTIONAL),
    ),
    message(
        POLICY,
        "PodDisruptionBudgetStatus",
        field("observedGeneration", 1, INT64),
        mapping("disruptedPods", 2, TIME),
        field("disruptionsAllowed", 3, INT32, ALWAYS),
        field("currentHealthy", 4, INT32, ALWAYS),
        field("desiredHealthy", 5, INT32, ALWAYS),
        field("expectedPods", 6, INT32, ALWAYS),
        repeated("conditions", 7, CONDITION),
    ),
)

MESSAGES = _BATCH + _APPS + _SCHEDULING + _RBAC + _POLICY
