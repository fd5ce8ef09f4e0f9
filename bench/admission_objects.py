"""What the webhook benchmark shows the webhook: the JobSet, its child Job and their AdmissionReviews, as the
API server sends them.

- `stored_jobset()`: a JobSet applied with `kubectl apply` (exclusive on the node pool: JobSet's
  exclusive-topology annotation), as the API server stores it: JobSet v0.12.0's defaulting webhook applied
  (`successPolicy`, `startupPolicy`, `network`, `completionMode: Indexed`), its CRD's defaults, uid,
  creationTimestamp and the managedFields of the apply.
- `child_job(index)`: child Job `index` of its one replicated Job as JobSet v0.12.0's controller builds it
  (`constructJob`: the template's labels and annotations plus `labelAndAnnotateObject`'s on the Job and on
  its pod template, `subdomain`, `suspend`, the controller ownerReference), after the API server's decoding
  (the batch/v1 and core/v1 defaults) and field manager: what a mutating webhook receives for it (no uid,
  no creationTimestamp yet: those are set after mutating admission).
- `review(...)`: an AdmissionReview v1 request around an object, with the fields kube-apiserver sends.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from placement.constants import (
    GKE_NODEPOOL_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_GROUP,
    JOBSET_JOB_INDEX_LABEL,
    JOBSET_JOB_KEY_LABEL,
    JOBSET_KIND,
    JOBSET_NAME_LABEL,
    JOBSET_PLURAL,
    JOBSET_REPLICATED_JOB_NAME_LABEL,
    JOBSET_REPLICATED_JOB_REPLICAS_LABEL,
    JOBSET_RESTART_ATTEMPT_LABEL,
    JOBSET_UID_LABEL,
    JOBSET_VERSION,
)
from placement.objects import job_key
from webhook.review import ADMISSION_API_VERSION, ADMISSION_KIND

NAMESPACE = "bench"
POOL_KEY = GKE_NODEPOOL_LABEL
JOBSET = "trainer"
JOBSET_UID = "0a7e3f8c-2d8c-4f4e-8a55-7f0f3e1b2c3d"
JOBSET_CREATED = "2026-12-06T09:00:00Z"
REPLICATED_JOB = "workers"
JOBS = 4
"""Child Jobs of the replicated Job: 4 of the 8 pools at once."""
PODS_PER_JOB = 4
GPUS_PER_POD = "2"
MANAGED_AT = "2026-12-06T09:00:00Z"
JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"
JOBSET_CONTROLLER = "system:serviceaccount:jobset-system:jobset-controller-manager"
KUBECTL_USER = "alice@example.com"
GROUP_NAME = "default"
"""JobSet's CRD default of `replicatedJobs[].groupName`."""

JOBSET_GLOBAL_REPLICAS_LABEL = "jobset.sigs.k8s.io/global-replicas"
JOBSET_JOB_GLOBAL_INDEX_LABEL = "jobset.sigs.k8s.io/job-global-index"
JOBSET_GROUP_NAME_LABEL = "jobset.sigs.k8s.io/group-name"
JOBSET_GROUP_REPLICAS_LABEL = "jobset.sigs.k8s.io/group-replicas"
JOBSET_JOB_GROUP_INDEX_LABEL = "jobset.sigs.k8s.io/job-group-index"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"


# --- the review ---------------------------------------------------------------------------------------------


