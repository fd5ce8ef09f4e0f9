"""The JobSet controller (jobset.x-k8s.io/v1alpha2): child Jobs, status, restarts, completion.

Per sync: delete child Jobs of an older restart attempt; when a current child Job failed, either restart
(status.restarts + 1, which triggers the deletions and then the re-creation with the next
restart-attempt) while failurePolicy.maxRestarts allows, or mark the JobSet Failed; create missing child
Jobs of the replicated Jobs whose turn it is (`dependsOn`, `startupPolicy: InOrder`); write
replicatedJobsStatus, the startup condition and the Completed condition. Deleting the JobSet deletes its
Jobs through the API server's garbage collector (ownerReferences).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.interface import KubeApi
from placement.constants import JOBSET_RESTART_ATTEMPT_LABEL

from .events import EventRecorder
from .informer import Handlers, Informer
from .job import OWNER_INDEX, owner_uid_index
from .jobset_constants import JOBSET_MANAGER_CLIENT
from .jobset_jobs import (
    build_child_job,
    child_job_name,
    replicas_of,
    replicated_jobs_status,
    replicated_jobs_to_start,
    restarts_of,
    success_reached,
    with_startup_condition,
)
from .objects import Obj, condition_true, labels_of, object_key, uid_of, with_condition
from .settings import ControllerSettings
from .workqueue import WorkQueue

log = logging.getLogger(__name__)

_RETRY_BASE_SECONDS = 0.005
_RETRY_MAX_SECONDS = 1000.0
"""controller-runtime's default rate limiter: 5 ms doubling to 1000 s."""


def _finished(jobset: Obj) -> bool:
    return condition_true(jobset, "Completed") or condition_true(jobset, "Failed")


def _jobset_condition(kind: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": Clock.wall_time(),
    }


class JobSetController:
    def __init__(
        self,
        *,
        api: KubeApi,
        settings: ControllerSettings,
        clock: Clock,
        jobsets: Informer,
        jobs: Informer,
        recorder: EventRecorder,
    ) -> None:
        self._api = api
        self._settings = settings
        self._jobsets = jobsets
        self._jobs = jobs
        self._recorder = recorder
        self.queue = WorkQueue(clock, _RETRY_BASE_SECONDS, _RETRY_MAX_SECONDS)
        jobs.add_index(OWNER_INDEX, owner_uid_index)
        jobsets.add_handlers(
            Handlers(
                on_add=lambda js: self.queue.add(object_key(js)),
                on_update=lambda _old, js: self.queue.add(object_key(js)),
            )
        )
        jobs.add_handlers(
            Handlers(
                on_add=self._job_changed,
                on_update=lambda _old, job: self._job_changed(job),
                on_delete=self._job_changed,
            )
        )

    def _job_changed(self, job: Obj) -> None:
        meta = job.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "JobSet":
                self.queue.add(f"{meta.get('namespace')}/{ref.get('name')}")

    async def run(self) -> None:
        await asyncio.gather(self._jobsets.synced.wait(), self._jobs.synced.wait())
        async with asyncio.TaskGroup() as group:
            for _ in range(self._settings.jobset_workers):
                group.create_task(self._worker())

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self.sync(key)
                self.queue.forget(key)
            except ApiError as error:
                log.info("jobset %s: sync failed: %s", key, error.message)
                self.queue.add_rate_limited(key)
            except Exception:
                log.exception("jobset %s: sync crashed", key)
                self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)

    async def sync(self, key: str) -> None:
        jobset = self._jobsets.get(key)
        if jobset is None or _finished(jobset):
            return
        owned = self._jobs.by_index(OWNER_INDEX, uid_of(jobset))
        restarts = restarts_of(jobset)
        stale = [j for j in owned if int(labels_of(j).get(JOBSET_RESTART_ATTEMPT_LABEL) or 0) < restarts]
        current = [j for j in owned if j not in stale]
        for job in stale:
            await self._delete_job(job)
        status: dict[str, Any] = dict(jobset.get("status") or {})
        failed = [j for j in current if condition_true(j, "Failed")]
        if failed:
            max_restarts = int(
                ((jobset.get("spec") or {}).get("failurePolicy") or {}).get("maxRestarts") or 0
            )
            if restarts < max_restarts:
                status["restarts"] = restarts + 1
                self._recorder.record(
                    jobset, "Warning", "Restarting", f"restarting jobset, attempt {restarts + 1}"
                )
            else:
                reason = "ReachedMaxRestarts" if max_restarts else "FailedJobs"
                message = (
                    "jobset failed due to reaching max number of restarts"
                    if max_restarts
                    else "jobset failed due to one or more job failures"
                )
                status["conditions"] = with_condition(
                    list(status.get("conditions") or []), _jobset_condition("Failed", reason, message)
                )
                status["terminalState"] = "Failed"
                self._recorder.record(jobset, "Warning", reason, message)
            await self._write_status(jobset, status)
            return
        existing = {j["metadata"]["name"] for j in owned}
        statuses = replicated_jobs_status(jobset, current)
        starting, startup = replicated_jobs_to_start(jobset, statuses)
        for replicated_job in starting:
            for index in range(replicas_of(replicated_job)):
                if child_job_name(jobset["metadata"]["name"], replicated_job["name"], index) not in existing:
                    await self._create_job(jobset, replicated_job, index)
        if startup is not None:
            status["conditions"] = with_startup_condition(
                list(status.get("conditions") or []), startup, Clock.wall_time()
            )
        status["replicatedJobsStatus"] = statuses
        status.setdefault("restarts", restarts)
        if success_reached(jobset, statuses):
            status["conditions"] = with_condition(
                list(status.get("conditions") or []),
                _jobset_condition("Completed", "AllJobsCompleted", "jobset completed successfully"),
            )
            status["terminalState"] = "Completed"
            self._recorder.record(jobset, "Normal", "AllJobsCompleted", "jobset completed successfully")
        await self._write_status(jobset, status)

    async def _create_job(self, jobset: Obj, replicated_job: Obj, index: int) -> None:
        job = build_child_job(jobset, replicated_job, index)
        try:
            created = await self._api.create(
                "jobs", job, namespace=job["metadata"]["namespace"], client=JOBSET_MANAGER_CLIENT
            )
        except ApiError as error:
            if error.status == 409:
                return
            self._recorder.record(jobset, "Warning", "JobCreationFailed", error.message)
            raise
        self._jobs.assume(created)

    async def _delete_job(self, job: Obj) -> None:
        meta = job["metadata"]
        try:
            await self._api.delete(
                "jobs", meta["name"], namespace=meta.get("namespace"), client=JOBSET_MANAGER_CLIENT
            )
        except ApiError as error:
            if error.status != 404:
                raise
        self._jobs.forget(object_key(job))

    async def _write_status(self, jobset: Obj, status: dict[str, Any]) -> None:
        if status == (jobset.get("status") or {}):
            return
        updated = await self._api.update(
            "jobsets",
            {**jobset, "status": status},
            namespace=jobset["metadata"].get("namespace"),
            subresource="status",
            client=JOBSET_MANAGER_CLIENT,
        )
        self._jobsets.assume(updated)
