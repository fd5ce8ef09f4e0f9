"""Followers: the unbound followers of a Job, as JobSet's pod reconciler looks after them.

Keys: `namespace/name` of Jobs with unbound followers that carry our scheduling gate or are pinned.
- release (scheduling-gate): a gated follower is pinned to its leader's domain and ungated, with one JSON
  patch that `test`s the gate (`placement.resize.decide_gate_release`); also for followers created gated
  after their leader bound, and for elastic followers created gated because their admission did not see
  the resize yet: when no live, bound leader decides any more, into the domain the resize recorded on the
  Job (`placement.resize.decide_recorded_release`, one read of the Job).
- repair: a pinned follower whose domain is not its leader's (a leader re-created elsewhere, a pin from a
  stale cache) is marked `DisruptionTarget` and deleted (`placement.resize.decide_follower_repair`), only
  after the leader is read again from the API server.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass

from kubekit.controller import DONE, Result
from kubekit.events import EventType
from kubekit.keys import object_key
from placement.gang import Gang
from placement.leader import Placed, leader_problem, pick_leader, rival_leaders
from placement.objects import (
    JobRef,
    Obj,
    is_terminating,
    job_ref_of_pod,
    metadata,
    namespace_of,
    node_name,
    uid_of,
)
from placement.resize import (
    RECORDED_DOMAIN_RELEASES,
    FollowerRepair,
    SkipReason,
    decide_follower_repair,
    decide_gate_release,
    decide_recorded_release,
    has_gate,
)
from resizer.api import rfc3339_now
from resizer.context import Context, WithContext
from resizer.notes import NoteOnce
from resizer.recorder import (
    Action,
    Outcome,
    Reason,
    job_reference_by_key,
    pod_reference,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobLeaders:
    """A Job's leader as the caches show it: what releases and repairs are decided on."""

    owner: JobRef
    leader: Obj | None
    node: Obj | None
    """The leader's Node (labels only), None when unknown."""
    rivals: list[Placed]
    """Other live, bound leaders of the Job, with their Nodes."""
    gang: Gang | None
    """The Job's all-or-nothing gang, None when it is in none (or none of its leaders is cached)."""
    resized_job: Callable[[], Obj | None]
    """The Job itself, read from the API server once, on first use (no cache holds resized Jobs): only a
    follower its leader cannot release needs the domain its resize recorded (`decide_recorded_release`)."""


