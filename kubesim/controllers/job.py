"""The Job controller (kube-controller-manager pkg/controller/job/job_controller.go, Kubernetes 1.31+).

Per sync (syncJob): claim the pods the Job's selector matches (adopt orphans, release pods that stopped
matching; `job_claim`), count finished pods, decide whether the Job has finished, then either delete its
active pods (finished) or create/delete pods (manageJob: deletions take precedence over creations in one
sync; `job_pod_control`), and finally track status with the pod finalizers (`job_status`): record
finished pods in status.uncountedTerminatedPods, remove their finalizers, move them into the counters, and
only then mark the Job Complete / Failed (not while pods are still terminating).

A failed sync is retried with the queue's per-Job backoff (1 s doubling to 60 s, reset after a clean sync);
a change to an owned pod re-queues the Job after 1 s; a Job spec change re-queues it at once. A separate
orphan queue removes the tracking finalizer from pods no unfinished Job controls (syncOrphanPod).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kubesim.apiserver.patches import deep_copy
from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.interface import KubeApi

from .events import EventRecorder
from .informer import Handlers, Informer
from .job_claim import OWNER_INDEX, PodClaimer, owner_uid_index, selector_of
from .job_pod_control import PodControl
from .job_pods import (
    DEFAULT_BACKOFF_LIMIT,
    JOB_TRACKING_FINALIZER,
    PodPlan,
    completions_of,
    is_active,
    is_finished,
    is_indexed,
    is_ready,
    is_suspended,
    job_condition,
    parallelism_of,
    parse_indexes,
    plan_indexed,
    plan_non_indexed,
    pod_index,
)
from .job_status import StatusTracker, set_or_drop
from .job_tracking import (
    BackoffRecord,
    SyncState,
    Uncounted,
    has_tracking_finalizer,
    new_finished_pods,
    only_replace_failed_pods,
)
from .objects import (
    Obj,
    condition,
    is_deleting,
    is_terminal,
    labels_of,
    object_key,
    pod_phase,
    uid_of,
)
from .settings import ControllerSettings
from .workqueue import WorkQueue

__all__ = ["OWNER_INDEX", "JobController", "owner_uid_index"]

log = logging.getLogger(__name__)

NAMESPACE_INDEX = "namespace"
SUCCESS_REASON = "CompletionsReached"
SUCCESS_MESSAGE = "Reached expected number of succeeded pods"
BACKOFF_LIMIT_REASON = "BackoffLimitExceeded"
BACKOFF_LIMIT_MESSAGE = "Job has reached the specified backoff limit"


def namespace_index(obj: Obj) -> list[str]:
    return [str((obj.get("metadata") or {}).get("namespace") or "")]


def controller_ref(obj: Obj) -> dict[str, Any] | None:
    """metav1.GetControllerOf."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


