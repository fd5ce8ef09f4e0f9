"""Pure parts of the JobSet controller (jobset.x-k8s.io/v1alpha2): child Job construction and status.

Child Job `<jobset>-<replicatedJob>-<index>`; JobSet's labels go on the Job and its pod template, and the
same keys as annotations (plus the exclusive-topology annotation, and with it the node-selector annotation,
when the JobSet or the replicatedJob sets it), as JobSet's `labelAndAnnotateObject` does. job-key is the
SHA1 hex of `<namespace>/<job name>`. In node-selector mode `constructJob` adds the namespaced-job
nodeSelector and the no-schedule toleration to the pod template.
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

from .jobset_constants import NAMESPACED_JOB_LABEL, NO_SCHEDULE_TAINT_KEY, NODE_SELECTOR_STRATEGY_ANNOTATION
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
    """JobSet counts a child Job ready once ready + succeeded pods reach its parallelism."""
    status = job.get("status") or {}
    parallelism = (job.get("spec") or {}).get("parallelism")
    wanted = 1 if parallelism is None else int(parallelism)
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
