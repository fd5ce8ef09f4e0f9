"""Exclusive Jobs, their pods and node pools as the webhook and the API server leave them: the objects the
status view (`placement.status`) and the kubectl plugin read."""

from __future__ import annotations

from typing import Any

from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    GANG_QUEUED_AT_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    GKE_NODEPOOL_LABEL,
    JOB_KEY_LABEL,
    JOBSET_NAME_LABEL,
    RESIZE_LABEL,
    RESIZE_PENDING,
    ROLE_LABEL,
    ROLE_LEADER,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    ZONE_LABEL,
)
from tests.placement.placement_pods import job, node, pod

Obj = dict[str, Any]
POOL = GKE_NODEPOOL_LABEL
UNSCHEDULABLE = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."


def pools(count: int, *, cordoned: tuple[int, ...] = ()) -> list[Obj]:
    """One node per pool, `pool-0` … (`node-<i>`), some cordoned."""
    nodes = [node(f"node-{i}", {POOL: f"pool-{i}", ZONE_LABEL: "zone-a"}) for i in range(count)]
    for i in cordoned:
        nodes[i]["spec"] = {"unschedulable": True}
    return nodes


def exclusive_job(
    name: str,
    *,
    size: int = 4,
    resize: str | None = RESIZE_PENDING,
    jobset: str | None = None,
    gang: int | None = None,
    annotations: dict[str, str] | None = None,
    mode: str | None = "Indexed",
    suspend: bool = False,
) -> Obj:
    """An exclusive Job as the webhook left it: shrunk to 1 (elastic) unless `resize` is None."""
    shrunk = resize == RESIZE_PENDING
    the_job = job(
        name=name,
        mode=mode,
        completions=1 if shrunk else size,
        parallelism=1 if shrunk else size,
        annotations={TOPOLOGY_ANNOTATION: POOL, **(annotations or {})},
        template_annotations={TOPOLOGY_ANNOTATION: POOL},
    )
    if resize is not None:
        the_job["metadata"]["labels"] = {RESIZE_LABEL: resize}
        the_job["metadata"]["annotations"] |= {
            TARGET_COMPLETIONS_ANNOTATION: str(size),
            TARGET_PARALLELISM_ANNOTATION: str(size),
        }
    if jobset is not None:
        the_job["metadata"].setdefault("labels", {})[JOBSET_NAME_LABEL] = jobset
    if gang is not None:
        the_job["metadata"]["annotations"] |= _gang_annotations(gang)
    if suspend:
        the_job["spec"]["suspend"] = True
    return the_job


def _gang_annotations(size: int) -> dict[str, str]:
    return {
        ALL_OR_NOTHING_ANNOTATION: "true",
        GANG_SIZE_ANNOTATION: str(size),
        GANG_QUEUED_AT_ANNOTATION: "2026-01-01T00:00:00Z",
    }


def exclusive_pod(
    job_name: str,
    index: int | None,
    *,
    node_name: str | None = None,
    gates: tuple[str, ...] = (),
    verdict: str | None = None,
    jobset: str | None = None,
    gang: int | None = None,
    phase: str | None = None,
    priority: int | None = None,
    scheduled_at: str = "2026-01-01T00:00:10Z",
) -> Obj:
    """A pod as the webhook labelled it (job-key, role), bound to `node_name` or waiting."""
    labels = {JOB_KEY_LABEL: f"key-{job_name}"}
    if index == 0:
        labels[ROLE_LABEL] = ROLE_LEADER
    if jobset is not None:
        labels[JOBSET_NAME_LABEL] = jobset
    the_pod = pod(index, topology=POOL, job_name=job_name, node=node_name, labels=labels, phase=phase)
    the_pod["metadata"].setdefault("name", f"{job_name}-{index}-xyz")
    if gang is not None:
        the_pod["metadata"]["annotations"] |= _gang_annotations(gang)
    if gates:
        the_pod["spec"]["schedulingGates"] = [{"name": gate} for gate in gates]
    if priority is not None:
        the_pod["spec"]["priority"] = priority
    status = the_pod.setdefault("status", {"phase": "Pending"})
    if node_name is not None:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled_at}
        ]
    elif verdict is not None:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": verdict}
        ]
    return the_pod


def followers(job_name: str, count: int, **kwargs: Any) -> list[Obj]:
    return [exclusive_pod(job_name, index, **kwargs) for index in range(1, count + 1)]