class JobController:
    def __init__(
        self,
        *,
        api: KubeApi,
        settings: ControllerSettings,
        clock: Clock,
        jobs: Informer,
        pods: Informer,
        recorder: EventRecorder,
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._jobs = jobs
        self._pods = pods
        self.queue = WorkQueue(
            clock, settings.job_sync_backoff_seconds, settings.job_max_sync_backoff_seconds
        )
        self.orphan_queue = WorkQueue(
            clock, settings.job_sync_backoff_seconds, settings.job_max_sync_backoff_seconds
        )
        self._backoff: dict[str, BackoffRecord] = {}
        """Per Job key: the pod failure backoff record (podBackoffStore)."""
        self._control = PodControl(api, settings, pods, recorder)
        self._claimer = PodClaimer(api, pods, self._control)
        self._tracker = StatusTracker(api, jobs, self._control, recorder, self._backoff)
        jobs.add_index(NAMESPACE_INDEX, namespace_index)
        jobs.add_handlers(Handlers(self._job_added, self._job_updated, self._job_deleted))
        pods.add_handlers(
            Handlers(self._pod_added, self._pod_updated, lambda pod: self._pod_deleted(pod, final=True))
        )

    # --- event handlers ------------------------------------------------------------------------------

    def _enqueue_batched(self, job: Obj) -> None:
        self.queue.add_after(object_key(job), self._settings.job_pod_update_batch_seconds)

    def _job_added(self, job: Obj) -> None:
        self.queue.add(object_key(job))

    def _job_updated(self, old: Obj, job: Obj) -> None:
        """A spec change (new generation) syncs at once; a status-only change is batched like pod events.
        A finished Job gets its pods' finalizers cleaned up (cleanupPodFinalizers)."""
        generation_changed = (old.get("metadata") or {}).get("generation") != (job.get("metadata") or {}).get(
            "generation"
        )
        if generation_changed or old.get("spec") != job.get("spec"):
            self.queue.add(object_key(job))
        else:
            self._enqueue_batched(job)
        if is_finished(job):
            self._cleanup_pod_finalizers(job)

    def _job_deleted(self, job: Obj) -> None:
        self.queue.add(object_key(job))
        self._cleanup_pod_finalizers(job)

    def _cleanup_pod_finalizers(self, job: Obj) -> None:
        selector = selector_of(job)
        for pod in self._claimer.owned(job):
            if has_tracking_finalizer(pod) and selector is not None and selector.matches(labels_of(pod)):
                self.orphan_queue.add(object_key(pod))

    def _pod_added(self, pod: Obj) -> None:
        if is_deleting(pod):
            self._pod_deleted(pod, final=False)
            return
        ref = controller_ref(pod)
        if ref is not None:
            job = self._resolve(pod, ref)
            if job is not None:
                self._enqueue_batched(job)
            return
        if has_tracking_finalizer(pod):
            self.orphan_queue.add(object_key(pod))
        for job in self._jobs_selecting(pod):
            self._enqueue_batched(job)

    def _pod_updated(self, old: Obj, pod: Obj) -> None:
        if is_deleting(pod):
            self._pod_deleted(pod, final=False)
            return
        finalizer_removed = not has_tracking_finalizer(pod)
        ref, old_ref = controller_ref(pod), controller_ref(old)
        if ref != old_ref and old_ref is not None:
            old_job = self._resolve(old, old_ref)
            if old_job is not None:
                if finalizer_removed:
                    self._tracker.removal_observed(object_key(old_job), uid_of(pod))
                self._enqueue_batched(old_job)
        if ref is not None:
            job = self._resolve(pod, ref)
            if job is not None:
                if finalizer_removed:
                    self._tracker.removal_observed(object_key(job), uid_of(pod))
                self._enqueue_batched(job)
            return
        if has_tracking_finalizer(pod):
            self.orphan_queue.add(object_key(pod))
        if labels_of(pod) != labels_of(old) or ref != old_ref:
            for job in self._jobs_selecting(pod):
                self._enqueue_batched(job)

    def _pod_deleted(self, pod: Obj, *, final: bool) -> None:
        """deletePod: `final` is the removal itself, otherwise the deletionTimestamp update."""
        ref = controller_ref(pod)
        holds = has_tracking_finalizer(pod)
        job = self._resolve(pod, ref) if ref is not None else None
        if job is None or is_finished(job):
            if holds:
                self.orphan_queue.add(object_key(pod))
            return
        if final or not holds:
            self._tracker.removal_observed(object_key(job), uid_of(pod))
        self._enqueue_batched(job)

    def _resolve(self, pod: Obj, ref: dict[str, Any]) -> Obj | None:
        """resolveControllerRef: the cached Job the reference names, if its uid matches."""
        if ref.get("kind") != "Job":
            return None
        namespace = (pod.get("metadata") or {}).get("namespace")
        job = self._jobs.get(f"{namespace}/{ref.get('name')}")
        return job if job is not None and uid_of(job) == ref.get("uid") else None

    def _jobs_selecting(self, pod: Obj) -> list[Obj]:
        """getPodJobs: the Jobs in the pod's namespace whose selector matches its labels."""
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        labels = labels_of(pod)
        jobs = []
        for job in self._jobs.by_index(NAMESPACE_INDEX, namespace):
            selector = selector_of(job)
            if selector is not None and selector.matches(labels):
                jobs.append(job)
        return jobs

    # --- workers -------------------------------------------------------------------------------------

    async def run(self) -> None:
        await asyncio.gather(self._jobs.synced.wait(), self._pods.synced.wait())
        async with asyncio.TaskGroup() as group:
            for _ in range(self._settings.job_workers):
                group.create_task(self._worker(self.queue, self.sync, "job"))
            group.create_task(self._worker(self.orphan_queue, self.sync_orphan_pod, "orphan pod"))

    @staticmethod
    async def _worker(queue: WorkQueue, handler: Callable[[str], Awaitable[bool]], what: str) -> None:
        while True:
            key = await queue.get()
            try:
                clean = await handler(key)
            except ApiError as error:
                log.info("%s %s: sync failed: %s", what, key, error.message)
                clean = False
            except Exception:
                log.exception("%s %s: sync crashed", what, key)
                clean = False
            finally:
                queue.done(key)
            if clean:
                queue.forget(key)
            else:
                delay = queue.add_rate_limited(key)
                log.debug("%s %s: retrying in %.1fs", what, key, delay)

    async def sync_orphan_pod(self, key: str) -> bool:
        """syncOrphanPod: remove the tracking finalizer of a pod no unfinished Job controls."""
        pod = self._pods.get(key)
        if pod is None or not has_tracking_finalizer(pod):
            return True
        ref = controller_ref(pod)
        if ref is not None:
            if ref.get("kind") != "Job" or ref.get("apiVersion") != "batch/v1":
                return True
            job = self._resolve(pod, ref)
            if job is not None and not is_finished(job):
                return True
        try:
            await self._control.remove_finalizer(pod)
        except ApiError as error:
            if error.status != 404:
                raise
        return True

    # --- sync ----------------------------------------------------------------------------------------

    async def sync(self, key: str) -> bool:
        """One reconcile of Job `key` (syncJob); False when it must be retried with backoff."""
        job = self._jobs.get(key)
        if job is None:
            self._backoff.pop(key, None)
            self._tracker.forget(key)
            return True
        if is_finished(job):
            self._backoff.pop(key, None)
            return True
        pods, claimed = await self._claimer.pods_for_job(job)
        if not claimed:
            return False
        state = self._observe(key, job, pods)
        clean = True
        if state.finished is not None:
            deleted, deleted_ready, clean = await self._control.delete_pods(
                job, state.active, remove_finalizer=False
            )
            if deleted != len(state.active):
                state.finished = None
            active = len(state.active) - deleted
            state.terminating += deleted
            state.ready -= deleted_ready
        else:
            active = len(state.active)
            if not is_deleting(job):
                active, clean = await self._manage(state)
            if self._complete(job, state.succeeded, active):
                state.finished = job_condition(
                    "SuccessCriteriaMet", SUCCESS_REASON, SUCCESS_MESSAGE, Clock.wall_time()
                )
        status = state.status
        needs_flush = (
            active != int(status.get("active") or 0)
            or state.ready != status.get("ready")
            or state.terminating != status.get("terminating")
        )
        set_or_drop(status, "active", active)
        status["ready"] = state.ready
        status["terminating"] = state.terminating
        tracked = await self._tracker.track(state, needs_flush)
        return tracked and clean

    def _observe(self, key: str, job: Obj, pods: list[Obj]) -> SyncState:
        """The counting half of syncJob: new finished pods, counters, the finished condition."""
        expected = self._tracker.expected_removals(key)
        # Pods whose finalizer removal is in flight count as already finalized (finalizerExpectations).
        view = [_without_tracking_finalizer(p) if uid_of(p) in expected else p for p in pods]
        status = deep_copy(job.get("status") or {})
        uncounted = Uncounted.of(status)
        new_succeeded, new_failed = new_finished_pods(view, job, uncounted)
        state = SyncState(
            job=job,
            key=key,
            status=status,
            pods=view,
            active=[p for p in view if is_active(p)],
            uncounted=uncounted,
            backoff=self._backoff.get(key, BackoffRecord()).after(
                len(new_succeeded), len(new_failed), self._clock.now()
            ),
        )
        state.ready = sum(1 for p in state.active if is_ready(p))
        state.terminating = sum(1 for p in view if is_deleting(p) and not is_terminal(p))
        state.succeeded = int(status.get("succeeded") or 0) + len(new_succeeded) + len(uncounted.succeeded)
        state.failed = int(status.get("failed") or 0) + len(new_failed) + len(uncounted.failed)
        if not status.get("startTime") and not is_suspended(job):
            status["startTime"] = Clock.wall_time()
        state.finished = self._finished_condition(job, status, state.failed)
        if is_indexed(job):
            completions = completions_of(job) or 0
            state.previous_indexes = {i for i in _indexes(status) if i < completions}
            state.succeeded_indexes = state.previous_indexes | _new_succeeded_indexes(view, completions)
            state.succeeded = len(state.succeeded_indexes)
        return state

    @staticmethod
    def _finished_condition(job: Obj, status: Obj, failed: int) -> dict[str, Any] | None:
        """An earlier sync's interim condition, or a new FailureTarget past backoffLimit."""
        holder = {"status": status}
        success = condition(holder, "SuccessCriteriaMet")
        if success is not None and success.get("status") == "True":
            return success
        target = condition(holder, "FailureTarget")
        if target is not None and target.get("status") == "True":
            return job_condition(
                "Failed", target.get("reason", ""), target.get("message", ""), Clock.wall_time()
            )
        backoff_limit = int((job.get("spec") or {}).get("backoffLimit", DEFAULT_BACKOFF_LIMIT))
        if failed > backoff_limit:
            return job_condition(
                "FailureTarget", BACKOFF_LIMIT_REASON, BACKOFF_LIMIT_MESSAGE, Clock.wall_time()
            )
        return None

    @staticmethod
    def _complete(job: Obj, succeeded: int, active: int) -> bool:
        completions = completions_of(job)
        if completions is None:
            return succeeded > 0 and active == 0
        return succeeded >= completions and active == 0

    # --- manageJob -----------------------------------------------------------------------------------

    async def _manage(self, state: SyncState) -> tuple[int, bool]:
        """manageJob: (active pods after this sync, clean). Deletions take precedence over creations."""
        job, active = state.job, state.active
        if is_suspended(job):
            removed, removed_ready, clean = await self._control.delete_pods(
                job, active, remove_finalizer=True
            )
            state.terminating += removed
            state.ready -= removed_ready
            return len(active) - removed, clean
        plan = self._plan(state)
        if plan.delete:
            removed, removed_ready, clean = await self._control.delete_pods(
                job, plan.delete, remove_finalizer=True
            )
            state.terminating += removed
            state.ready -= removed_ready
            return len(active) - removed, clean
        indexes: list[int | None] = list(plan.create_indexes) or [None] * plan.create_count
        if not indexes:
            return len(active), True
        wait = state.backoff.remaining(
            self._clock.now(),
            self._settings.job_pod_failure_backoff_seconds,
            self._settings.job_max_pod_failure_backoff_seconds,
        )
        if wait > 0:
            # enqueueSyncJobWithDelay: never sooner than the batch period
            self.queue.add_after(state.key, max(wait, self._settings.job_pod_update_batch_seconds))
            return len(active), True
        created = await self._control.create_pods(job, indexes)
        return len(active) + created, created == len(indexes)

    def _plan(self, state: SyncState) -> PodPlan:
        job = state.job
        max_changes = self._settings.job_max_creates_per_sync
        terminating = (
            [p for p in state.pods if is_deleting(p) and not is_terminal(p)]
            if only_replace_failed_pods(job)
            else []
        )
        if is_indexed(job):
            return plan_indexed(
                completions_of(job) or 0,
                parallelism_of(job),
                state.succeeded_indexes,
                state.active,
                max_changes,
                terminating=[pod_index(p) for p in terminating],
            )
        return plan_non_indexed(
            completions_of(job),
            parallelism_of(job),
            state.succeeded,
            state.active,
            max_changes,
            terminating=len(terminating),
        )


def _indexes(status: Obj) -> set[int]:
    try:
        return parse_indexes(status.get("completedIndexes"))
    except ValueError:
        return set()


def _new_succeeded_indexes(pods: list[Obj], completions: int) -> set[int]:
    """calculateSucceededIndexes: indexes of succeeded pods not counted yet (still carrying the finalizer)."""
    indexes: set[int] = set()
    for pod in pods:
        index = pod_index(pod)
        if (
            pod_phase(pod) == "Succeeded"
            and has_tracking_finalizer(pod)
            and index is not None
            and index < completions
        ):
            indexes.add(index)
    return indexes


def _without_tracking_finalizer(pod: Obj) -> Obj:
    meta = dict(pod.get("metadata") or {})
    meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != JOB_TRACKING_FINALIZER]
    return {**pod, "metadata": meta}
