"""Pure parts of the JobSet controller (jobset.x-k8s.io/v1alpha2): child Job construction and status.

Child Job `<jobset>-<replicatedJob>-<index>`; JobSet's labels go on the Job and its pod template, and the
same keys as annotations (plus the exclusive-topology annotation, and with it the node-selector annotation,
when the JobSet or the replicatedJob sets it), as JobSet's `labelAndAnnotateObject` does. job-key is the
SHA1 hex of `<namespace>/<job name>`. In node-selector mode `constructJob` adds the namespaced-job
nodeSelector and the no-schedule toleration to the pod template.

Which child Jobs to create (`reconcileReplicatedJobs`, `dependencyReachedStatus`, `allReplicasStarted`):
replicated Jobs in spec order; one whose `dependsOn` is not reached waits; with `startupPolicy: InOrder`
(JobSet not suspended) each replicated Job's Jobs are created only once every Job of the ones before it is
ready, succeeded or failed, and the JobSet carries `StartupPolicyInProgress` / `StartupPolicyCompleted`.
A child Job is ready once its ready + succeeded pods reach min(parallelism, completions) of its *current*
spec (`calculateReplicatedJobStatuses`).
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from placement.constants import (
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_JOB_INDEX_LABEL,
    JOBSET_JOB_KEY_LABEL,
    JOBSET_NAME_LABEL,
    JOBSET_REPLICATED_JOB_NAME_LABEL,
    JOBSET_REPLICATED_JOB_REPLICAS_LABEL,
    JOBSET_RESTART_ATTEMPT_LABEL,
)

from .jobset_constants import (
    DEPENDENCY_COMPLETE,
    DEPENDENCY_READY,
    IN_ORDER,
    NAMESPACED_JOB_LABEL,
    NO_SCHEDULE_TAINT_KEY,
    NODE_SELECTOR_STRATEGY_ANNOTATION,
    STARTUP_COMPLETED,
    STARTUP_IN_PROGRESS,
)
from .objects import Obj, annotations_of, condition_true, owner_reference


def job_key(namespace: str, job_name: str) -> str:
    """JobSet's jobHashKey: SHA1 hex digest of `<namespace>/<job name>`."""
    return hashlib.sha1(f"{namespace}/{job_name}".encode(), usedforsecurity=False).hexdigest()


def child_job_name(jobset_name: str, replicated_job: str, index: int) -> str:
    return f"{jobset_name}-{replicated_job}-{index}"


def restarts_of(jobset: Obj) -> int:
    return int((jobset.get("status") or {}).get("restarts") or 0)


def replicas_of(replicated_job: Obj) -> int:
    return int(replicated_job.get("replicas", 1))


def _label_and_annotate(meta: dict[str, Any], jobset: Obj, replicated_job: Obj, index: int) -> None:
    js_meta = jobset["metadata"]
    name = child_job_name(js_meta["name"], replicated_job["name"], index)
    values = {
        JOBSET_NAME_LABEL: js_meta["name"],
        JOBSET_REPLICATED_JOB_NAME_LABEL: replicated_job["name"],
        JOBSET_RESTART_ATTEMPT_LABEL: str(restarts_of(jobset)),
        JOBSET_REPLICATED_JOB_REPLICAS_LABEL: str(replicas_of(replicated_job)),
        JOBSET_JOB_INDEX_LABEL: str(index),
        JOBSET_JOB_KEY_LABEL: job_key(js_meta.get("namespace") or "default", name),
    }
    meta["labels"] = {**(meta.get("labels") or {}), **values}
    annotations = {**(meta.get("annotations") or {}), **values}
    template_annotations = ((replicated_job.get("template") or {}).get("metadata") or {}).get(
        "annotations"
    ) or {}
    for source in (annotations_of(jobset), template_annotations):
        if JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION in source:
            annotations[JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION] = source[JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION]
            if NODE_SELECTOR_STRATEGY_ANNOTATION in source:
                annotations[NODE_SELECTOR_STRATEGY_ANNOTATION] = source[NODE_SELECTOR_STRATEGY_ANNOTATION]
    meta["annotations"] = annotations


def _add_node_selector_strategy(job: Obj) -> None:
    """addNamespacedJobNodeSelector + addTaintToleration: pods select the nodes labelled for this Job."""
    meta = job["metadata"]
    pod_spec = job["spec"].setdefault("template", {}).setdefault("spec", {})
    selector = pod_spec.get("nodeSelector") or {}
    namespace = meta.get("namespace") or "default"
    pod_spec["nodeSelector"] = {**selector, NAMESPACED_JOB_LABEL: f"{namespace}_{meta['name']}"}
    toleration = {"key": NO_SCHEDULE_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
    pod_spec["tolerations"] = [*(pod_spec.get("tolerations") or []), toleration]


def build_child_job(jobset: Obj, replicated_job: Obj, index: int) -> Obj:
    """The Job JobSet's constructJob would create for replica `index` of `replicated_job`."""
    js_meta = jobset["metadata"]
    js_spec = jobset.get("spec") or {}
    template = copy.deepcopy(replicated_job.get("template") or {})
    template_meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    job_meta: dict[str, Any] = {
        "name": child_job_name(js_meta["name"], replicated_job["name"], index),
        "namespace": js_meta.get("namespace"),
        "labels": dict(template_meta.get("labels") or {}),
        "annotations": dict(template_meta.get("annotations") or {}),
        "ownerReferences": [owner_reference(jobset)],
    }
    _label_and_annotate(job_meta, jobset, replicated_job, index)
    pod_template = spec.setdefault("template", {})
    pod_meta = pod_template.setdefault("metadata", {})
    _label_and_annotate(pod_meta, jobset, replicated_job, index)
    network = js_spec.get("network") or {}
    if network.get("enableDNSHostnames", True):
        pod_template.setdefault("spec", {})["subdomain"] = network.get("subdomain") or js_meta["name"]
    spec["suspend"] = bool(js_spec.get("suspend"))
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta, "spec": spec}
    job_annotations = job_meta["annotations"]
    if (
        JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION in job_annotations
        and NODE_SELECTOR_STRATEGY_ANNOTATION in job_annotations
    ):
        _add_node_selector_strategy(job)
    return job


