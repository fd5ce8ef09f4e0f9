"""All or nothing: the admission queue of all-or-nothing JobSets (docs/design.md, "All-or-nothing").

One key, `GANG_KEY`: which JobSet goes depends on every JobSet and every domain, so one pass at a time
decides it (`placement.gang.plan_admission`): time out releases whose leaders did not all bind (their Jobs
suspended: JobSet resumes them and no failure is counted), finish releases a previous pass or replica
began, release queued JobSets in order while the free domains allow, the one that does not fit holding up
the rest for `step_over_after` seconds at most. The pass asks to be run again at the next deadline.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kubekit.client import KubeError
from kubekit.controller import DONE, Result
from kubekit.events import EventType, ObjectRef
from placement.gang import (
    AdmissionPlan,
    GangId,
    GangState,
    Release,
    Timeout,
    Waiting,
    format_time,
    held_nodes,
    node_view,
    plan_admission,
    release_patch,
)
from placement.objects import Obj, metadata, namespace_of
from resizer.api import rfc3339_now
from resizer.context import Context, WithContext
from resizer.notes import NoteOnce
from resizer.recorder import Action, Outcome, Reason, jobset_reference

log = logging.getLogger(__name__)

GANG_KEY = "all-or-nothing"
DEFAULT_GANG_TIMEOUT = 300.0
WAKE_UP_MARGIN = 0.01
"""Seconds past a release's deadline at which the queue looks again: the time-out is due by then."""
SUSPEND_RETRY = 5.0
"""Seconds before a timed-out Job is suspended again: the Job controller deletes its pods a moment after
the suspension (JobSet may resume it first: then the next pass suspends it again)."""


