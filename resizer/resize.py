"""Resize: a Job the webhook shrank to 1/1 (`resize: pending`) is patched back to its target size once its
leader binds (and, all or nothing, once every Job of its JobSet has a bound leader).

Keys: `namespace/name` of pending Jobs. The decision is `placement.resize.decide_resize`; its JSON patch
`test`s the Job's uid, generation and `resize: pending` first, so a stale decision is refused (422), read
again and decided again.
"""

from __future__ import annotations

import logging

from kubekit.controller import DONE, Result
from kubekit.events import EventType
from kubekit.keys import object_key
from placement.affinity import leader_domain
from placement.leader import pick_leader
from placement.objects import Obj, metadata, namespace_of, node_name
from placement.resize import ResizeDecision, SkipReason, decide_resize, job_ref, topology_key
from resizer.context import Context, WithContext
from resizer.notes import NoteOnce
from resizer.recorder import Action, Outcome, Reason, job_reference, pod_reference

log = logging.getLogger(__name__)

WAITING = frozenset({SkipReason.NO_LEADER, SkipReason.LEADER_NOT_BOUND, SkipReason.GANG_INCOMPLETE})
"""Reasons that pass by themselves: the Job's leader, or its JobSet's, is on its way."""
NOT_PENDING = frozenset({SkipReason.ALREADY_DONE, SkipReason.NOT_PENDING})


class ResizeReconciler(WithContext):
    def __init__(self, context: Context, *, pin_followers: bool = True) -> None:
        super().__init__(context)
        self.pin_followers = pin_followers
        """Label resized Jobs `pin-followers` (the follower policy's params; `placement.resize`)."""
        self.dry_run_notes = NoteOnce[str](log)
        """Jobs a dry-run said it would resize, by key."""
        self.refusal_notes = NoteOnce[str](log)
        """Pending Jobs said not to be resized for a reason of their own (not admitted, a target refused)."""

    def reconcile(self, key: str) -> Result:
        job = self.caches.jobs.get(key)
        if job is not None:
            self.api.on_conflict(
                job,
                lambda current: self._resize(key, current),
                lambda: self._read(key, job),
            )
        return DONE

    def forget(self, key: str) -> None:
        """The Job left the pending cache (resized, deleted): nothing noted about it stays."""
        self.dry_run_notes.forget(key)
        self.refusal_notes.forget(key)

    def footprint(self) -> dict[str, int]:
        return {
            "resize_dry_run_notes": len(self.dry_run_notes),
            "resize_refusal_notes": len(self.refusal_notes),
        }

    def _read(self, key: str, job: Obj) -> Obj | None:
        fresh = self.api.get_job(namespace_of(job), str(metadata(job).get("name")))
        if fresh is None:
            self._drop(key)
        return fresh

    def _resize(self, key: str, job: Obj) -> None:
        leader = pick_leader(self.caches.leaders.by_index(key), job_ref(job))
        decision = decide_resize(
            job,
            leader,
            gang=self.gangs.gang_of(job),
            node=self._leader_node(leader),
            pin_followers=self.pin_followers,
        )
        if decision.patch is None:
            self._skipped(key, job, decision)
            return
        if self.dry_run:
            self.dry_run_notes.note(
                key,
                "dry-run: would resize to %s",
                decision.target,
                extra={"job": key, "target": decision.target},
            )
            return
        patched = self.api.json_patch_job(namespace_of(job), str(metadata(job).get("name")), decision.patch)
        self._drop(key)  # no longer pending (or gone); the watch confirms
        if patched is not None:
            self._resized(key, patched, decision, leader)

    def _leader_node(self, leader: Obj | None) -> Obj | None:
        """The leader's Node as the node informer holds it; one read for a node it does not hold yet."""
        name = node_name(leader) if leader is not None else None
        if name is None:
            return None
        cached = self.caches.nodes.get(name)
        return cached if cached is not None else self.api.get_node_labels(name)

    def _resized(self, key: str, job: Obj, decision: ResizeDecision, leader: Obj | None) -> None:
        self.metrics.resizes.inc()
        self.bind_times.observe(key, self.metrics.bind_to_resize)
        before = f"{decision.current_completions}/{decision.current_parallelism}"
        log.info(
            "resized from %s to %s/%s (completions/parallelism)",
            before,
            decision.target,
            decision.target,
            extra={"job": key, "target": decision.target, "pod": object_key(leader) if leader else None},
        )
        self.recorder.record(
            Outcome(
                job_reference(job),
                Reason.RESIZED,
                Action.RESIZE,
                f"resized from {before} to {decision.target}/{decision.target} (completions/parallelism): "
                f"{self._where(leader)}",
                related=pod_reference(leader) if leader else None,
            )
        )

    def _where(self, leader: Obj | None) -> str:
        """Where the leader was bound: its domain as the node informer shows the node, else the node."""
        if leader is None:
            return "its leader is bound"
        name, node = str(metadata(leader).get("name")), node_name(leader)
        key = topology_key(leader)
        cached = self.caches.nodes.get(node) if node else None
        domain = leader_domain(key, cached) if key and cached is not None else None
        if domain is None:
            return f"leader {name} bound to node {node}"
        return f"leader {name} bound in {key}={domain} (node {node})"

    def _skipped(self, key: str, job: Obj, decision: ResizeDecision) -> None:
        reason = decision.reason
        if reason is None:
            return
        self.metrics.skips.labels(reason.value).inc()
        if reason in WAITING:
            log.debug("waiting: %s", reason.value, extra={"job": key, "reason": reason.value})
        elif reason in NOT_PENDING:
            self._drop(key)
        elif reason is SkipReason.INVALID_TARGET:
            self._refused(key, job, decision.detail)
        else:
            self.refusal_notes.note(
                key, "not resizing: %s", reason.value, extra={"job": key, "reason": reason.value}
            )

    def _refused(self, key: str, job: Obj, detail: str) -> None:
        """A target the Job webhook would not have recorded: said once (a log line, a Warning Event) while
        the Job stays pending, however often it changes."""
        if self.refusal_notes.note(
            key,
            "not resizing: invalid-target: %s",
            detail,
            level=logging.WARNING,
            extra={"job": key, "reason": SkipReason.INVALID_TARGET.value},
        ):
            self.recorder.record(
                Outcome(
                    job_reference(job),
                    Reason.RESIZE_REFUSED,
                    Action.RESIZE,
                    f"not resized: {detail}",
                    type=EventType.WARNING,
                )
            )

    def _drop(self, key: str) -> None:
        """Take the Job out of the pending cache (its watch event then finds nothing to hand on)."""
        self.caches.jobs.delete(key)
        self.forget(key)
