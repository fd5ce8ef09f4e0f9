"""The reconciler: informer events become Job keys; one worker at a time per key decides and acts.

Observe (informer caches) → decide (`placement.resize`, pure) → act (one patch, or for a follower pinned
to another domain than its leader's: a status patch then a delete). Level-triggered: the work for a Job
key is derived from the current cache every time, so enqueueing a key too often is harmless and
enqueueing everything after a (re-)list or a leadership change is always safe.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from kubekit.client import Kube, KubeError
from kubekit.informer import Store
from kubekit.keys import object_key
from placement.constants import RESIZE_LABEL, RESIZE_PENDING
from placement.leader import Placed, leader_problem, pick_leader, rival_leaders
from placement.objects import (
    JobRef,
    Obj,
    is_leader,
    job_ref_of_pod,
    labels_of,
    metadata,
    namespace_of,
    node_name,
    owner_job_key,
)
from placement.resize import (
    FollowerRepair,
    SkipReason,
    decide_follower_repair,
    decide_gate_release,
    decide_resize,
    has_gate,
    job_ref,
)
from resizer.metrics import Metrics
from resizer.workqueue import ShutDown, WorkQueue

log = logging.getLogger(__name__)

MAX_CONFLICT_ROUNDS = 5
NODE_CACHE_LIMIT = 10_000
BIND_TIMES_LIMIT = 50_000


class Leadership(Protocol):
    def is_leader(self) -> bool: ...


def is_pending_job(job: Obj) -> bool:
    return labels_of(job).get(RESIZE_LABEL) == RESIZE_PENDING


@dataclass
class Caches:
    jobs: Store
    """Jobs labelled `resize: pending`, by `namespace/name`."""
    leaders: Store
    """Leader pods, indexed by their Job's `namespace/name`."""
    followers: Store
    """Unbound followers carrying our scheduling gate or pinned to a domain, indexed by their Job's
    `namespace/name` (`placement.resize.follower_to_watch`)."""


def new_caches() -> Caches:
    return Caches(jobs=Store(), leaders=Store(index=owner_job_key), followers=Store(index=owner_job_key))


def rfc3339_now() -> str:
    """metav1.Time's format: RFC 3339, UTC, seconds."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class LeaderView:
    """A Job's leader as the caches show it: what gate releases and repairs are decided on."""

    owner: JobRef
    leader: Obj | None
    node: Obj | None
    """The leader's Node (labels only), None when unknown."""
    rivals: list[Placed]
    """Other live, bound leaders of the Job, with their Nodes."""


