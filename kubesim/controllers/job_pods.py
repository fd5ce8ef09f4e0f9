"""Pure parts of the Job controller: pod construction, index bookkeeping, the create/delete plan, status.

Modelled on kube-controller-manager's pkg/controller/job (Kubernetes 1.31+): Indexed pods get the
completion-index annotation and label, hostname `<job>-<index>` and the generateName `<job>-<index>-`; every
pod gets the tracking finalizer (appendJobCompletionFinalizerIfNotFound).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from placement.constants import (
    CONTROLLER_UID_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_COMPLETION_INDEX_LABEL,
    JOB_NAME_LABEL,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
)

from .objects import Obj, annotations_of, condition_true, is_deleting, is_terminal, owner_reference, pod_phase

MAX_GENERATED_NAME_LENGTH = 58
"""names.MaxGeneratedNameLength: 63 minus the 5-character random suffix."""
DEFAULT_BACKOFF_LIMIT = 6
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
"""batch.JobTrackingFinalizer: on every pod the controller creates or adopts until it has counted the pod."""


def is_indexed(job: Obj) -> bool:
    return (job.get("spec") or {}).get("completionMode") == "Indexed"


def completions_of(job: Obj) -> int | None:
    value = (job.get("spec") or {}).get("completions")
    return None if value is None else int(value)


def parallelism_of(job: Obj) -> int:
    value = (job.get("spec") or {}).get("parallelism")
    return 1 if value is None else int(value)


def is_suspended(job: Obj) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


def is_finished(job: Obj) -> bool:
    return condition_true(job, "Complete") or condition_true(job, "Failed")


def pod_index(pod: Obj) -> int | None:
    """The completion index of an Indexed Job's pod (None when missing or malformed)."""
    value = annotations_of(pod).get(JOB_COMPLETION_INDEX_ANNOTATION)
    if value is None or not value.isdigit():
        return None
    return int(value)


def is_active(pod: Obj) -> bool:
    """Counted as active: neither terminal nor being deleted."""
    return not is_terminal(pod) and not is_deleting(pod)


def is_ready(pod: Obj) -> bool:
    return condition_true(pod, "Ready")


def format_indexes(indexes: Iterable[int]) -> str:
    """`{0,1,2,5,7,8}` -> `"0-2,5,7-8"` (the status.completedIndexes format)."""
    ordered = sorted(set(indexes))
    parts: list[str] = []
    start = previous = None
    for index in ordered:
        if previous is not None and index == previous + 1:
            previous = index
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = index
    if start is not None:
        parts.append(str(start) if start == previous else f"{start}-{previous}")
    return ",".join(parts)


def parse_indexes(text: str | None) -> set[int]:
    """Inverse of `format_indexes`; raises ValueError on malformed text."""
    result: set[int] = set()
    for raw in (text or "").split(","):
        part = raw.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"malformed completed indexes {text!r}")
        result.update(range(int(low), int(high or low) + 1))
    return result


def generate_name(job_name: str, index: int | None) -> str:
    """podGenerateNameWithIndex: `<job>-<index>-`, the job name cut so the prefix stays within 58 chars."""
    suffix = "-" if index is None else f"-{index}-"
    prefix = job_name + suffix
    if len(prefix) > MAX_GENERATED_NAME_LENGTH:
        prefix = job_name[: MAX_GENERATED_NAME_LENGTH - len(suffix)] + suffix
    return prefix


