"""The Job controller's pod writes (k/k pkg/controller/controller_utils.go RealPodControl; job_controller.go
manageJob's slow-start creates, deleteJobPods / deleteActivePods, removeTrackingFinalizerFromPods).

Creates go out in slow-start batches 1, 2, 4, ...; the first batch with a failure skips the rest of the
sync. Every create and delete records the upstream Event (SuccessfulCreate / FailedCreate /
SuccessfulDelete / FailedDelete); finalizer patches record none, as upstream's PatchPod.
"""

from __future__ import annotations

import asyncio
import logging

from kubesim.errors import ApiError
from kubesim.interface import KubeApi

from .events import EventRecorder
from .informer import Informer
from .job_pods import build_pod, is_ready
from .job_tracking import has_tracking_finalizer, remove_finalizer_patch
from .objects import Obj, object_key
from .settings import ControllerSettings

log = logging.getLogger(__name__)

CLIENT = "job-controller"


class PodControl:
    def __init__(
        self, api: KubeApi, settings: ControllerSettings, pods: Informer, recorder: EventRecorder
    ) -> None:
        self._api = api
        self._settings = settings
        self._pods = pods
        self._recorder = recorder

    async def create_pods(self, job: Obj, indexes: list[int | None]) -> int:
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
            pod = await self._api.create("pods", build_pod(job, index), namespace=namespace, client=CLIENT)
        except ApiError as error:
            self._recorder.record(job, "Warning", "FailedCreate", f"Error creating: {error.message}")
            log.debug("job %s: creating pod (index %s) failed: %s", object_key(job), index, error.message)
            return False
        self._pods.assume(pod)
        self._recorder.record(job, "Normal", "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")
        return True

    async def delete_pods(
        self, job: Obj, pods: list[Obj], *, remove_finalizer: bool
    ) -> tuple[int, int, bool]:
        """deleteJobPods (`remove_finalizer`: the finalizer goes first, so the pod is never counted) or
        deleteActivePods (the finalizer stays until the pod is counted), all pods concurrently. Returns
        (deleted, of them ready, every delete went through)."""
        if not pods:
            return 0, 0, True
        results = await asyncio.gather(*(self._delete_pod(job, pod, remove_finalizer) for pod in pods))
        deleted = [pod for pod, ok in zip(pods, results, strict=True) if ok]
        return len(deleted), sum(1 for pod in deleted if is_ready(pod)), len(deleted) == len(pods)

    async def _delete_pod(self, job: Obj, pod: Obj, remove_finalizer: bool) -> bool:
        meta = pod["metadata"]
        namespace = meta.get("namespace")
        try:
            if remove_finalizer and has_tracking_finalizer(pod):
                await self.remove_finalizer(pod)
            result = await self._api.delete("pods", meta["name"], namespace=namespace, client=CLIENT)
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

    async def remove_finalizer(self, pod: Obj) -> None:
        """One strategic merge PATCH taking the tracking finalizer off; raises ApiError."""
        meta = pod["metadata"]
        await self._api.patch(
            "pods",
            meta["name"],
            remove_finalizer_patch(),
            patch_type="strategic",
            namespace=meta.get("namespace"),
            client=CLIENT,
        )

    async def patch(self, pod: Obj, patch: Obj) -> None:
        """PatchPod (strategic merge); raises ApiError."""
        meta = pod["metadata"]
        await self._api.patch(
            "pods",
            meta["name"],
            patch,
            patch_type="strategic",
            namespace=meta.get("namespace"),
            client=CLIENT,
        )
