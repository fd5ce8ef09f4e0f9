"""All or nothing: the admission queue of all-or-nothing JobSets (docs/design.md, "All-or-nothing").

One key, `GANG_KEY`: which JobSet goes depends on every JobSet and every domain, so one pass at a time
decides it (`placement.gang.plan_admission`): time out releases whose leaders did not all bind, finish
releases a previous pass or replica began, release queued JobSets in order while the free domains allow.
The pass asks to be run again when the next release times out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from placement.gang import (
    AdmissionPlan,
    GangId,
    GangState,
    Release,
    Timeout,
    format_time,
    held_nodes,
    node_view,
    plan_admission,
    release_patch,
    timeout_condition,
)
from placement.objects import Obj, metadata, namespace_of
from resizer.api import CONFLICT, TEST_FAILED, rfc3339_now
from resizer.context import Context, WithContext
from resizer.controller import DONE, Result
from resizer.notes import NoteOnce
from resizer.recorder import Action, EventType, Outcome, Reason, jobset_reference

log = logging.getLogger(__name__)

GANG_KEY = "all-or-nothing"
DEFAULT_GANG_TIMEOUT = 300.0
WAKE_UP_MARGIN = 0.01
"""Seconds past a release's deadline at which the queue looks again: the time-out is due by then."""


