"""Defaulting the API server applies before admission (webhooks see defaulted objects, as in Kubernetes)."""

from __future__ import annotations

from typing import Any

from placement.constants import (
    CONTROLLER_UID_LABEL,
    JOB_NAME_LABEL,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
    METADATA_NAME_LABEL,
)

Obj = dict[str, Any]

NOT_READY_TOLERATIONS = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)


def default_container(container: Obj) -> None:
    image = str(container.get("image", ""))
    tag_latest = ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
    container.setdefault("imagePullPolicy", "Always" if tag_latest else "IfNotPresent")
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("resources", {})


def default_pod_spec(spec: Obj, *, restart_policy: str = "Always") -> None:
    spec.setdefault("restartPolicy", restart_policy)
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            if isinstance(container, dict):
                default_container(container)


def default_pod(pod: Obj) -> None:
    spec = pod.setdefault("spec", {})
    default_pod_spec(spec)
    spec.setdefault("enableServiceLinks", True)
    tolerations = spec.setdefault("tolerations", [])
    present = {t.get("key") for t in tolerations if isinstance(t, dict)}
    tolerations.extend(dict(t) for t in NOT_READY_TOLERATIONS if t["key"] not in present)


def default_job(job: Obj) -> None:
    spec = job.setdefault("spec", {})
    spec.setdefault("completionMode", "NonIndexed")
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    spec.setdefault("manualSelector", False)
    template = spec.setdefault("template", {})
    template.setdefault("metadata", {})
    default_pod_spec(template.setdefault("spec", {}), restart_policy="Never")


def default_cron_job(cron_job: Obj) -> None:
    """SetDefaults_CronJob (k/k pkg/apis/batch/v1/defaults.go), and the pod defaults of its Job template
    (the template's JobSpec keeps what was sent: SetDefaults_Job applies to Jobs only)."""
    spec = cron_job.setdefault("spec", {})
    if not spec.get("concurrencyPolicy"):
        spec["concurrencyPolicy"] = "Allow"
    for key, value in (("suspend", False), ("successfulJobsHistoryLimit", 3), ("failedJobsHistoryLimit", 1)):
        if spec.get(key) is None:
            spec[key] = value
    job_spec = spec.setdefault("jobTemplate", {}).setdefault("spec", {})
    template = job_spec.setdefault("template", {})
    default_pod_spec(template.setdefault("spec", {}), restart_policy="Never")


def default_priority_class(priority_class: Obj) -> None:
    """SetDefaults_PriorityClass (k/k pkg/apis/scheduling/v1/defaults.go)."""
    if priority_class.get("preemptionPolicy") is None:
        priority_class["preemptionPolicy"] = "PreemptLowerPriority"


def prepare_job(job: Obj) -> None:
    """Selector and template labels keyed by the Job's uid (PrepareForCreate: after mutating admission)."""
    meta = job["metadata"]
    spec = job.setdefault("spec", {})
    template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
    uid = meta["uid"]
    if not spec.get("manualSelector"):
        spec.setdefault("selector", {"matchLabels": {CONTROLLER_UID_LABEL: uid}})
        labels = template_meta.setdefault("labels", {})
        labels.setdefault(CONTROLLER_UID_LABEL, uid)
        labels.setdefault(JOB_NAME_LABEL, meta["name"])
        labels.setdefault(LEGACY_CONTROLLER_UID_LABEL, uid)
        labels.setdefault(LEGACY_JOB_NAME_LABEL, meta["name"])
    job["status"] = {}


def qos_class(spec: Obj) -> str:
    """Guaranteed: every container has equal cpu and memory limits and requests; BestEffort: none set."""
    containers = [
        c for c in (spec.get("containers") or []) + (spec.get("initContainers") or []) if isinstance(c, dict)
    ]
    any_set = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        if requests or limits:
            any_set = True
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def prepare_pod(pod: Obj) -> None:
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(pod.get("spec") or {})}


def prepare_namespace(ns: Obj) -> None:
    meta = ns["metadata"]
    meta.setdefault("labels", {})[METADATA_NAME_LABEL] = meta["name"]
    ns.setdefault("spec", {"finalizers": ["kubernetes"]})
    ns["status"] = {"phase": "Active"}


def prepare_jobset(jobset: Obj) -> None:
    jobset["status"] = {}


DEFAULTERS = {
    "pods": default_pod,
    "jobs": default_job,
    "cronjobs": default_cron_job,
    "priorityclasses": default_priority_class,
}
PREPARERS = {
    "pods": prepare_pod,
    "jobs": prepare_job,
    "namespaces": prepare_namespace,
    "jobsets": prepare_jobset,
}


def apply_defaults(resource: str, obj: Obj) -> None:
    """Static defaults (SetDefaults_*): before admission, so webhooks see them."""
    defaulter = DEFAULTERS.get(resource)
    if defaulter is not None:
        defaulter(obj)


def prepare_for_create(resource: str, obj: Obj) -> None:
    """Defaults that need the uid/name, and status reset (PrepareForCreate): after mutating admission."""
    preparer = PREPARERS.get(resource)
    if preparer is not None:
        preparer(obj)