def review(
    uid: str,
    obj: dict[str, Any],
    *,
    gvr: tuple[str, str, str] = ("", "v1", "pods"),
    operation: str = "CREATE",
    username: str = JOB_CONTROLLER,
    old: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An AdmissionReview request for `obj` (of resource `gvr`: group, version, plural)."""
    group, version, resource = gvr
    gvk = {"group": group, "version": version, "kind": obj["kind"]}
    request: dict[str, Any] = {
        "uid": uid,
        "kind": gvk,
        "resource": {"group": group, "version": version, "resource": resource},
        "requestKind": gvk,
        "requestResource": {"group": group, "version": version, "resource": resource},
        "namespace": NAMESPACE,
        "operation": operation,
        "userInfo": {"username": username, "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
        "options": {"kind": f"{operation.title()}Options", "apiVersion": "meta.k8s.io/v1"},
    }
    name = obj["metadata"].get("name")
    if name:
        request["name"] = name
    return {"apiVersion": ADMISSION_API_VERSION, "kind": ADMISSION_KIND, "request": request}


JOBS_GVR = ("batch", "v1", "jobs")
JOBSETS_GVR = (JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL)


# --- managedFields ------------------------------------------------------------------------------------------


def _fields_v1(value: Any) -> dict[str, Any]:
    """The FieldsV1 set of a JSON value, as the API server's field manager writes it: `f:` per map key, `k:`
    per list entry keyed by name (containers, env), `.` for a map that is itself set."""
    if isinstance(value, dict):
        return {f"f:{key}": _fields_v1(item) for key, item in value.items()}
    if isinstance(value, list) and all(isinstance(item, dict) and "name" in item for item in value):
        return {
            f"k:{json.dumps({'name': item['name']}, separators=(',', ':'))}": {".": {}, **_fields_v1(item)}
            for item in value
        }
    return {}


def _managed(
    obj: dict[str, Any], manager: str, api_version: str, operation: str = "Update"
) -> dict[str, Any]:
    owned = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind", "status")}
    metadata = {
        k: v for k, v in owned["metadata"].items() if k in ("labels", "annotations", "ownerReferences")
    }
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": MANAGED_AT,
        "fieldsType": "FieldsV1",
        "fieldsV1": _fields_v1({**owned, "metadata": metadata}),
    }


# --- the JobSet ---------------------------------------------------------------------------------------------


def _container() -> dict[str, Any]:
    return {
        "name": "worker",
        "image": "registry.example.com/trainer:1.4",
        "command": ["python", "train.py", "--epochs", "90"],
        "env": [
            {"name": "NCCL_DEBUG", "value": "WARN"},
            {
                "name": "JOB_COMPLETION_INDEX",
                "valueFrom": {
                    "fieldRef": {
                        "apiVersion": "v1",
                        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']",
                    }
                },
            },
        ],
        "resources": {
            "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": GPUS_PER_POD},
            "limits": {"nvidia.com/gpu": GPUS_PER_POD},
        },
    }


def _user_jobset() -> dict[str, Any]:
    """The JobSet as its user wrote it."""
    return {
        "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
        "kind": JOBSET_KIND,
        "metadata": {
            "name": JOBSET,
            "namespace": NAMESPACE,
            "annotations": {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: POOL_KEY},
        },
        "spec": {
            "replicatedJobs": [
                {
                    "name": REPLICATED_JOB,
                    "replicas": JOBS,
                    "template": {
                        "spec": {
                            "parallelism": PODS_PER_JOB,
                            "completions": PODS_PER_JOB,
                            "backoffLimit": 0,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [_container()],
                                    "tolerations": [
                                        {
                                            "key": "nvidia.com/gpu",
                                            "operator": "Exists",
                                            "effect": "NoSchedule",
                                        }
                                    ],
                                }
                            },
                        }
                    },
                }
            ]
        },
    }


def _defaulted_jobset(user: dict[str, Any]) -> dict[str, Any]:
    """JobSet v0.12.0's defaulting webhook and CRD defaults applied."""
    jobset = copy.deepcopy(user)
    spec = jobset["spec"]
    spec["successPolicy"] = {"operator": "All"}
    spec["startupPolicy"] = {"startupPolicyOrder": "AnyOrder"}
    spec["network"] = {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    spec["suspend"] = False
    for replicated in spec["replicatedJobs"]:
        replicated["groupName"] = GROUP_NAME
        replicated["template"]["spec"]["completionMode"] = "Indexed"
        replicated["template"]["metadata"] = {}
        replicated["template"]["spec"]["template"]["metadata"] = {}
    return jobset


def stored_jobset() -> dict[str, Any]:
    """The JobSet as the API server holds it after `kubectl apply` (the object of its CREATE's validation)."""
    user = _user_jobset()
    jobset = _defaulted_jobset(user)
    metadata = jobset["metadata"]
    metadata["annotations"][LAST_APPLIED_ANNOTATION] = json.dumps(user, separators=(",", ":")) + "\n"
    metadata.update(uid=JOBSET_UID, creationTimestamp=JOBSET_CREATED, generation=1)
    api_version = f"{JOBSET_GROUP}/{JOBSET_VERSION}"
    metadata["managedFields"] = [_managed(jobset, "kubectl-client-side-apply", api_version)]
    return jobset


def relabelled_jobset() -> dict[str, Any]:
    """The stored JobSet after its user labelled it (an UPDATE that leaves the project's annotations be)."""
    jobset = stored_jobset()
    jobset["metadata"]["labels"] = {"team": "vision"}
    jobset["metadata"]["resourceVersion"] = "1042"
    return jobset


# --- its child Job ------------------------------------------------------------------------------------------


def child_job_name(index: int) -> str:
    """JobSet's `placement.GenJobName`."""
    return f"{JOBSET}-{REPLICATED_JOB}-{index}"


def _jobset_keys(index: int) -> dict[str, str]:
    """`labelAndAnnotateObject`: what JobSet writes as labels, and again as annotations, of a child Job and
    of its pod template (no coordinator, the RestartJob feature gate off, its default)."""
    name = child_job_name(index)
    return {
        JOBSET_NAME_LABEL: JOBSET,
        JOBSET_UID_LABEL: JOBSET_UID,
        JOBSET_REPLICATED_JOB_NAME_LABEL: REPLICATED_JOB,
        JOBSET_RESTART_ATTEMPT_LABEL: "0",
        JOBSET_REPLICATED_JOB_REPLICAS_LABEL: str(JOBS),
        JOBSET_GLOBAL_REPLICAS_LABEL: str(JOBS),
        JOBSET_JOB_INDEX_LABEL: str(index),
        JOBSET_JOB_KEY_LABEL: job_key(NAMESPACE, name),
        JOBSET_JOB_GLOBAL_INDEX_LABEL: str(index),
        JOBSET_GROUP_NAME_LABEL: GROUP_NAME,
        JOBSET_GROUP_REPLICAS_LABEL: str(JOBS),
        JOBSET_JOB_GROUP_INDEX_LABEL: str(index),
    }


def _default_pod_spec(spec: dict[str, Any]) -> None:
    """core/v1 defaults the API server applies when it decodes a Job's pod template."""
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("enableServiceLinks", True)
    for container in spec["containers"]:
        container.setdefault("imagePullPolicy", "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
    for toleration in spec.get("tolerations", []):
        toleration.setdefault("effect", "")


def child_job(index: int) -> dict[str, Any]:
    """Child Job `index` as a mutating webhook receives its CREATE from JobSet's controller."""
    jobset = _defaulted_jobset(_user_jobset())
    replicated = jobset["spec"]["replicatedJobs"][0]
    spec = copy.deepcopy(replicated["template"]["spec"])
    keys = _jobset_keys(index)
    annotations = {**keys, JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: POOL_KEY}
    spec["template"]["metadata"] = {
        "creationTimestamp": None,
        "labels": dict(keys),
        "annotations": annotations,
    }
    spec["template"]["spec"]["subdomain"] = JOBSET
    spec["suspend"] = False
    spec["podReplacementPolicy"] = "TerminatingOrFailed"
    _default_pod_spec(spec["template"]["spec"])
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": child_job_name(index),
            "namespace": NAMESPACE,
            "creationTimestamp": None,
            "labels": dict(keys),
            "annotations": dict(annotations),
            "ownerReferences": [
                {
                    "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
                    "kind": JOBSET_KIND,
                    "name": JOBSET,
                    "uid": JOBSET_UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
        "status": {},
    }
    job["metadata"]["managedFields"] = [_managed(job, "jobset", "batch/v1")]
    return job
