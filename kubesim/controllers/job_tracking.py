"""Pure parts of the Job controller's pod tracking with finalizers (KEP-2307; k/k pkg/controller/job
job_controller.go trackJobStatusAndRemoveFinalizers / flushUncountedAndRemoveFinalizers / getNewFinishedPods /
isPodFailed, tracking_utils.go).

Every pod the Job controller creates or adopts carries `batch.kubernetes.io/job-tracking`. A pod whose
outcome the Job still has to count keeps it: the controller first records the finished pod's uid in
`status.uncountedTerminatedPods` (one status write), then removes the finalizer with one PATCH per pod, then
moves the uids it could unfinalize into `status.succeeded` / `status.failed` (a second status write). A pod
without the finalizer is counted already, so the counters never depend on the controller's memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .job_pods import JOB_TRACKING_FINALIZER, is_indexed, pod_index
from .objects import Obj, is_deleting, pod_phase, uid_of

MAX_UNCOUNTED_PODS = 500
"""MaxUncountedPods: a sync stops recording finished pods once uncountedTerminatedPods holds this many."""


def has_tracking_finalizer(pod: Obj) -> bool:
    return JOB_TRACKING_FINALIZER in ((pod.get("metadata") or {}).get("finalizers") or [])


def remove_finalizer_patch() -> dict[str, Any]:
    """removeTrackingFinalizerPatch: a strategic merge patch deleting just the tracking finalizer."""
    return {"metadata": {"$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}}


def only_replace_failed_pods(job: Obj) -> bool:
    """onlyReplaceFailedPods: podReplacementPolicy Failed (or a podFailurePolicy) waits for terminal pods."""
    spec = job.get("spec") or {}
    return spec.get("podReplacementPolicy") == "Failed" or spec.get("podFailurePolicy") is not None


def is_pod_failed(pod: Obj, job: Obj) -> bool:
    """isPodFailed: phase Failed; or, unless only failed pods are replaced, deleted without succeeding (an
    orphan or evicted pod may never reach a terminal phase)."""
    phase = pod_phase(pod)
    if phase == "Failed":
        return True
    if only_replace_failed_pods(job):
        return False
    return is_deleting(pod) and phase != "Succeeded"


def valid_index(pod: Obj, completions: int | None) -> bool:
    index = pod_index(pod)
    return index is not None and completions is not None and index < completions


@dataclass
class Uncounted:
    """status.uncountedTerminatedPods: uids recorded as finished whose finalizer is not removed yet."""

    succeeded: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, status: Obj) -> Uncounted:
        raw = status.get("uncountedTerminatedPods") or {}
        return cls(list(raw.get("succeeded") or []), list(raw.get("failed") or []))

    def to_status(self) -> dict[str, list[str]]:
        """Empty lists are omitted (omitempty), so an empty record is `{}` as upstream writes it."""
        result: dict[str, list[str]] = {}
        if self.succeeded:
            result["succeeded"] = list(self.succeeded)
        if self.failed:
            result["failed"] = list(self.failed)
        return result

    def __len__(self) -> int:
        return len(self.succeeded) + len(self.failed)


def new_finished_pods(pods: Iterable[Obj], job: Obj, uncounted: Uncounted) -> tuple[list[Obj], list[Obj]]:
    """getNewFinishedPods: finished pods still carrying the finalizer and not yet in uncounted (Indexed: with
    a valid index)."""
    completions = (job.get("spec") or {}).get("completions")
    indexed = is_indexed(job)
    succeeded: list[Obj] = []
    failed: list[Obj] = []
    for pod in pods:
        if not has_tracking_finalizer(pod) or (indexed and not valid_index(pod, completions)):
            continue
        uid = uid_of(pod)
        if pod_phase(pod) == "Succeeded" and uid not in uncounted.succeeded:
            succeeded.append(pod)
        if is_pod_failed(pod, job) and uid not in uncounted.failed:
            failed.append(pod)
    return succeeded, failed


def flush_unfinalized(status: Obj, uncounted: Uncounted, with_finalizer: set[str]) -> bool:
    """cleanUncountedPodsWithoutFinalizers: uids whose finalizer is gone move from `uncounted` into
    status.succeeded / status.failed. True when anything moved."""
    moved = False
    for name in ("succeeded", "failed"):
        current: list[str] = getattr(uncounted, name)
        kept = [uid for uid in current if uid in with_finalizer]
        if len(kept) != len(current):
            status[name] = int(status.get(name) or 0) + len(current) - len(kept)
            setattr(uncounted, name, kept)
            moved = True
    return moved


@dataclass
class FinalizerPlan:
    """One sync's share of trackJobStatusAndRemoveFinalizers' loop."""

    remove_from: list[Obj] = field(default_factory=list)
    """Pods whose finalizer this sync removes."""
    new_succeeded_indexes: list[int] = field(default_factory=list)
    changed: bool = False
    """uncountedTerminatedPods (or the completed indexes) gained something: the status needs a write."""
    reached_max_uncounted: bool = False


def plan_finalizer_removal(
    pods: Iterable[Obj],
    job: Obj,
    uncounted: Uncounted,
    previous_succeeded: set[int],
    *,
    finishing: bool,
    failing: bool,
) -> FinalizerPlan:
    """Which finalizers come off this sync, recording each finished pod in `uncounted` first (mutated in
    place). `finishing`: the Job has a finished condition (or is being deleted), so every pod may go;
    `failing`: that condition is a failure, so every pod that did not succeed counts as failed."""
    plan = FinalizerPlan()
    indexed = is_indexed(job)
    completions = (job.get("spec") or {}).get("completions")
    for pod in pods:
        if not has_tracking_finalizer(pod):
            continue
        failed = is_pod_failed(pod, job)
        if not (finishing or failed or pod_phase(pod) == "Succeeded"):
            continue
        plan.remove_from.append(pod)
        uid = uid_of(pod)
        if pod_phase(pod) == "Succeeded" and uid not in uncounted.failed:
            if indexed:
                index = pod_index(pod)
                if valid_index(pod, completions) and index is not None and index not in previous_succeeded:
                    plan.new_succeeded_indexes.append(index)
                    plan.changed = True
            elif uid not in uncounted.succeeded:
                uncounted.succeeded.append(uid)
                plan.changed = True
        elif (
            (failed or failing)
            and uid not in uncounted.failed
            and (not indexed or valid_index(pod, completions))
        ):
            uncounted.failed.append(uid)
            plan.changed = True
        if len(plan.new_succeeded_indexes) + len(uncounted) >= MAX_UNCOUNTED_PODS:
            plan.reached_max_uncounted = True
            break
    return plan


def by_completion_index(pods: Iterable[Obj]) -> list[Obj]:
    """byCompletionIndex: pods in index order (unknown indexes first), so indexes complete in order."""
    return sorted(pods, key=_index_or_unknown)


def _index_or_unknown(pod: Obj) -> int:
    index = pod_index(pod)
    return -1 if index is None else index


@dataclass(frozen=True)
class BackoffRecord:
    """backoffRecord (backoff_utils.go): failures since the last success and when the last one was seen."""

    failures: int = 0
    last_failure: float = 0.0

    def after(self, new_succeeded: int, new_failed: int, now: float) -> BackoffRecord:
        """newBackoffRecord. Finish times are the controller's clock when it first sees the pods
        (kubesim's pod timestamps are wall time, not simulated time), so a success seen with failures in
        the same sync resets the count."""
        if new_succeeded:
            return BackoffRecord()
        if new_failed:
            return BackoffRecord(self.failures + new_failed, now)
        return self

    def remaining(self, now: float, base: float, cap: float) -> float:
        """getRemainingTime: base * 2^(failures - 1), capped, minus the time since the last failure."""
        if not self.failures:
            return 0.0
        delay: float = min(base * 2 ** (self.failures - 1), cap)
        return max(0.0, self.last_failure + delay - now)


@dataclass
class SyncState:
    """What one sync learned about a Job (syncJobCtx); `status` is the copy the sync writes."""

    job: Obj
    key: str
    status: dict[str, Any]
    pods: list[Obj]
    active: list[Obj]
    uncounted: Uncounted
    backoff: BackoffRecord
    previous_indexes: set[int] = field(default_factory=set)
    succeeded_indexes: set[int] = field(default_factory=set)
    succeeded: int = 0
    failed: int = 0
    ready: int = 0
    terminating: int = 0
    finished: dict[str, Any] | None = None
    """The condition the Job is finishing with: SuccessCriteriaMet / FailureTarget (interim) or Failed."""
