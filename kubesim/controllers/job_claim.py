"""Which pods a Job owns: the ControllerRefManager's claim rules (k/k pkg/controller/controller_ref_manager.go
BaseControllerRefManager.ClaimObject, PodControllerRefManager.AdoptPod / ReleasePod, used by the Job
controller's getPodsForJob with the tracking finalizer).

- A pod controlled by another owner is ignored.
- A pod the Job controls and its selector matches is claimed (even while the Job is being deleted).
- A pod the Job controls that its selector no longer matches is released: a PATCH removes the controller
  reference and the tracking finalizer; the pod is not deleted. Not while the Job is being deleted.
- An orphan (no controller reference) in the Job's namespace that the selector matches and that is not being
  deleted is adopted: a PATCH adds the controller reference and the tracking finalizer, after one fresh GET
  of the Job per sync confirms it is not being deleted (RecheckDeletionTimestamp). Not while the Job is being
  deleted.
"""

from __future__ import annotations

import enum
import logging
from typing import Any

from kubesim.apiserver.selectors import LabelSelector, selector_from_dict
from kubesim.errors import ApiError
from kubesim.interface import KubeApi

from .informer import Informer
from .job_pod_control import CLIENT, PodControl
from .job_pods import JOB_TRACKING_FINALIZER
from .objects import Obj, controller_uid, is_deleting, labels_of, object_key, owner_reference, uid_of

log = logging.getLogger(__name__)

OWNER_INDEX = "controller-uid"
ORPHAN_INDEX = "orphan-namespace"


def owner_uid_index(obj: Obj) -> list[str]:
    uid = controller_uid(obj)
    return [uid] if uid else []


def orphan_namespace_index(pod: Obj) -> list[str]:
    """Pods without a controller, by namespace: the ones a Job may adopt."""
    return [] if controller_uid(pod) else [str((pod.get("metadata") or {}).get("namespace") or "")]


def selector_of(job: Obj) -> LabelSelector | None:
    """metav1.LabelSelectorAsSelector of spec.selector (None: not convertible)."""
    try:
        return selector_from_dict((job.get("spec") or {}).get("selector"))
    except ApiError:
        return None


class Claim(enum.Enum):
    OWNED = "owned"
    ADOPT = "adopt"
    RELEASE = "release"
    IGNORE = "ignore"


def claim(pod: Obj, job: Obj, selector: LabelSelector) -> Claim:
    """ClaimObject's decision for one pod."""
    owner = controller_uid(pod)
    matches = selector.matches(labels_of(pod))
    if owner is not None:
        if owner != uid_of(job):
            return Claim.IGNORE
        if matches:
            return Claim.OWNED
        return Claim.IGNORE if is_deleting(job) else Claim.RELEASE
    if is_deleting(job) or not matches or is_deleting(pod):
        return Claim.IGNORE
    if (pod.get("metadata") or {}).get("namespace") != (job.get("metadata") or {}).get("namespace"):
        return Claim.IGNORE
    return Claim.ADOPT


def adopt_patch(job: Obj, pod: Obj) -> dict[str, Any]:
    """ownerRefControllerPatch: the controller reference, the pod's uid (a precondition upstream) and the
    tracking finalizer, as a strategic merge patch (ownerReferences merge by uid, finalizers as a set)."""
    return {
        "metadata": {
            "ownerReferences": [owner_reference(job)],
            "uid": uid_of(pod),
            "finalizers": [JOB_TRACKING_FINALIZER],
        }
    }


def release_patch(job: Obj, pod: Obj) -> dict[str, Any]:
    """GenerateDeleteOwnerRefStrategicMergeBytes with the tracking finalizer."""
    return {
        "metadata": {
            "ownerReferences": [{"$patch": "delete", "uid": uid_of(job)}],
            "uid": uid_of(pod),
            "$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER],
        }
    }


def with_tracking_finalizer(pod: Obj) -> Obj:
    """getPodsForJob counts an adopted pod as carrying the finalizer its adoption patch added."""
    meta = dict(pod.get("metadata") or {})
    meta["finalizers"] = [*(meta.get("finalizers") or []), JOB_TRACKING_FINALIZER]
    return {**pod, "metadata": meta}


class PodClaimer:
    """getPodsForJob over the shared pod informer (indexed by controller uid and orphans by namespace)."""

    def __init__(self, api: KubeApi, pods: Informer, control: PodControl) -> None:
        self._api = api
        self._pods = pods
        self._control = control
        pods.add_index(OWNER_INDEX, owner_uid_index)
        pods.add_index(ORPHAN_INDEX, orphan_namespace_index)

    def owned(self, job: Obj) -> list[Obj]:
        return self._pods.by_index(OWNER_INDEX, uid_of(job))

    async def pods_for_job(self, job: Obj) -> tuple[list[Obj], bool]:
        """The claimed pods (adopted ones already counted with the finalizer) and whether every adoption and
        release went through (upstream's aggregate error fails the sync)."""
        selector = selector_of(job)
        if selector is None:
            log.info("job %s: couldn't convert Job selector", object_key(job))
            return [], False
        namespace = str(job["metadata"].get("namespace") or "")
        candidates = self.owned(job) + self._pods.by_index(ORPHAN_INDEX, namespace)
        claimed: list[Obj] = []
        clean = True
        can_adopt: bool | None = None
        for pod in candidates:
            action = claim(pod, job, selector)
            if action is Claim.OWNED:
                claimed.append(pod)
            elif action is Claim.RELEASE:
                clean = await self._release(job, pod) and clean
            elif action is Claim.ADOPT:
                if can_adopt is None:
                    can_adopt = await self._recheck_not_deleted(job)
                adopted = await self._adopt(job, pod) if can_adopt else None
                if adopted is None:
                    clean = False
                elif adopted:
                    claimed.append(with_tracking_finalizer(pod))
        return claimed, clean

    async def _recheck_not_deleted(self, job: Obj) -> bool:
        """RecheckDeletionTimestamp: one uncached GET of the Job before the first adoption of a sync."""
        meta = job["metadata"]
        try:
            fresh = await self._api.get("jobs", meta["name"], namespace=meta.get("namespace"), client=CLIENT)
        except ApiError as error:
            log.info("job %s: can't recheck DeletionTimestamp: %s", object_key(job), error.message)
            return False
        if uid_of(fresh) != uid_of(job):
            log.info("job %s: original Job is gone: got uid %s", object_key(job), uid_of(fresh))
            return False
        if is_deleting(fresh):
            log.info(
                "job %s: has just been deleted at %s", object_key(job), fresh["metadata"]["deletionTimestamp"]
            )
            return False
        return True

    async def _adopt(self, job: Obj, pod: Obj) -> bool | None:
        """AdoptPod: True adopted, False gone meanwhile (404), None failed."""
        try:
            await self._control.patch(pod, adopt_patch(job, pod))
        except ApiError as error:
            if error.status == 404:
                return False
            log.info("job %s: can't adopt pod %s: %s", object_key(job), object_key(pod), error.message)
            return None
        return True

    async def _release(self, job: Obj, pod: Obj) -> bool:
        """ReleasePod: a pod gone (404) or no longer ours (422) counts as released."""
        try:
            await self._control.patch(pod, release_patch(job, pod))
        except ApiError as error:
            if error.status in (404, 422):
                return True
            log.info("job %s: can't release pod %s: %s", object_key(job), object_key(pod), error.message)
            return False
        return True