class GangReconciler(WithContext):
    def __init__(
        self,
        context: Context,
        *,
        timeout: float = DEFAULT_GANG_TIMEOUT,
        epoch: Callable[[], float] = time.time,
        wall_clock: Callable[[], str] = rfc3339_now,
    ) -> None:
        super().__init__(context)
        self.timeout = timeout
        self._epoch = epoch
        self._wall_clock = wall_clock
        self.dry_run_notes = NoteOnce[tuple[str, GangId]](log)
        """(what, JobSet) a dry-run said it would do."""
        self.blocked_notes = NoteOnce[tuple[GangId, int, int]](log)
        """The JobSet at the head of the queue, waiting for domains: (it, domains it needs, domains free),
        said again when the numbers change."""
        self.unfit_notes = NoteOnce[GangId](log)
        """JobSets needing more domains than the cluster has."""

    def reconcile(self, key: str) -> Result:
        gangs = self.gangs.gangs()
        now = self._epoch()
        plan = plan_admission(
            gangs,
            [node_view(node) for node in self.caches.nodes.items()],
            held_nodes(self.caches.leaders.items()),
            now,
            self.timeout,
        )
        self._forget_all_but({gang.id for gang in gangs})
        queued = sum(1 for state in plan.states.values() if state is GangState.QUEUED)
        self.metrics.gangs_queued.set(queued - sum(1 for release in plan.releases if not release.resumed))
        self._note_waiting(plan)
        for timeout in plan.timeouts:
            self._time_out(timeout)
        for release in plan.releases:
            self._release(release)
        if plan.timeouts:
            return Result.requeue(0.0)  # their domains are free now
        if plan.next_deadline is not None:
            return Result.requeue(plan.next_deadline - now + WAKE_UP_MARGIN)
        return DONE

    def footprint(self) -> dict[str, int]:
        return {
            "gang_dry_run_notes": len(self.dry_run_notes),
            "gang_blocked_notes": len(self.blocked_notes),
            "gang_unfit_notes": len(self.unfit_notes),
        }

    def _forget_all_but(self, present: set[GangId]) -> None:
        self.dry_run_notes.retain(lambda subject: subject[1] in present)

    def _note_waiting(self, plan: AdmissionPlan) -> None:
        waiting = None if plan.blocked is None else (plan.blocked, plan.blocked_needs, plan.blocked_free)
        if waiting is not None and self.blocked_notes.note(
            waiting,
            "all-or-nothing: JobSet %s waits for %d free domains (%d free)",
            plan.blocked,
            plan.blocked_needs,
            plan.blocked_free,
            extra={"jobset": str(plan.blocked), "reason": "waiting-for-domains"},
        ):
            self._waiting(
                waiting[0], f"waits for {plan.blocked_needs} free domains ({plan.blocked_free} free)"
            )
        self.blocked_notes.retain(lambda said: said == waiting)
        for gang, needs, existing in plan.unfit:
            if self.unfit_notes.note(
                gang,
                "all-or-nothing: JobSet %s needs %d domains, the cluster has %d: it waits without holding up "
                "the queue",
                gang,
                needs,
                existing,
                level=logging.WARNING,
                extra={"jobset": str(gang), "reason": "more-jobs-than-domains"},
            ):
                self._waiting(gang, f"needs {needs} domains, the cluster has {existing}", EventType.WARNING)
        unfit = {gang for gang, _, _ in plan.unfit}
        self.unfit_notes.retain(lambda gang: gang in unfit)

    def _waiting(self, gang: GangId, note: str, kind: EventType = EventType.NORMAL) -> None:
        self.recorder.record(
            Outcome(jobset_reference(gang), Reason.ALL_OR_NOTHING_WAITING, Action.WAIT, note, type=kind)
        )

    # --- release ---------------------------------------------------------------------------------------

    def _release(self, release: Release) -> None:
        if self.dry_run:
            self.dry_run_notes.note(
                ("release", release.gang),
                "dry-run: would release JobSet %s",
                release.gang,
                extra={"jobset": str(release.gang)},
            )
            return
        ungated = sum(self._ungate(release.gang, pod_key) for pod_key in release.pods)
        if not release.resumed:
            self.metrics.gang_admissions.inc()
        verb = "finished releasing" if release.resumed else "released"
        log.info(
            "all-or-nothing: %s JobSet %s: %d leaders ungated",
            verb,
            release.gang,
            ungated,
            extra={"jobset": str(release.gang), "pods": ungated},
        )
        self.recorder.record(
            Outcome(
                jobset_reference(release.gang),
                Reason.ALL_OR_NOTHING_RELEASED,
                Action.RELEASE_LEADERS,
                f"{verb}: {ungated} leaders ungated, one free domain each",
            )
        )

    def _ungate(self, gang: GangId, pod_key: str) -> int:
        namespace, name = pod_key.split("/", 1)
        ungated = self.api.on_conflict(
            self.caches.leaders.get(pod_key),
            lambda pod: self._ungate_once(gang, pod),
            lambda: self.api.get_pod(namespace, name),
            conflicts=(CONFLICT, TEST_FAILED),
        )
        return ungated or 0

    def _ungate_once(self, gang: GangId, pod: Obj) -> int:
        now = format_time(self._epoch())
        patch = release_patch(pod, now)
        if patch is None:
            return 0
        patched = self.api.patch_pod(namespace_of(pod), str(metadata(pod).get("name")), patch)
        if patched is None:
            return 0
        self.gangs.released(gang, patched, now)
        self.caches.leaders.upsert_answer(patched)
        self.metrics.leader_releases.inc()
        return 1

    # --- time-out --------------------------------------------------------------------------------------

    def _time_out(self, timeout: Timeout) -> None:
        if self.dry_run:
            self.dry_run_notes.note(
                ("timeout", timeout.gang),
                "dry-run: would time out JobSet %s",
                timeout.gang,
                extra={"jobset": str(timeout.gang)},
            )
            return
        self.api.ensure_leading()
        log.warning(
            "all-or-nothing: JobSet %s released %.0fs ago but not all of its leaders bound: deleting its "
            "%d ungated leaders so that it queues again",
            timeout.gang,
            timeout.waited,
            len(timeout.pods),
            extra={"jobset": str(timeout.gang), "reason": "timeout"},
        )
        self.metrics.gang_timeouts.inc()
        now = self._wall_clock()
        condition = {"status": {"conditions": [timeout_condition(timeout.gang, timeout.waited, now)]}}
        for pod_key, uid in timeout.pods:
            namespace, name = pod_key.split("/", 1)
            marked = self.api.patch_pod_status(namespace, name, condition)
            if marked is not None and self.api.delete_pod(namespace, name, uid) is not None:
                self.gangs.deleted(timeout.gang, pod_key, uid, now)
            else:
                self.gangs.forget(timeout.gang, pod_key, uid)  # already gone: nothing to wait for
        self.recorder.record(
            Outcome(
                jobset_reference(timeout.gang),
                Reason.ALL_OR_NOTHING_TIMED_OUT,
                Action.DELETE_LEADERS,
                f"released {timeout.waited:.0f}s ago but not all of its leaders bound: deleted its "
                f"{len(timeout.pods)} ungated leaders so that it queues again for all its domains at once",
                type=EventType.WARNING,
            )
        )
