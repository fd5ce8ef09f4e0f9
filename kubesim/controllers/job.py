"""The Job controller (kube-controller-manager pkg/controller/job, Kubernetes 1.31+ behaviour).

Per sync: count the Job's pods, decide (pure, `job_pods`), delete surplus pods, create missing ones in
slow-start batches 1, 2, 4, ... (the first failed batch skips the rest of the sync), then write status.
A failed sync is retried with the queue's per-Job backoff (1 s doubling to 60 s, reset after a clean sync);
a change to an owned pod re-queues the Job after 1 s; a Job change re-queues it at once.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.interface import KubeApi

from .events import EventRecorder
from .informer import Handlers, Informer
from .job_pods import (
    DEFAULT_BACKOFF_LIMIT,
    PodPlan,
    build_pod,
    completions_of,
    format_indexes,
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
from .objects import Obj, controller_uid, is_deleting, is_terminal, object_key, pod_phase, uid_of
from .settings import ControllerSettings
from .workqueue import WorkQueue

log = logging.getLogger(__name__)

OWNER_INDEX = "controller-uid"


def owner_uid_index(obj: Obj) -> list[str]:
    uid = controller_uid(obj)
    return [uid] if uid else []


def _owning_job_key(pod: Obj) -> str | None:
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Job":
            return f"{meta.get('namespace')}/{ref.get('name')}"
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
        self._api = api
        self._settings = settings
        self._clock = clock
        self._jobs = jobs
        self._pods = pods
        self._recorder = recorder
        self.queue = WorkQueue(
            clock, settings.job_sync_backoff_seconds, settings.job_max_sync_backoff_seconds
        )
        self._counted: dict[str, set[str]] = {}
        """Per Job uid: terminal pods already added to status.succeeded/failed."""
        self._pod_failures: dict[str, tuple[int, float]] = {}
        """Per Job uid: (failures since the last success, simulated time of the last failure)."""
        pods.add_index(OWNER_INDEX, owner_uid_index)
        jobs.add_handlers(
            Handlers(
                on_add=lambda job: self.queue.add(object_key(job)),
                on_update=self._job_updated,
                on_delete=lambda job: self.queue.add(object_key(job)),
            )
        )
        pods.add_handlers(
            Handlers(
                on_add=self._pod_changed,
                on_update=lambda _old, pod: self._pod_changed(pod),
                on_delete=self._pod_changed,
            )
        )

    def _job_updated(self, old: Obj, job: Obj) -> None:
        """A spec change (new generation) syncs at once; a status-only change is batched like pod events."""
        generation_changed = (old.get("metadata") or {}).get("generation") != (job.get("metadata") or {}).get(
            "generation"
        )
        if generation_changed or old.get("spec") != job.get("spec"):
            self.queue.add(object_key(job))
        else:
            self.queue.add_after(object_key(job), self._settings.job_pod_update_batch_seconds)

    def _pod_changed(self, pod: Obj) -> None:
        key = _owning_job_key(pod)
        if key is not None:
            self.queue.add_after(key, self._settings.job_pod_update_batch_seconds)

    async def run(self) -> None:
        await asyncio.gather(self._jobs.synced.wait(), self._pods.synced.wait())
        async with asyncio.TaskGroup() as group:
            for _ in range(self._settings.job_workers):
                group.create_task(self._worker())

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                clean = await self.sync(key)
            except ApiError as error:
                log.info("job %s: sync failed: %s", key, error.message)
                clean = False
            except Exception:
                log.exception("job %s: sync crashed", key)
                clean = False
            finally:
                self.queue.done(key)
            if clean:
                self.queue.forget(key)
            else:
                delay = self.queue.add_rate_limited(key)
                log.debug("job %s: retrying in %.1fs", key, delay)

    async def sync(self, key: str) -> bool:
        """One reconcile of Job `key`; False when it must be retried with backoff."""
        job = self._jobs.get(key)
        if job is None:
            return True
        uid = uid_of(job)
        if is_finished(job):
            self._counted.pop(uid, None)
            self._pod_failures.pop(uid, None)
            return True
        pods = self._pods.by_index(OWNER_INDEX, uid)
        status: dict[str, Any] = dict(job.get("status") or {})
        counted = self._counted.setdefault(uid, set())
        new_failed = [p for p in pods if pod_phase(p) == "Failed" and uid_of(p) not in counted]
        new_succeeded = [p for p in pods if pod_phase(p) == "Succeeded" and uid_of(p) not in counted]
        active = [p for p in pods if is_active(p)]
        terminating = sum(1 for p in pods if is_deleting(p) and not is_terminal(p))
        failed = int(status.get("failed") or 0) + len(new_failed)
        self._track_pod_failures(uid, new_failed, new_succeeded)

        completions = completions_of(job)
        indexed = is_indexed(job)
        completed: set[int] = set()
        if indexed:
            completed = parse_indexes(status.get("completedIndexes")) | {
                i for i in map(pod_index, new_succeeded) if i is not None
            }
            completed = {i for i in completed if completions is None or i < completions}
            succeeded = len(completed)
        else:
            succeeded = int(status.get("succeeded") or 0) + len(new_succeeded)

        now = Clock.wall_time()
        conditions: list[dict[str, Any]] = list(status.get("conditions") or [])
        clean = True
        kept = active
        backoff_limit = int((job.get("spec") or {}).get("backoffLimit", DEFAULT_BACKOFF_LIMIT))
        if failed > backoff_limit:
            clean = await self._delete_pods(job, active)
            active_after = 0
            # 1.31+: the interim FailureTarget condition precedes Failed
            message = "Job has reached the specified backoff limit"
            conditions += [
                job_condition(kind, "BackoffLimitExceeded", message, now)
                for kind in ("FailureTarget", "Failed")
            ]
            self._recorder.record(
                job, "Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
            )
        elif self._complete(indexed, completions, succeeded, active):
            clean = await self._delete_pods(job, active)
            active_after = 0
            # 1.31+: the interim SuccessCriteriaMet condition precedes Complete
            message = "Reached expected number of succeeded pods"
            conditions += [
                job_condition(kind, "CompletionsReached", message, now)
                for kind in ("SuccessCriteriaMet", "Complete")
            ]
            status["completionTime"] = now
            self._recorder.record(job, "Normal", "Completed", "Job completed")
        elif is_suspended(job):
            clean = await self._delete_pods(job, active)
            active_after = 0
        else:
            max_changes = self._settings.job_max_creates_per_sync
            if indexed:
                plan = plan_indexed(completions or 0, parallelism_of(job), completed, active, max_changes)
            else:
                plan = plan_non_indexed(completions, parallelism_of(job), succeeded, active, max_changes)
            clean, active_after = await self._apply_plan(key, job, plan)
            removed = {object_key(p) for p in plan.delete}
            kept = [p for p in active if object_key(p) not in removed]
        ready = sum(1 for p in kept if is_ready(p)) if active_after else 0

        if not status.get("startTime") and not is_suspended(job):
            status["startTime"] = now
        for field_name, value in (("active", active_after), ("succeeded", succeeded), ("failed", failed)):
            if value:
                status[field_name] = value
            else:
                status.pop(field_name, None)
        status["ready"] = ready
        status["terminating"] = terminating
        status["uncountedTerminatedPods"] = {}
        if indexed and completed:
            status["completedIndexes"] = format_indexes(completed)
        else:
            status.pop("completedIndexes", None)
        if conditions:
            status["conditions"] = conditions
        if status != (job.get("status") or {}):
            updated = await self._api.update(
                "jobs",
                {**job, "status": status},
                namespace=job["metadata"].get("namespace"),
                subresource="status",
                client="job-controller",
            )
            self._jobs.assume(updated)
        counted.update(uid_of(p) for p in new_failed + new_succeeded)
        return clean

    @staticmethod
    def _complete(indexed: bool, completions: int | None, succeeded: int, active: list[Obj]) -> bool:
        if completions is not None:
            return succeeded >= completions
        return not indexed and succeeded > 0 and not active

    def _track_pod_failures(self, uid: str, new_failed: list[Obj], new_succeeded: list[Obj]) -> None:
        if new_failed:
            count, _ = self._pod_failures.get(uid, (0, 0.0))
            self._pod_failures[uid] = (count + len(new_failed), self._clock.now())
        elif new_succeeded:
            self._pod_failures.pop(uid, None)

    def _pod_failure_wait(self, uid: str) -> float:
        """Simulated seconds before failed pods may be replaced (10 s doubling to 10 min, as upstream)."""
        count, last = self._pod_failures.get(uid, (0, 0.0))
        if not count:
            return 0.0
        delay: float = min(
            self._settings.job_pod_failure_backoff_seconds * 2 ** (count - 1),
            self._settings.job_max_pod_failure_backoff_seconds,
        )
        return max(0.0, last + delay - self._clock.now())

    async def _apply_plan(self, key: str, job: Obj, plan: PodPlan) -> tuple[bool, int]:
        clean = await self._delete_pods(job, plan.delete)
        indexes: list[int | None] = list(plan.create_indexes) or [None] * plan.create_count
        if not indexes:
            return clean, plan.active_after
        wait = self._pod_failure_wait(uid_of(job))
        if wait > 0:
            self.queue.add_after(key, wait)
            return clean, plan.active_after - len(indexes)
        created = await self._create_pods(job, indexes)
        return clean and created == len(indexes), plan.active_after - (len(indexes) - created)

    async def _create_pods(self, job: Obj, indexes: list[int | None]) -> int:
        """Slow start: batches of 1, 2, 4, ...; a batch with a failure ends the sync. Returns pods created."""
        created = 0
        position = 0
        batch = min(len(indexes), self._settings.job_slow_start_initial_batch)
        while position < len(indexes):
            chunk = indexes[position : position + batch]
            results = await asyncio.gather(*(self._create_pod(job, index) for index in chunk))
            created += sum(results)
            position += len(chunk)
            if not all(results):
                skipped = len(indexes) - position
                if skipped:
                    log.info(
                        "job %s: %d pod creations skipped after a failed batch", object_key(job), skipped
                    )
                break
            batch = min(2 * batch, len(indexes) - position)
        return created

    async def _create_pod(self, job: Obj, index: int | None) -> bool:
        namespace = job["metadata"].get("namespace")
        try:
            pod = await self._api.create(
                "pods", build_pod(job, index), namespace=namespace, client="job-controller"
            )
        except ApiError as error:
            self._recorder.record(job, "Warning", "FailedCreate", f"Error creating: {error.message}")
            log.debug("job %s: creating pod (index %s) failed: %s", object_key(job), index, error.message)
            return False
        self._pods.assume(pod)
        self._recorder.record(job, "Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")
        return True

    async def _delete_pods(self, job: Obj, pods: list[Obj]) -> bool:
        if not pods:
            return True
        results = await asyncio.gather(*(self._delete_pod(job, pod) for pod in pods))
        return all(results)

    async def _delete_pod(self, job: Obj, pod: Obj) -> bool:
        meta = pod["metadata"]
        try:
            result = await self._api.delete(
                "pods", meta["name"], namespace=meta.get("namespace"), client="job-controller"
            )
        except ApiError as error:
            if error.status == 404:
                return True
            self._recorder.record(job, "Warning", "FailedDelete", f"Error deleting: {error.message}")
            return False
        if (result.get("metadata") or {}).get("deletionTimestamp") and result.get("kind") == "Pod":
            self._pods.assume(result)
        else:
            self._pods.forget(object_key(pod))
        self._recorder.record(job, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}")
        return True
