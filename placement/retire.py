"""Retiring a finished Job from the follower policy's params, as a pure decision (docs/resizer.md, "Retire").

On the policy path of pod admission the follower MutatingAdmissionPolicy takes its params from the Jobs
labelled `exclusive-placement.io/pin-followers: "true"` in the pod's namespace, and kube-apiserver evaluates
it once per such Job for every pod created there (docs/webhook.md, "Two paths for pods"). The resizer sets
the label in the resize patch (`placement.resize.decide_resize`); once the Job has finished it creates no
pod any more, so `decide_retire(job)` takes the label off again: a JSON patch that `test`s the Job's uid and
the label's value first, so a Job re-created under the same name, or a label already gone, makes the API
server refuse it (422) instead of writing on the wrong object.

No I/O and no client imports.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from placement.constants import PIN_FOLLOWERS, PIN_FOLLOWERS_LABEL
from placement.objects import Obj, is_finished_job, labels_of, uid_of
from placement.patch import JsonPatch
from placement.resize import PIN_FOLLOWERS_LABEL_PATH


class KeepReason(StrEnum):
    """Why a Job keeps the label (or has none to lose). Log words: keep them stable."""

    NOT_PINNING = "not-pinning"
    """The Job does not carry the label (any more)."""
    RUNNING = "running"
    """No Complete, Failed, SuccessCriteriaMet or FailureTarget condition: it may still create followers."""
    NO_UID = "no-uid"
    """An object no API server served: nothing to `test`."""


@dataclass(frozen=True)
class Retirement:
    """`patch` (a JSON patch of the Job) exactly when the label must go; `reason` otherwise."""

    reason: KeepReason | None
    patch: JsonPatch | None = None

    @property
    def retire(self) -> bool:
        return self.patch is not None


def pins_followers(job: Obj) -> bool:
    """The Job is one of the follower policy's params (the resizer labelled it when it resized it)."""
    return labels_of(job).get(PIN_FOLLOWERS_LABEL) == PIN_FOLLOWERS


def decide_retire(job: Obj) -> Retirement:
    """Must this Job lose its `pin-followers` label now, and with which JSON patch?

    Only once it has finished (`placement.objects.is_finished_job`: its terminal conditions and their
    targets, after which the Job controller creates no pod). The patch `test`s the uid and the label's
    value, then removes the label; nothing else of the Job is read or written.
    """
    if not pins_followers(job):
        return Retirement(KeepReason.NOT_PINNING)
    if not is_finished_job(job):
        return Retirement(KeepReason.RUNNING)
    uid = uid_of(job)
    if not uid:
        return Retirement(KeepReason.NO_UID)
    return Retirement(
        None,
        [
            {"op": "test", "path": "/metadata/uid", "value": uid},
            {"op": "test", "path": PIN_FOLLOWERS_LABEL_PATH, "value": PIN_FOLLOWERS},
            {"op": "remove", "path": PIN_FOLLOWERS_LABEL_PATH},
        ],
    )