def build_pod(job: Obj, index: int | None) -> Obj:
    """The pod the Job controller creates from the template (index None for NonIndexed Jobs)."""
    meta = job["metadata"]
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    template_meta = template.get("metadata") or {}
    labels = dict(template_meta.get("labels") or {})
    annotations = dict(template_meta.get("annotations") or {})
    uid = str(meta.get("uid") or "")
    labels.update(
        {
            CONTROLLER_UID_LABEL: uid,
            JOB_NAME_LABEL: meta["name"],
            LEGACY_CONTROLLER_UID_LABEL: uid,
            LEGACY_JOB_NAME_LABEL: meta["name"],
        }
    )
    spec: dict[str, Any] = template.get("spec") or {}
    if index is not None:
        annotations[JOB_COMPLETION_INDEX_ANNOTATION] = str(index)
        labels[JOB_COMPLETION_INDEX_LABEL] = str(index)
        if not spec.get("hostname"):
            spec["hostname"] = f"{meta['name']}-{index}"
        for container in spec.get("containers") or []:
            env = container.setdefault("env", [])
            if not any(item.get("name") == "JOB_COMPLETION_INDEX" for item in env):
                env.append(
                    {
                        "name": "JOB_COMPLETION_INDEX",
                        "valueFrom": {
                            "fieldRef": {"fieldPath": f"metadata.labels['{JOB_COMPLETION_INDEX_LABEL}']"}
                        },
                    }
                )
    pod_meta: dict[str, Any] = {
        "generateName": generate_name(meta["name"], index),
        "namespace": meta.get("namespace"),
        "labels": labels,
        "ownerReferences": [owner_reference(job)],
    }
    if annotations:
        pod_meta["annotations"] = annotations
    finalizers = list(template_meta.get("finalizers") or [])
    if JOB_TRACKING_FINALIZER not in finalizers:
        finalizers.append(JOB_TRACKING_FINALIZER)
    pod_meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}


@dataclass
class PodPlan:
    """One sync's work: create these indexes (or `create_count` NonIndexed pods), delete these pods."""

    create_indexes: list[int] = field(default_factory=list)
    create_count: int = 0
    delete: list[Obj] = field(default_factory=list)
    active_after: int = 0


def _removal_order(pod: Obj) -> tuple[int, int, int]:
    """Pods the controller deletes first: unscheduled, then pending, then not ready (activePodsForRemoval)."""
    scheduled = 1 if (pod.get("spec") or {}).get("nodeName") else 0
    running = 1 if pod_phase(pod) == "Running" else 0
    return (scheduled, running, 1 if is_ready(pod) else 0)


def plan_indexed(
    completions: int,
    parallelism: int,
    completed: set[int],
    active: list[Obj],
    max_changes: int,
    *,
    terminating: Sequence[int | None] = (),
) -> PodPlan:
    """Indexed Job: keep one active pod per wanted index, delete out-of-range and duplicate pods.
    `terminating`: indexes of terminating pods when only failed pods are replaced (they block their index
    and count against parallelism until they are gone)."""
    plan = PodPlan()
    by_index: dict[int, list[Obj]] = {}
    for pod in active:
        index = pod_index(pod)
        if index is None or index >= completions or index in completed:
            plan.delete.append(pod)
        else:
            by_index.setdefault(index, []).append(pod)
    kept: dict[int, Obj] = {}
    for index, pods in by_index.items():
        pods.sort(key=_removal_order, reverse=True)
        kept[index] = pods[0]
        plan.delete.extend(pods[1:])
    pending = [i for i in range(completions) if i not in completed]
    want_active = min(parallelism, len(pending))
    if len(kept) > want_active:
        surplus = sorted(kept, reverse=True)[: len(kept) - want_active]
        plan.delete.extend(kept.pop(i) for i in surplus)
    blocked = {i for i in terminating if i is not None}
    budget = max(0, want_active - len(kept) - len(terminating))
    missing = [i for i in pending if i not in kept and i not in blocked][:budget]
    plan.create_indexes = missing[:max_changes]
    plan.delete = plan.delete[:max_changes]
    plan.active_after = len(kept) + len(plan.create_indexes)
    return plan


def plan_non_indexed(
    completions: int | None,
    parallelism: int,
    succeeded: int,
    active: list[Obj],
    max_changes: int,
    *,
    terminating: int = 0,
) -> PodPlan:
    """NonIndexed Job; `terminating`: terminating pods that count against parallelism (only when only failed
    pods are replaced)."""
    plan = PodPlan()
    want_active = parallelism if completions is None else max(0, min(parallelism, completions - succeeded))
    if completions is None and succeeded > 0:
        # Work-queue Jobs: once one pod succeeded, no new pods start.
        want_active = min(want_active, len(active))
    if len(active) > want_active:
        ordered = sorted(active, key=_removal_order)
        plan.delete = ordered[: len(active) - want_active][:max_changes]
    else:
        plan.create_count = min(max(0, want_active - len(active) - terminating), max_changes)
    plan.active_after = len(active) - len(plan.delete) + plan.create_count
    return plan


def job_condition(kind: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }
