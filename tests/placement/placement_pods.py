"""Builders of real-shaped Jobs, pods and nodes for the placement tests."""

from __future__ import annotations

from typing import Any

from placement.constants import (
    CONTROLLER_UID_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_NAME_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    STRATEGY_ANNOTATION,
)

NS = "team-a"
JOB = "trainer-workers-0"
UID = "uid-1"
ZONE = "topology.kubernetes.io/zone"


def job(
    *,
    completions: int | None = 4,
    parallelism: int | None = 4,
    mode: str | None = "Indexed",
    name: str = JOB,
    annotations: dict[str, str] | None = None,
    template_annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    extra_spec: dict[str, Any] | None = None,
    jobset: str | None = None,
) -> dict[str, Any]:
    """`jobset`: the name of the JobSet controlling the Job (uid `<name>-uid`)."""
    spec: dict[str, Any] = {
        "template": {"metadata": {}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        **(extra_spec or {}),
    }
    if completions is not None:
        spec["completions"] = completions
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if mode is not None:
        spec["completionMode"] = mode
    if template_annotations is not None:
        spec["template"]["metadata"]["annotations"] = template_annotations
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if annotations is not None:
        meta["annotations"] = annotations
    if labels is not None:
        meta["labels"] = labels
    if jobset is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "name": jobset,
                "uid": f"{jobset}-uid",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def pod(
    index: int | None,
    *,
    strategy: str | None = None,
    topology: str | None = ZONE,
    node: str | None = None,
    job_name: str = JOB,
    uid: str = UID,
    phase: str | None = None,
    deleting: bool = False,
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if topology is not None:
        annotations[JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION] = topology
    if strategy is not None:
        annotations[STRATEGY_ANNOTATION] = strategy
    if index is not None:
        annotations[JOB_COMPLETION_INDEX_ANNOTATION] = str(index)
    meta: dict[str, Any] = {
        "generateName": f"{job_name}-{index}-",
        "namespace": NS,
        "annotations": annotations,
        "labels": {JOB_NAME_LABEL: job_name, CONTROLLER_UID_LABEL: uid, **(labels or {})},
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": uid, "controller": True}
        ],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    body: dict[str, Any] = {
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "i"}], **(spec or {})},
    }
    if node is not None:
        meta["name"] = f"{job_name}-{index}-abcde"
        body["spec"]["nodeName"] = node
    if phase is not None:
        body["status"] = {"phase": phase}
    return body


def node(name: str = "node-1", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {ZONE: "zone-a"} if labels is None else labels},
    }
