"""Retire: a finished Job leaves the follower MutatingAdmissionPolicy's params (its `pin-followers` label
removed), so that kube-apiserver stops evaluating the policy once per finished Job for every pod created in
its namespace (docs/webhook.md, "Two paths for pods"; docs/resizer.md, "Retire").

Keys: `namespace/name` of finished Jobs labelled `pin-followers` (`caches.finished_pinning`). The decision
is `placement.retire.decide_retire`; its JSON patch `test`s the Job's uid and the label first, so a Job
re-created under the same name, or a label already gone, is refused (422), read again and decided again.
One request per Job, after it finished; none on the webhook path, where the resizer sets no label
(`--no-pin-followers-label`).
"""

from __future__ import annotations

import logging

from kubekit.controller import DONE, Result
from placement.objects import Obj, metadata, namespace_of
from placement.retire import decide_retire
from resizer.context import Context, WithContext
from resizer.notes import NoteOnce

log = logging.getLogger(__name__)


class RetireReconciler(WithContext):
    def __init__(self, context: Context) -> None:
        super().__init__(context)
        self.dry_run_notes = NoteOnce[str](log)
        """Jobs a dry-run said it would retire, by key."""

    def reconcile(self, key: str) -> Result:
        job = self.caches.finished_pinning.get(key)
        if job is not None:
            self.api.on_conflict(
                job,
                lambda current: self._retire(key, current),
                lambda: self._read(job),
            )
        return DONE

    def forget(self, key: str) -> None:
        """The Job left the cache (its label removed, or it is gone): nothing noted about it stays."""
        self.dry_run_notes.forget(key)

    def footprint(self) -> dict[str, int]:
        return {"retire_dry_run_notes": len(self.dry_run_notes)}

    def _read(self, job: Obj) -> Obj | None:
        return self.api.get_job(namespace_of(job), str(metadata(job).get("name")))

    def _retire(self, key: str, job: Obj) -> None:
        decision = decide_retire(job)
        if decision.patch is None:
            reason = decision.reason.value if decision.reason is not None else ""
            log.debug("not retiring: %s", reason, extra={"job": key, "reason": reason})
            return
        if self.dry_run:
            self.dry_run_notes.note(
                key, "dry-run: would remove the pin-followers label of a finished Job", extra={"job": key}
            )
            return
        patched = self.api.json_patch_job(namespace_of(job), str(metadata(job).get("name")), decision.patch)
        self._drop(key)  # retired (or gone); the watch confirms
        if patched is None:
            return  # gone: no longer a param either
        self.metrics.retired.inc()
        log.info(
            "finished: removed the pin-followers label (no longer a param of the follower policy)",
            extra={"job": key},
        )

    def _drop(self, key: str) -> None:
        """Take the Job out of the cache (its watch event then finds nothing to hand on)."""
        self.caches.finished_pinning.delete(key)
        self.forget(key)
