"""The Job controller's status tracking with pod finalizers (k/k pkg/controller/job/job_controller.go
trackJobStatusAndRemoveFinalizers, flushUncountedAndRemoveFinalizers, enactJobFinished, recordJobFinished;
tracking_utils.go uidTrackingExpectations).

Order of the writes, per sync: (1) a status write recording the newly finished pods in
uncountedTerminatedPods (and an interim FailureTarget / SuccessCriteriaMet condition, new completed indexes,
active/ready/terminating changes), only when something changed; (2) one PATCH per finished pod removing
the tracking finalizer; (3) a status write moving the unfinalized uids into succeeded / failed, adding the
final Complete / Failed condition once nothing is uncounted or terminating. Each status write is a PUT of
the status subresource with the cached resourceVersion, so a concurrent change is a 409 and a retry.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubesim.apiserver.patches import deep_copy
from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.interface import KubeApi

from .events import EventRecorder
from .informer import Informer
from .job_pod_control import CLIENT, PodControl
from .job_pods import completions_of, format_indexes, is_indexed, job_condition
from .job_tracking import (
    BackoffRecord,
    SyncState,
    by_completion_index,
    flush_unfinalized,
    has_tracking_finalizer,
    plan_finalizer_removal,
)
from .objects import Obj, condition_true, is_deleting, object_key, uid_of

log = logging.getLogger(__name__)


class StatusTracker:
    def __init__(
        self,
        api: KubeApi,
        jobs: Informer,
        control: PodControl,
        recorder: EventRecorder,
        backoff: dict[str, BackoffRecord],
    ) -> None:
        self._api = api
        self._jobs = jobs
        self._control = control
        self._recorder = recorder
        self._backoff = backoff
        self._expected_removals: dict[str, set[str]] = {}
        """Per Job key: pods whose finalizer removal was sent but not seen yet (finalizerExpectations)."""

    # --- finalizer expectations ----------------------------------------------------------------------

    def expected_removals(self, job_key: str) -> set[str]:
        return set(self._expected_removals.get(job_key, ()))

    def removal_observed(self, job_key: str, pod_uid: str) -> None:
        self._expected_removals.get(job_key, set()).discard(pod_uid)

    def forget(self, job_key: str) -> None:
        self._expected_removals.pop(job_key, None)

    # --- tracking ------------------------------------------------------------------------------------

    async def track(self, state: SyncState, needs_flush: bool) -> bool:
        """trackJobStatusAndRemoveFinalizers; False when a finalizer removal failed (the sync is retried)."""
        job, status, uncounted = state.job, state.status, state.uncounted
        indexed = is_indexed(job)
        pods = by_completion_index(state.pods) if indexed else state.pods
        with_finalizer = {uid_of(p) for p in pods if has_tracking_finalizer(p)}
        needs_flush = flush_unfinalized(status, uncounted, with_finalizer) or needs_flush
        plan = plan_finalizer_removal(
            pods,
            job,
            uncounted,
            state.previous_indexes,
            finishing=state.finished is not None or is_deleting(job),
            failing=state.finished is not None and state.finished["type"] != "SuccessCriteriaMet",
        )
        needs_flush = plan.changed or needs_flush
        if indexed:
            indexes = state.succeeded_indexes | set(plan.new_succeeded_indexes)
            text = format_indexes(indexes)
            needs_flush = needs_flush or text != (status.get("completedIndexes") or "")
            set_or_drop(status, "succeeded", len(indexes))
            set_or_drop(status, "completedIndexes", text)
        finished, appended = _interim_condition(status, state.finished)
        needs_flush = appended or needs_flush
        status["uncountedTerminatedPods"] = uncounted.to_status()
        if needs_flush:
            job = await self._write(job, status)
            self._backoff[state.key] = state.backoff
            needs_flush = False
        removed = await self._remove_finalizers(state.key, plan.remove_from)
        with_finalizer -= {uid_of(pod) for pod, ok in zip(plan.remove_from, removed, strict=True) if ok}
        if flush_unfinalized(status, uncounted, with_finalizer):
            needs_flush = True
            status["uncountedTerminatedPods"] = uncounted.to_status()
        if not all(removed):
            if needs_flush:
                await self._write(job, status)
            return False
        job_finished = not plan.reached_max_uncounted and _enact_finished(state, finished)
        if job_finished or needs_flush:
            job = await self._write(job, status)
        if job_finished and finished is not None:
            self._record_finished(job, finished)
        return True

    async def _remove_finalizers(self, key: str, pods: list[Obj]) -> list[bool]:
        """removeTrackingFinalizerFromPods: one PATCH per pod, concurrently; a pod gone already counts."""
        if not pods:
            return []
        self._expected_removals.setdefault(key, set()).update(uid_of(p) for p in pods)
        return list(await asyncio.gather(*(self._remove_finalizer(key, pod) for pod in pods)))

    async def _remove_finalizer(self, key: str, pod: Obj) -> bool:
        try:
            await self._control.remove_finalizer(pod)
        except ApiError as error:
            self.removal_observed(key, uid_of(pod))
            if error.status == 404:
                return True
            log.info("job %s: removing the tracking finalizer of %s: %s", key, object_key(pod), error.message)
            return False
        return True

    async def _write(self, job: Obj, status: Obj) -> Obj:
        """updateJobStatus: a PUT of the status subresource, conditional on the cached resourceVersion."""
        updated = await self._api.update(
            "jobs",
            {**job, "status": deep_copy(status)},
            namespace=job["metadata"].get("namespace"),
            subresource="status",
            client=CLIENT,
        )
        self._jobs.assume(updated)
        return updated

    def _record_finished(self, job: Obj, finished: dict[str, Any]) -> None:
        """recordJobFinished."""
        if finished["type"] != "Complete":
            self._recorder.record(job, "Warning", finished.get("reason", ""), finished.get("message", ""))
            return
        completions = completions_of(job)
        if completions is not None and int((job.get("status") or {}).get("succeeded") or 0) > completions:
            self._recorder.record(
                job,
                "Warning",
                "TooManySucceededPods",
                "Too many succeeded pods running after completion count reached",
            )
        self._recorder.record(job, "Normal", "Completed", "Job completed")


def set_or_drop(status: Obj, name: str, value: int | str) -> None:
    """Counters and strings are omitempty: 0 and "" are absent."""
    if value:
        status[name] = value
    else:
        status.pop(name, None)


def _interim_condition(status: Obj, finished: dict[str, Any] | None) -> tuple[dict[str, Any] | None, bool]:
    """Add the interim FailureTarget / SuccessCriteriaMet condition (written before any finalizer comes off)
    and return the final condition (Failed / Complete) to set once every pod is counted, and whether the
    conditions changed."""
    if finished is None or finished["type"] not in ("FailureTarget", "SuccessCriteriaMet"):
        return finished, False
    appended = not condition_true({"status": status}, finished["type"])
    if appended:
        status["conditions"] = [*(status.get("conditions") or []), finished]
    final_type = "Failed" if finished["type"] == "FailureTarget" else "Complete"
    final = job_condition(
        final_type, finished.get("reason", ""), finished.get("message", ""), Clock.wall_time()
    )
    return final, appended


def _enact_finished(state: SyncState, finished: dict[str, Any] | None) -> bool:
    """enactJobFinished: the final condition only when nothing is uncounted or terminating any more."""
    if finished is None or len(state.uncounted) or state.terminating > 0:
        return False
    status = state.status
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != finished["type"]]
    status["conditions"] = [*conditions, finished]
    if finished["type"] == "Complete":
        status["completionTime"] = finished["lastTransitionTime"]
    return True