def job_is_ready(job: Obj) -> bool:
    """calculateReplicatedJobStatuses: ready once ready + succeeded pods reach the Job's current parallelism
    (the API server defaults it to 1), or its completions when fewer."""
    status = job.get("status") or {}
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism")
    wanted = 1 if parallelism is None else int(parallelism)
    completions = spec.get("completions")
    if completions is not None and int(completions) < wanted:
        wanted = int(completions)
    return int(status.get("ready") or 0) + int(status.get("succeeded") or 0) >= wanted


def replicated_jobs_status(jobset: Obj, jobs: list[Obj]) -> list[dict[str, Any]]:
    result = []
    for replicated_job in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        name = replicated_job["name"]
        mine = [
            j
            for j in jobs
            if (j["metadata"].get("labels") or {}).get(JOBSET_REPLICATED_JOB_NAME_LABEL) == name
        ]
        succeeded = sum(1 for j in mine if condition_true(j, "Complete"))
        failed = sum(1 for j in mine if condition_true(j, "Failed"))
        running = [j for j in mine if not condition_true(j, "Complete") and not condition_true(j, "Failed")]
        result.append(
            {
                "name": name,
                "ready": sum(1 for j in running if job_is_ready(j)),
                "succeeded": succeeded,
                "failed": failed,
                "active": sum(1 for j in running if int((j.get("status") or {}).get("active") or 0) > 0),
                "suspended": sum(1 for j in running if (j.get("spec") or {}).get("suspend")),
            }
        )
    return result


def success_reached(jobset: Obj, statuses: list[dict[str, Any]]) -> bool:
    """successPolicy: operator All (default) or Any over targetReplicatedJobs (default: all of them)."""
    policy = (jobset.get("spec") or {}).get("successPolicy") or {}
    targets = set(policy.get("targetReplicatedJobs") or [])
    replicas = {rj["name"]: replicas_of(rj) for rj in (jobset.get("spec") or {}).get("replicatedJobs") or []}
    chosen = [s for s in statuses if not targets or s["name"] in targets]
    if not chosen:
        return False
    if policy.get("operator") == "Any":
        return any(s["succeeded"] > 0 for s in chosen)
    return all(s["succeeded"] >= replicas.get(s["name"], 1) for s in chosen)


def _status_of(statuses: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((status for status in statuses if status["name"] == name), None)


def _started(status: dict[str, Any] | None) -> int:
    """Ready + succeeded + failed Jobs: allReplicasStarted's and DependencyReady's count."""
    if status is None:
        return 0
    return int(status["ready"]) + int(status["succeeded"]) + int(status["failed"])


def dependency_reached(replicated_job: Obj, replicas: dict[str, int], statuses: list[dict[str, Any]]) -> bool:
    """dependencyReachedStatus: every dependsOn entry reached (Complete: all its Jobs succeeded; Ready:
    all of them ready, succeeded or failed); `replicas` holds the replicated Jobs seen so far."""
    for dependency in replicated_job.get("dependsOn") or []:
        status = _status_of(statuses, dependency["name"])
        if status is None:
            return False
        wanted = replicas.get(dependency["name"], 0)
        if dependency.get("status") == DEPENDENCY_COMPLETE and wanted != int(status["succeeded"]):
            return False
        if dependency.get("status") == DEPENDENCY_READY and wanted != _started(status):
            return False
    return True


def replicated_jobs_to_start(jobset: Obj, statuses: list[dict[str, Any]]) -> tuple[list[Obj], str | None]:
    """reconcileReplicatedJobs: the replicated Jobs whose missing Jobs are created now, and the startup
    condition to set (StartupPolicyInProgress / StartupPolicyCompleted, None without InOrder)."""
    spec = jobset.get("spec") or {}
    in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == IN_ORDER
    ordered = in_order and not spec.get("suspend")
    seen: dict[str, int] = {}
    start: list[Obj] = []
    for replicated_job in spec.get("replicatedJobs") or []:
        seen[replicated_job["name"]] = replicas_of(replicated_job)
        if not dependency_reached(replicated_job, seen, statuses):
            continue
        status = _status_of(statuses, replicated_job["name"])
        if ordered and replicas_of(replicated_job) == _started(status):
            continue
        start.append(replicated_job)
        if ordered:
            return start, STARTUP_IN_PROGRESS
    return start, STARTUP_COMPLETED if ordered else None


def with_startup_condition(conditions: list[dict[str, Any]], kind: str, now: str) -> list[dict[str, Any]]:
    """updateCondition for the startup conditions: `kind` True (kept as is when already True), and the
    other one, mutually exclusive with it (exclusiveConditions), False."""
    other = STARTUP_COMPLETED if kind == STARTUP_IN_PROGRESS else STARTUP_IN_PROGRESS
    reason, message = (
        ("InOrderStartupPolicyInProgress", "in order startup policy is in progress")
        if kind == STARTUP_IN_PROGRESS
        else ("InOrderStartupPolicyCompleted", "in order startup policy has completed")
    )
    result = [
        {**c, "status": "False"} if c.get("type") == other and c.get("status") == "True" else c
        for c in conditions
    ]
    if any(c.get("type") == kind and c.get("status") == "True" for c in result):
        return result
    fresh = {"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now}
    return [c for c in result if c.get("type") != kind] + [fresh]