class Retry(Exception):
    """The key must be retried with backoff (the cause is a retryable API error)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Resizer:
    def __init__(
        self,
        kube: Kube,
        caches: Caches,
        queue: WorkQueue,
        metrics: Metrics,
        leadership: Leadership,
        *,
        dry_run: bool = False,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], str] = rfc3339_now,
    ) -> None:
        self.kube = kube
        self.caches = caches
        self.queue = queue
        self.metrics = metrics
        self.leadership = leadership
        self.dry_run = dry_run
        self._clock = clock
        self._wall_clock = wall_clock
        self._bound_seen: dict[str, float] = {}
        self._bound_lock = threading.Lock()
        self._node_labels: dict[str, Obj] = {}
        self._node_lock = threading.Lock()
        self._dry_run_logged: set[str] = set()
        self._workers: list[threading.Thread] = []

    # --- informer handlers: only enqueue ---------------------------------------------------------------

    def enqueue(self, key: str | None) -> None:
        if key:
            self.queue.add(key)
            self.metrics.queue_depth.set(len(self.queue))

    def enqueue_all(self) -> None:
        """Everything that may still need work: pending Jobs and Jobs with unbound followers."""
        for job in self.caches.jobs.items():
            self.enqueue(object_key(job))
        for key in self.caches.followers.index_values():
            self.enqueue(key)

    def leader_seen(self, old: Obj | None, new: Obj) -> None:
        key = owner_job_key(new)
        if key is None:
            return
        if is_leader(new) and node_name(new) and (old is None or not node_name(old)):
            with self._bound_lock:
                if key not in self._bound_seen and len(self._bound_seen) >= BIND_TIMES_LIMIT:
                    # Leaders of Jobs that never need us (other strategies): forget the oldest.
                    del self._bound_seen[next(iter(self._bound_seen))]
                self._bound_seen.setdefault(key, self._clock())
        self.enqueue(key)

    def leader_gone(self, old: Obj) -> None:
        key = owner_job_key(old)
        if key is not None and is_leader(old):
            with self._bound_lock:
                self._bound_seen.pop(key, None)

    def job_gone(self, old: Obj) -> None:
        """A Job left the pending cache (resized, deleted): forget what was noted about it."""
        self._dry_run_logged.discard(object_key(old))

    def follower_gone(self, old: Obj) -> None:
        self._dry_run_logged.discard(object_key(old))

    def footprint(self) -> dict[str, int]:
        """Entries of every structure that grows with Jobs (tests pin that a deleted Job leaves none)."""
        with self._bound_lock:
            bound = len(self._bound_seen)
        return {
            "pending_jobs": len(self.caches.jobs),
            "leaders": len(self.caches.leaders),
            "leader_index": len(self.caches.leaders.index_values()),
            "followers": len(self.caches.followers),
            "follower_index": len(self.caches.followers.index_values()),
            "bind_times": bound,
            "dry_run_notes": len(self._dry_run_logged),
            **{f"queue_{name}": count for name, count in self.queue.footprint().items()},
        }

    # --- workers ---------------------------------------------------------------------------------------

    def start_workers(self, count: int) -> None:
        for number in range(count):
            worker = threading.Thread(target=self._work, name=f"resizer-worker-{number}", daemon=True)
            worker.start()
            self._workers.append(worker)

    @property
    def workers_started(self) -> bool:
        return bool(self._workers)

    def workers_alive(self) -> bool:
        return bool(self._workers) and all(worker.is_alive() for worker in self._workers)

    def stop_workers(self, timeout: float = 5.0) -> None:
        """Let running reconciles finish, waiting `timeout` seconds in total (not per worker)."""
        self.queue.shut_down()
        deadline = time.monotonic() + timeout
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))

    def _work(self) -> None:
        while True:
            try:
                key = self.queue.get()
            except ShutDown:
                return
            if key is None:
                continue
            try:
                self.process(key)
            finally:
                self.queue.done(key)
                self.metrics.queue_depth.set(len(self.queue))

    def process(self, key: str) -> None:
        """Reconcile one Job key, turning failures into retries or dropped keys."""
        try:
            self.reconcile(key)
            self.queue.forget(key)
        except Retry as retry:
            delay = self.queue.retry(key)
            self.metrics.retries.labels(retry.reason).inc()
            log.info(
                "retrying in %.2fs (%s)", delay, retry.reason, extra={"job": key, "reason": retry.reason}
            )
        except KubeError as error:
            self.queue.forget(key)
            self.metrics.errors.labels(error.label).inc()
            log.error("giving up on this change: %s", error, extra={"job": key, "reason": error.label})
        except Exception:
            self.queue.forget(key)
            self.metrics.errors.labels("unexpected").inc()
            log.exception("unexpected error", extra={"job": key})

    # --- reconcile -------------------------------------------------------------------------------------

    def reconcile(self, key: str) -> None:
        if not self.leadership.is_leader():
            return  # standby: keep caches warm; everything is re-enqueued on becoming leader
        job = self.caches.jobs.get(key)
        if job is not None:
            self._reconcile_resize(key, job)
        followers = self.caches.followers.by_index(key)
        if followers:
            self._reconcile_followers(key, followers)

    def _guard(self, call: Callable[..., Obj], *args: Any) -> Obj | None:
        """Run an API call: None if the object is gone, Retry for transient failures, else raise."""
        try:
            return call(*args)
        except KubeError as error:
            if error.status == 404:
                return None
            if error.retryable:
                self.metrics.errors.labels(error.label).inc()
                raise Retry(error.label) from error
            raise

    def _reconcile_resize(self, key: str, job: Obj) -> None:
        namespace, name = namespace_of(job), str(metadata(job).get("name"))
        for _ in range(MAX_CONFLICT_ROUNDS):
            leader = pick_leader(self.caches.leaders.by_index(key), job_ref(job))
            decision = decide_resize(job, leader)
            if not decision.resize or decision.patch is None:
                self._skipped(key, decision.reason, job)
                return
            if self.dry_run:
                if key not in self._dry_run_logged:
                    self._dry_run_logged.add(key)
                    log.info(
                        "dry-run: would resize to %s",
                        decision.target,
                        extra={"job": key, "target": decision.target},
                    )
                return
            if not self.leadership.is_leader():
                return
            try:
                patched = self._guard(self.kube.patch_job, namespace, name, decision.patch)
            except KubeError as error:
                if error.status != 409:
                    raise
                self.metrics.conflicts.inc()
                fresh = self._guard(self.kube.get_job, namespace, name)
                if fresh is None:
                    self.caches.jobs.delete(key)
                    return
                job = fresh
                continue
            if patched is None:
                self.caches.jobs.delete(key)
                return
            self.caches.jobs.delete(key)  # no longer pending; the watch will confirm
            self.metrics.resizes.inc()
            self._observe_latency(key)
            log.info(
                "resized from %s/%s to %s/%s (completions/parallelism)",
                decision.current_completions,
                decision.current_parallelism,
                decision.target,
                decision.target,
                extra={"job": key, "target": decision.target, "pod": object_key(leader) if leader else None},
            )
            return
        raise Retry("conflict")

    def _skipped(self, key: str, reason: SkipReason | None, job: Obj) -> None:
        if reason is None:
            return
        self.metrics.skips.labels(reason.value).inc()
        if reason in (SkipReason.NO_LEADER, SkipReason.LEADER_NOT_BOUND):
            log.debug("waiting: %s", reason.value, extra={"job": key, "reason": reason.value})
        elif reason in (SkipReason.ALREADY_DONE, SkipReason.NOT_PENDING):
            self.caches.jobs.delete(key)
        else:
            log.info("not resizing: %s", reason.value, extra={"job": key, "reason": reason.value})

    def _reconcile_followers(self, key: str, followers: list[Obj]) -> None:
        owner = job_ref_of_pod(followers[0])
        if owner is None:
            return  # the cache indexes followers by their Job: every one has an owner
        candidates = self.caches.leaders.by_index(key)
        leader = pick_leader(candidates, owner)
        view = LeaderView(
            owner,
            leader,
            self._node(node_name(leader)) if leader is not None else None,
            [(rival, self._node(node_name(rival))) for rival in rival_leaders(candidates, leader, owner)],
        )
        released = sum(self._release_one(key, follower, view) for follower in followers if has_gate(follower))
        if released:
            self._observe_latency(key)
        pinned = [follower for follower in followers if not has_gate(follower)]
        if pinned:
            self._repair(key, pinned, view)

    def _repair(self, key: str, pinned: list[Obj], view: LeaderView) -> None:
        """Delete the followers pinned to another domain than their leader's (JobSet's pod reconciler)."""
        now = self._wall_clock()
        doomed = [
            (follower, repair)
            for follower in pinned
            if (repair := decide_follower_repair(follower, view.leader, view.node, view.rivals, now)).delete
        ]
        if not doomed or view.leader is None or not self._leader_confirmed(key, view.owner, view.leader):
            return
        for follower, repair in doomed:
            self._repair_one(key, follower, repair)

    def _leader_confirmed(self, key: str, owner: JobRef, leader: Obj) -> bool:
        """The leader the cache shows, read again from the API server: a deletion is never decided on a
        stale cache. A change is not acted on here; its watch event enqueues the Job again."""
        fresh = self._guard(self.kube.get_pod, namespace_of(leader), str(metadata(leader).get("name")))
        if fresh is None or leader_problem(fresh, owner) is not None or node_name(fresh) != node_name(leader):
            log.info("leader changed since it was cached: not repairing yet", extra={"job": key})
            return False
        return True

    def _repair_one(self, key: str, follower: Obj, repair: FollowerRepair) -> None:
        namespace, name = namespace_of(follower), str(metadata(follower).get("name"))
        pod_key = object_key(follower)
        if self.dry_run:
            if pod_key not in self._dry_run_logged:
                self._dry_run_logged.add(pod_key)
                log.info(
                    "dry-run: would delete follower pinned to %s (leader in %s)",
                    repair.pinned_to,
                    repair.domain,
                    extra={"job": key, "pod": pod_key},
                )
            return
        if not self.leadership.is_leader():
            return
        if repair.status_patch is not None:
            marked = self._guard(self.kube.patch_pod_status, namespace, name, repair.status_patch)
            if marked is None:
                self.caches.followers.delete(pod_key)
                return
        try:
            deleted = self._guard(
                self.kube.delete_pod, namespace, name, str(metadata(follower).get("uid") or "")
            )
        except KubeError as error:
            if error.status != 409:  # 409: the uid precondition failed, that pod is already gone
                raise
            deleted = None
        self.caches.followers.delete(pod_key)
        if deleted is None:
            return  # already gone: a late watch event had put a stale copy back into the cache
        self.metrics.follower_repairs.inc()
        log.info(
            "deleted follower pinned to %s: its leader runs in %s",
            repair.pinned_to,
            repair.domain,
            extra={"job": key, "pod": pod_key, "domain": repair.domain},
        )

    def _release_one(self, key: str, follower: Obj, view: LeaderView) -> int:
        namespace, name = namespace_of(follower), str(metadata(follower).get("name"))
        pod_key = object_key(follower)
        for _ in range(MAX_CONFLICT_ROUNDS):
            release = decide_gate_release(follower, view.leader, view.node, view.rivals)
            if not release.release or release.patch is None:
                if release.reason == SkipReason.NOT_GATED:
                    self.caches.followers.delete(pod_key)
                elif release.reason is not None:
                    self.metrics.skips.labels(release.reason.value).inc()
                return 0
            if self.dry_run:
                if pod_key not in self._dry_run_logged:
                    self._dry_run_logged.add(pod_key)
                    log.info(
                        "dry-run: would release into %s", release.domain, extra={"job": key, "pod": pod_key}
                    )
                return 0
            if not self.leadership.is_leader():
                return 0
            try:
                patched = self._guard(self.kube.patch_pod, namespace, name, release.patch)
            except KubeError as error:
                if error.status not in (409, 422):  # 422: the `test` failed, the gates changed under us
                    raise
                self.metrics.conflicts.inc()
                fresh = self._guard(self.kube.get_pod, namespace, name)
                if fresh is None:
                    self.caches.followers.delete(pod_key)
                    return 0
                follower = fresh
                continue
            if patched is None:
                self.caches.followers.delete(pod_key)
                return 0
            self.caches.followers.upsert(patched)  # now pinned: kept until bound, to check against the leader
            self.metrics.gate_releases.inc()
            log.info(
                "released gate into %s",
                release.domain,
                extra={"job": key, "pod": pod_key, "domain": release.domain},
            )
            return 1
        raise Retry("conflict")

    def _node(self, name: str | None) -> Obj | None:
        if name is None:
            return None
        with self._node_lock:
            cached = self._node_labels.get(name)
        if cached is not None:
            return cached
        node = self._guard(self.kube.get_node, name)
        if node is None:
            return None
        # Topology labels of a node do not change while it exists: keep only the labels.
        slim = {"metadata": {"name": name, "labels": labels_of(node)}}
        with self._node_lock:
            if len(self._node_labels) >= NODE_CACHE_LIMIT:
                self._node_labels.clear()
            self._node_labels[name] = slim
        return slim

    def _observe_latency(self, key: str) -> None:
        with self._bound_lock:
            seen = self._bound_seen.pop(key, None)
        if seen is not None:
            self.metrics.bind_to_resize.observe(self._clock() - seen)


class JobHandler:
    """Pending Jobs: every change is a reason to look again."""

    def __init__(self, resizer: Resizer) -> None:
        self.resizer = resizer

    def on_upsert(self, old: Obj | None, new: Obj) -> None:
        self.resizer.enqueue(object_key(new))

    def on_delete(self, old: Obj) -> None:
        self.resizer.job_gone(old)

    def on_relist(self, objects: list[Obj]) -> None:
        for job in objects:
            self.resizer.enqueue(object_key(job))


class LeaderHandler:
    def __init__(self, resizer: Resizer) -> None:
        self.resizer = resizer

    def on_upsert(self, old: Obj | None, new: Obj) -> None:
        self.resizer.leader_seen(old, new)

    def on_delete(self, old: Obj) -> None:
        self.resizer.leader_gone(old)

    def on_relist(self, objects: list[Obj]) -> None:
        for pod in objects:
            self.resizer.leader_seen(None, pod)


class FollowerHandler:
    """Unbound gated or pinned followers, including gated ones created after their leader bound (the race
    the webhook can lose) and pinned ones whose leader was re-created elsewhere."""

    def __init__(self, resizer: Resizer) -> None:
        self.resizer = resizer

    def on_upsert(self, old: Obj | None, new: Obj) -> None:
        self.resizer.enqueue(owner_job_key(new))

    def on_delete(self, old: Obj) -> None:
        self.resizer.follower_gone(old)

    def on_relist(self, objects: list[Obj]) -> None:
        for pod in objects:
            self.resizer.enqueue(owner_job_key(pod))