class GangReconciler(WithContext):
    def __init__(
        self,
        context: Context,
        *,
        timeout: float = DEFAULT_GANG_TIMEOUT,
        step_over_after: float | None = None,
        epoch: Callable[[], float] = time.time,
        wall_clock: Callable[[], str] = rfc3339_now,
    ) -> None:
        """`step_over_after`: how long a queued JobSet that does not fit holds up the ones behind it
        (default: `timeout`)."""
        super().__init__(context)
        self.timeout = timeout
        self.step_over_after = timeout if step_over_after is None else step_over_after
        self._epoch = epoch
        self._wall_clock = wall_clock
        self._waiting_since: dict[GangId, float] = {}
        """When this replica first saw each queued JobSet not fit (a new replica counts afresh)."""
        self._suspended: dict[tuple[GangId, str], float] = {}
        """(JobSet, Job uid) → when this replica suspended that Job after a time-out."""
        self.dry_run_notes = NoteOnce[tuple[str, GangId]](log)
        """(what, JobSet) a dry-run said it would do."""
        self.blocked_notes = NoteOnce[tuple[GangId, int, int]](log)
        """The JobSet at the head of the queue, waiting for domains: (it, domains it needs, domains free),
        said again when the numbers change."""
        self.unfit_notes = NoteOnce[GangId](log)
        """JobSets needing more domains than the cluster has."""
        self.stepped_over_notes = NoteOnce[GangId](log)
        """JobSets stepped over after waiting `step_over_after` seconds."""

    def reconcile(self, key: str) -> Result:
        gangs = self.gangs.gangs()
        now = self._epoch()
        plan = plan_admission(
            gangs,
            [node_view(node) for node in self.caches.nodes.items()],
            held_nodes(self.caches.holders.items()),
            now,
            self.timeout,
            waiting_since=self._waiting_since,
            bound=self.step_over_after,
        )
        self._forget_all_but({gang.id for gang in gangs})
        waiting = [*plan.stepped_over, *([plan.blocked] if plan.blocked is not None else []), *plan.behind]
        self._waiting_since = {each.gang: each.since for each in waiting}
        queued = sum(1 for state in plan.states.values() if state is GangState.QUEUED)
        self.metrics.gangs_queued.set(queued - sum(1 for release in plan.releases if not release.resumed))
        self._note_waiting(plan)
        suspended = sum([self._time_out(timeout, now) for timeout in plan.timeouts])
        for release in plan.releases:
            self._release(release)
        deadlines = [plan.next_deadline] if plan.next_deadline is not None else []
        if plan.timeouts:
            deadlines.append(now + (0.0 if suspended else SUSPEND_RETRY))  # their domains are free now
        if deadlines:
            return Result.requeue(max(min(deadlines) - now, 0.0) + WAKE_UP_MARGIN)
        return DONE

    def footprint(self) -> dict[str, int]:
        return {
            "gang_dry_run_notes": len(self.dry_run_notes),
            "gang_blocked_notes": len(self.blocked_notes),
            "gang_unfit_notes": len(self.unfit_notes),
            "gang_stepped_over_notes": len(self.stepped_over_notes),
            "gang_waiting_since": len(self._waiting_since),
            "gang_suspended": len(self._suspended),
        }

    def _forget_all_but(self, present: set[GangId]) -> None:
        self.dry_run_notes.retain(lambda subject: subject[1] in present)
        now = self._epoch()
        self._suspended = {
            (gang, uid): at
            for (gang, uid), at in self._suspended.items()
            if gang in present and now - at < SUSPEND_RETRY
        }

    def _note_waiting(self, plan: AdmissionPlan) -> None:
        blocked = plan.blocked
        waiting = None if blocked is None else (blocked.gang, blocked.needs, blocked.free)
        if (
            blocked is not None
            and waiting is not None
            and self.blocked_notes.note(
                waiting,
                "all-or-nothing: JobSet %s waits for %d free domains (%d free)",
                blocked.gang,
                blocked.needs,
                blocked.free,
                extra={"jobset": str(blocked.gang), "reason": "waiting-for-domains"},
            )
        ):
            self._waiting(blocked.gang, f"waits for {blocked.needs} free domains ({blocked.free} free)")
        self.blocked_notes.retain(lambda said: said == waiting)
        for over in plan.stepped_over:
            self._note_stepped_over(over)
        stepped = {over.gang for over in plan.stepped_over}
        self.stepped_over_notes.retain(lambda gang: gang in stepped)
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

    def _jobset(self, gang: GangId) -> ObjectRef:
        return jobset_reference(gang, self.gangs.jobset_uid(gang))

    def _note_stepped_over(self, over: Waiting) -> None:
        waited = self._epoch() - over.since
        if self.stepped_over_notes.note(
            over.gang,
            "all-or-nothing: JobSet %s waited %.0fs for %d free domains (%d free): stepped over, the JobSets "
            "behind it are released as they fit; it keeps its place",
            over.gang,
            waited,
            over.needs,
            over.free,
            level=logging.WARNING,
            extra={"jobset": str(over.gang), "reason": "stepped-over"},
        ):
            self.recorder.record(
                Outcome(
                    self._jobset(over.gang),
                    Reason.ALL_OR_NOTHING_STEPPED_OVER,
                    Action.STEP_OVER,
                    f"waited {waited:.0f}s for {over.needs} free domains ({over.free} free): the JobSets "
                    "behind it no longer wait for it; it keeps its place and is released first once enough "
                    "domains are free at once",
                    type=EventType.WARNING,
                )
            )

    def _waiting(self, gang: GangId, note: str, kind: EventType = EventType.NORMAL) -> None:
        self.recorder.record(
            Outcome(self._jobset(gang), Reason.ALL_OR_NOTHING_WAITING, Action.WAIT, note, type=kind)
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
                self._jobset(release.gang),
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

    # --- time-out ----------------------------------------------------------------------------------------

    def _time_out(self, timeout: Timeout, now: float) -> int:
        """Suspend the gang's Jobs that hold or were promised a domain; how many were suspended now."""
        jobs = [(key, uid) for key, uid in timeout.jobs if uid and (timeout.gang, uid) not in self._suspended]
        if not jobs:
            return 0
        if self.dry_run:
            self.dry_run_notes.note(
                ("timeout", timeout.gang),
                "dry-run: would time out JobSet %s",
                timeout.gang,
                extra={"jobset": str(timeout.gang)},
            )
            return 0
        self.api.ensure_leading()
        regarding = self._jobset(timeout.gang)  # the JobSet uid, from its leaders while they are cached
        log.warning(
            "all-or-nothing: JobSet %s released %.0fs ago but not all of its leaders bound: suspending its "
            "%d Jobs with a released leader so that it queues again",
            timeout.gang,
            timeout.waited,
            len(jobs),
            extra={"jobset": str(timeout.gang), "reason": "timeout"},
        )
        self.metrics.gang_timeouts.inc()
        suspended = 0
        for job_key, uid in jobs:
            namespace, name = job_key.split("/", 1)
            try:
                patched = self.api.patch_job(namespace, name, suspend_patch(uid))
            except KubeError as error:
                if not error.conflict:
                    raise
                patched = None  # that Job was deleted and re-created: not the one timed out
            self._suspended[timeout.gang, uid] = now
            suspended += patched is not None
        self.recorder.record(
            Outcome(
                regarding,
                Reason.ALL_OR_NOTHING_TIMED_OUT,
                Action.SUSPEND_JOBS,
                f"released {timeout.waited:.0f}s ago but not all of its leaders bound: suspended {suspended} "
                "of its Jobs (their pods are deleted without counting a failure, and JobSet resumes them) so "
                "that it queues again for all its domains at once",
                type=EventType.WARNING,
            )
        )
        return suspended


def suspend_patch(uid: str) -> Obj:
    """The merge patch suspending the Job of `uid` (a re-created Job of the same name answers 409)."""
    return {"metadata": {"uid": uid}, "spec": {"suspend": True}}
