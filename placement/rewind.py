"""Rewinding a suspended elastic Job to size 1, as a pure decision (docs/resizer.md, "Rewind").

A Job the resizer resized carries its full size, `resize: done` and the domain of the leader it grew
beside (`exclusive-placement.io/leader-domain`, and on the policy path the `pin-followers` label): every
follower the Job controller creates from then on is pinned to that domain. When the Job is suspended in
place (JobSet does so when Kueue preempts or evicts its JobSet, or when a user suspends the JobSet), the Job
controller deletes its pods, and the resume creates all of them at once: a new leader that may bind
elsewhere, and followers pinned to the old leader's domain, which the follower repair then deletes (a
failure the Job counts). `decide_rewind(job)` puts such a Job back where the Job webhook left it: size 1,
`resize: pending`, no recorded domain, `maxFailedIndexes` lowered again when the webhook had lowered it.
Resumed, it is placed as at its first start: its leader binds, then the resizer grows it beside it.

Only while nothing of the Job has finished: the Job controller forgets a completed or failed index that a
shrink leaves out of range and would run it again after the resize, so a Job with a succeeded pod or a
failed index keeps its size (its followers are repaired as before). The JSON patch `test`s the uid, the
generation (any spec change, the resume included, bumps it), `resize: done` and `spec.suspend`, so a Job
resumed or changed since it was read is refused (422), read again and decided again.

No I/O and no client imports.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from placement.constants import (
    LEADER_DOMAIN_ANNOTATION,
    PIN_FOLLOWERS_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    RESIZE_PENDING,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_MAX_FAILED_INDEXES_ANNOTATION,
)
from placement.objects import (
    Obj,
    annotations_of,
    is_finished_job,
    is_terminating,
    labels_of,
    metadata,
    section,
    uid_of,
)
from placement.patch import JsonPatch, escape
from placement.resize import PIN_FOLLOWERS_LABEL_PATH, RESIZE_LABEL_PATH
from placement.strategy import SIZE_ONE_MAX_FAILED_INDEXES


class KeepReason(StrEnum):
    """Why a Job keeps its size. Log words: keep them stable."""

    NOT_RESIZED = "not-resized"
    """Not `resize: done`: the resizer never grew it (or it was rewound already)."""
    NOT_SUSPENDED = "not-suspended"
    """Running, or resumed since: its pods exist or are being created at full size."""
    FINISHED = "finished"
    TERMINATING = "terminating"
    NO_RECORD = "no-record"
    """No target size recorded by the Job webhook: not a Job it shrank."""
    PROGRESS = "progress"
    """A pod succeeded or an index failed: a shrink would make the Job controller forget it."""
    NO_UID = "no-uid"
    """An object no API server served: nothing to `test`."""


@dataclass(frozen=True)
class Rewind:
    """`patch` (a JSON patch of the Job) exactly when it must go back to size 1; `reason` otherwise."""

    reason: KeepReason | None
    patch: JsonPatch | None = None

    @property
    def rewind(self) -> bool:
        return self.patch is not None


def is_suspended(job: Obj) -> bool:
    return section(job, "spec").get("suspend") is True


def is_resized(job: Obj) -> bool:
    return labels_of(job).get(RESIZE_LABEL) == RESIZE_DONE


def _made_progress(job: Obj) -> bool:
    status = section(job, "status")
    return (
        bool(status.get("succeeded"))
        or bool(status.get("completedIndexes"))
        or bool(status.get("failedIndexes"))
    )


def _keep_reason(job: Obj) -> KeepReason | None:
    if not is_resized(job):
        return KeepReason.NOT_RESIZED
    if not is_suspended(job):
        return KeepReason.NOT_SUSPENDED
    if is_finished_job(job):
        return KeepReason.FINISHED
    if is_terminating(job):
        return KeepReason.TERMINATING
    if TARGET_COMPLETIONS_ANNOTATION not in annotations_of(job):
        return KeepReason.NO_RECORD
    if _made_progress(job):
        return KeepReason.PROGRESS
    if not uid_of(job):
        return KeepReason.NO_UID
    return None


def _preconditions(job: Obj) -> JsonPatch:
    meta = metadata(job)
    tests: JsonPatch = [{"op": "test", "path": "/metadata/uid", "value": uid_of(job)}]
    if isinstance(meta.get("generation"), int):
        tests.append({"op": "test", "path": "/metadata/generation", "value": meta["generation"]})
    tests += [
        {"op": "test", "path": RESIZE_LABEL_PATH, "value": RESIZE_DONE},
        {"op": "test", "path": "/spec/suspend", "value": True},
    ]
    return tests


def decide_rewind(job: Obj) -> Rewind:
    """Must this suspended, resized Job go back to size 1 now, and with which JSON patch? (Module docstring.)

    The patch writes only what the resizer's writes policy lets it write: the sizes, `maxFailedIndexes`,
    the resize and pin-followers labels, the leader-domain annotation. The webhook's record of the target
    size stays, so the resizer grows the Job to the same size once its next leader binds."""
    reason = _keep_reason(job)
    if reason is not None:
        return Rewind(reason)
    patch = _preconditions(job)
    patch += [
        {"op": "replace", "path": RESIZE_LABEL_PATH, "value": RESIZE_PENDING},
        {"op": "replace", "path": "/spec/parallelism", "value": 1},
        {"op": "replace", "path": "/spec/completions", "value": 1},
    ]
    if TARGET_MAX_FAILED_INDEXES_ANNOTATION in annotations_of(job):
        patch.append(
            {"op": "replace", "path": "/spec/maxFailedIndexes", "value": SIZE_ONE_MAX_FAILED_INDEXES}
        )
    if LEADER_DOMAIN_ANNOTATION in annotations_of(job):
        patch.append({"op": "remove", "path": f"/metadata/annotations/{escape(LEADER_DOMAIN_ANNOTATION)}"})
    if PIN_FOLLOWERS_LABEL in labels_of(job):
        patch.append({"op": "remove", "path": PIN_FOLLOWERS_LABEL_PATH})
    return Rewind(None, patch)
