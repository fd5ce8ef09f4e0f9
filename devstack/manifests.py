"""Manifests the end-to-end tests and benchmarks submit (plain dicts, no I/O)."""

from __future__ import annotations

from typing import Any

from placement.constants import (
    GKE_NODEPOOL_LABEL,
    GPU_RESOURCE,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_GROUP,
    JOBSET_VERSION,
    STRATEGY_ANNOTATION,
)


def exclusive_jobset(
    name: str,
    *,
    jobs: int,
    pods_per_job: int,
    strategy: str | None = None,
    namespace: str = "default",
    topology_key: str = GKE_NODEPOOL_LABEL,
    gpus_per_pod: int = 1,
    priority_class_name: str | None = None,
    max_restarts: int | None = None,
) -> dict[str, Any]:
    """A JobSet of `jobs` Indexed Jobs x `pods_per_job` pods with JobSet's exclusive-topology annotation,
    and, if given, the per-Job strategy annotation on the Jobs' pod template: the Job webhook reads it from
    there too, and it is the only place the pod webhook sees it (pods inherit the template, not the Job's
    own annotations). `priority_class_name` goes on the pod template, `max_restarts` into the JobSet's
    failurePolicy."""
    if jobs < 1 or pods_per_job < 1:
        raise ValueError(f"jobs and pods_per_job must be >= 1, got {jobs} and {pods_per_job}")
    pod_meta = {"annotations": {STRATEGY_ANNOTATION: strategy}} if strategy else {}
    gpus = {GPU_RESOURCE: str(gpus_per_pod)}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "worker",
                "image": "registry.example/worker:1",
                "resources": {"requests": {"cpu": "1", **gpus}, "limits": gpus},
            }
        ],
    }
    if priority_class_name is not None:
        pod_spec["priorityClassName"] = priority_class_name
    jobset: dict[str, Any] = {
        "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: topology_key},
        },
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": jobs,
                    "template": {
                        "spec": {
                            "completionMode": "Indexed",
                            "completions": pods_per_job,
                            "parallelism": pods_per_job,
                            "backoffLimit": 0,
                            "template": {
                                "metadata": pod_meta,
                                "spec": pod_spec,
                            },
                        },
                    },
                }
            ]
        },
    }
    if max_restarts is not None:
        jobset["spec"]["failurePolicy"] = {"maxRestarts": max_restarts}
    return jobset


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