class FollowerReconciler(WithContext):
    def __init__(self, context: Context, *, wall_clock: Callable[[], str] = rfc3339_now) -> None:
        super().__init__(context)
        self._wall_clock = wall_clock
        self.dry_run_notes = NoteOnce[str](log)
        """Followers a dry-run said it would release or delete, by pod key."""

    def reconcile(self, key: str) -> Result:
        followers = self.caches.followers.by_index(key)
        owner = job_ref_of_pod(followers[0]) if followers else None
        if owner is None:
            return DONE  # the cache indexes followers by their Job: every one has an owner
        leaders = self._leaders(key, owner, followers[0])
        gated = [follower for follower in followers if has_gate(follower)]
        released = [domain for follower in gated if (domain := self._release(key, follower, leaders))]
        if released:
            self._released(key, owner, released)
        pinned = [follower for follower in followers if not has_gate(follower)]
        if pinned:
            self._repair(key, pinned, leaders)
        return DONE

    def forget(self, pod_key: str) -> None:
        """The follower left the cache (bound, deleted): nothing noted about it stays."""
        self.dry_run_notes.forget(pod_key)

    def footprint(self) -> dict[str, int]:
        return {"follower_dry_run_notes": len(self.dry_run_notes)}

    def _leaders(self, key: str, owner: JobRef, follower: Obj) -> JobLeaders:
        candidates = self.caches.leaders.by_index(key)
        leader = pick_leader(candidates, owner)
        return JobLeaders(
            owner,
            leader,
            self._node(node_name(leader)) if leader is not None else None,
            [(rival, self._node(node_name(rival))) for rival in rival_leaders(candidates, leader, owner)],
            self.gangs.gang_of(follower),
            functools.cache(lambda: self.api.get_job(namespace_of(follower), owner.name)),
        )

    def _node(self, name: str | None) -> Obj | None:
        """The node informer's copy (labels kept current); one read for a node it does not hold yet."""
        if name is None:
            return None
        watched = self.caches.nodes.get(name)
        return watched if watched is not None else self.api.get_node_labels(name)

    # --- release ---------------------------------------------------------------------------------------

    def _release(self, key: str, follower: Obj, leaders: JobLeaders) -> str | None:
        """The domain the follower was released into, None when it was not."""
        return self.api.on_conflict(
            follower,
            lambda current: self._release_once(key, current, leaders),
            lambda: self._read(follower),
        )

    def _release_once(self, key: str, follower: Obj, leaders: JobLeaders) -> str | None:
        pod_key = object_key(follower)
        release = decide_gate_release(
            follower, leaders.leader, leaders.node, leaders.rivals, gang=leaders.gang
        )
        if release.reason in RECORDED_DOMAIN_RELEASES:
            release = decide_recorded_release(follower, leaders.resized_job())
        if release.patch is None:
            if release.reason == SkipReason.NOT_GATED:
                self._drop(pod_key)
            elif release.reason is not None:
                self.metrics.skips.labels(release.reason.value).inc()
            return None
        if self.dry_run:
            self.dry_run_notes.note(
                pod_key, "dry-run: would release into %s", release.domain, extra={"job": key, "pod": pod_key}
            )
            return None
        patched = self.api.patch_pod(
            namespace_of(follower), str(metadata(follower).get("name")), release.patch
        )
        if patched is None:
            self._drop(pod_key)
            return None
        # now pinned: kept until bound, to check against the leader (unless its bind was seen already)
        self.caches.followers.upsert_answer(patched)
        self.metrics.gate_releases.inc()
        log.info(
            "released gate into %s",
            release.domain,
            extra={"job": key, "pod": pod_key, "domain": release.domain},
        )
        return release.domain

    def _released(self, key: str, owner: JobRef, domains: list[str]) -> None:
        self.bind_times.observe(key, self.metrics.bind_to_resize)
        self.recorder.record(
            Outcome(
                job_reference_by_key(key, owner.uid),
                Reason.FOLLOWERS_RELEASED,
                Action.RELEASE_GATE,
                f"released {len(domains)} gated followers into their leader's domain {domains[0]}",
            )
        )

    # --- repair ----------------------------------------------------------------------------------------

    def _repair(self, key: str, pinned: list[Obj], leaders: JobLeaders) -> None:
        """Delete the followers pinned to another domain than their leader's (JobSet's pod reconciler)."""
        now = self._wall_clock()
        doomed = [
            (follower, repair)
            for follower in pinned
            if (
                repair := decide_follower_repair(follower, leaders.leader, leaders.node, leaders.rivals, now)
            ).delete
        ]
        if (
            not doomed
            or leaders.leader is None
            or not self._leader_confirmed(key, leaders.owner, leaders.leader)
        ):
            return
        for follower, repair in doomed:
            self._repair_one(key, follower, repair, leaders.owner)

    def _leader_confirmed(self, key: str, owner: JobRef, leader: Obj) -> bool:
        """The leader the cache shows, read again from the API server: a deletion is never decided on a
        stale cache. A change is not acted on here; its watch event enqueues the Job again."""
        fresh = self.api.get_pod(namespace_of(leader), str(metadata(leader).get("name")))
        if fresh is None or leader_problem(fresh, owner) is not None or node_name(fresh) != node_name(leader):
            log.info("leader changed since it was cached: not repairing yet", extra={"job": key})
            return False
        return True

    def _repair_one(self, key: str, follower: Obj, repair: FollowerRepair, owner: JobRef) -> None:
        namespace, name = namespace_of(follower), str(metadata(follower).get("name"))
        pod_key = object_key(follower)
        if self.dry_run:
            self.dry_run_notes.note(
                pod_key,
                "dry-run: would delete follower pinned to %s (leader in %s)",
                repair.pinned_to,
                repair.domain,
                extra={"job": key, "pod": pod_key},
            )
            return
        uid = uid_of(follower)
        if (
            repair.job_patch is not None
            and self.api.patch_job(namespace, owner.name, repair.job_patch) is None
        ):
            self._drop(pod_key)  # its Job is gone: the garbage collector takes the follower
            return
        if repair.status_patch is not None:
            fresh = self.api.patch_pod_status(namespace, name, repair.status_patch)
        else:
            fresh = self.api.get_pod(namespace, name)
        if fresh is None or is_terminating(fresh) or uid_of(fresh) != uid:
            # Gone, or its deletion (ours, from a stale cached copy) already under way: nothing to repeat.
            self._drop(pod_key)
            return
        deleted = self.api.delete_pod(namespace, name, uid)
        self._drop(pod_key)
        if deleted is None:
            return  # already gone: a late watch event had put a stale copy back into the cache
        self.metrics.follower_repairs.inc()
        log.info(
            "deleted follower pinned to %s: its leader runs in %s",
            repair.pinned_to,
            repair.domain,
            extra={"job": key, "pod": pod_key, "domain": repair.domain},
        )
        self.recorder.record(
            Outcome(
                job_reference_by_key(key, owner.uid),
                Reason.FOLLOWER_REPAIRED,
                Action.DELETE_POD,
                f"deleted follower {name}, pinned to {repair.pinned_to} while its leader runs in "
                f"{repair.domain}, so that it is created again in the leader's domain",
                type=EventType.WARNING,
                related=pod_reference(fresh),
            )
        )

    def _read(self, follower: Obj) -> Obj | None:
        fresh = self.api.get_pod(namespace_of(follower), str(metadata(follower).get("name")))
        if fresh is None:
            self._drop(object_key(follower))
        return fresh

    def _drop(self, pod_key: str) -> None:
        """Take the follower out of the cache (its watch event then finds nothing to hand on)."""
        self.caches.followers.delete(pod_key)
        self.forget(pod_key)
