"""Rewind: a suspended Job the resizer had resized goes back to size 1, `resize: pending`, with no recorded
domain, so that its resume (JobSet's, after Kueue preempted or evicted the JobSet, or a user's) places it as
at its first start instead of creating every follower pinned to the previous leader's domain (docs/resizer.md,
"Rewind"; `placement.rewind`).

Keys: `namespace/name` of suspended Jobs labelled `resize: done` (`caches.suspended_resized`). The JSON
patch `test`s the Job's uid, generation, resize label and `spec.suspend`, so a Job resumed or changed since
it was read is refused (422), read again and decided again. One request per suspension of a resized Job.
"""

from __future__ import annotations

import logging

from kubekit.controller import DONE, Result
from placement.objects import Obj, metadata, namespace_of
from placement.rewind import decide_rewind
from resizer.context import Context, WithContext
from resizer.notes import NoteOnce

log = logging.getLogger(__name__)


class RewindReconciler(WithContext):
    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self.dry_run_notes = NoteOnce[str](log)
        """Jobs a dry-run said it would rewind, by key."""

    def reconcile(self, key: str) -> Result:
        job = self.caches.suspended_resized.get(key)
        if job is not None:
            self.api.on_conflict(
                job,
                lambda current: self._rewind(key, current),
                lambda: self._read(job),
            )
        return DONE

    def forget(self, key: str) -> None:
        """The Job left the cache (rewound, resumed, or gone): nothing noted about it stays."""
        self.dry_run_notes.forget(key)

    def footprint(self) -> dict[str, int]:
        return {"rewind_dry_run_notes": len(self.dry_run_notes)}

    def _read(self, job: Obj) -> Obj | None:
        return self.api.get_job(namespace_of(job), str(metadata(job).get("name")))

    def _rewind(self, key: str, job: Obj) -> None:
        decision = decide_rewind(job)
        if decision.patch is None:
            reason = decision.reason.value if decision.reason is not None else ""
            log.debug("not rewinding: %s", reason, extra={"job": key, "reason": reason})
            return
        if self.dry_run:
            self.dry_run_notes.note(
                key, "dry-run: would put a suspended, resized Job back to size 1", extra={"job": key}
            )
            return
        patched = self.api.json_patch_job(namespace_of(job), str(metadata(job).get("name")), decision.patch)
        self.caches.suspended_resized.delete(key)  # rewound (or gone); the watch confirms
        self.forget(key)
        if patched is None:
            return
        self.metrics.rewound.inc()
        log.info(
            "suspended: put back to size 1, resize pending (grown again beside its next leader)",
            extra={"job": key},
        )
