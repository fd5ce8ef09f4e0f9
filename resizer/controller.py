"""The reconciler: informer events become Job keys; one worker at a time per key decides and acts.

Observe (informer caches) → decide (`placement.resize`, `placement.gang`, pure) → act (one patch, or for a
follower pinned to another domain than its leader's: a status patch then a delete).

All-or-nothing JobSets (docs/design.md, "All-or-nothing") share one work key, `GANG_KEY`: their admission
depends on every JobSet and every domain, so one worker decides it at a time (`_reconcile_gangs`); the
Jobs of a gang are resized, and its followers released, only once `gang_complete`.

Level-triggered: the work for a Job key is derived from the current cache every time, so enqueueing a key
too often is harmless and enqueueing everything after a (re-)list or a leadership change is always safe.
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
from placement.constants import DEFAULT_PRIORITY, RESIZE_LABEL, RESIZE_PENDING
from placement.gang import (
    AdmissionPlan,
    Gang,
    GangId,
    GangState,
    Release,
    Timeout,
    as_released,
    build_gang,
    format_time,
    gang_complete,
    gang_of,
    node_view,
    plan_admission,
    pod_priority_value,
    release_patch,
    timeout_condition,
)
from placement.leader import Placed, leader_problem, pick_leader, rival_leaders
from placement.objects import (
    JobRef,
    Obj,
    is_finished_pod,
    is_leader,
    is_terminating,
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
GANG_KEY = ":all-or-nothing"
"""The work key of the all-or-nothing admission queue (a colon is in no namespace or Job name)."""
DEFAULT_GANG_TIMEOUT = 300.0
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
    nodes: Store
    """Nodes, projected to name, labels and spec.unschedulable (`placement.cached_fields.QUEUE_NODE_FIELDS`):
    the free domains of the all-or-nothing queue, and the leaders' domains."""


def new_caches() -> Caches:
    return Caches(
        jobs=Store(),
        leaders=Store(index=owner_job_key),
        followers=Store(index=owner_job_key),
        nodes=Store(),
    )


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
        epoch: Callable[[], float] = time.time,
        gang_timeout: float = DEFAULT_GANG_TIMEOUT,
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
        self._epoch = epoch
        self.gang_timeout = gang_timeout
        self._gangs: dict[GangId, set[str]] = {}
        """Leader pods of every gang, by `namespace/name` (read from `caches.leaders`)."""
        self._gang_lock = threading.Lock()
        self._blocked_logged: GangId | None = None
        self._unfit_logged: set[GangId] = set()
        self._gang_wakeup: float | None = None
        self._ungated: dict[str, str] = {}
        """Leader uids this replica ungated, and when: applied over the cache (`as_released`), so a watch
        event older than the gate's removal cannot make a released leader look queued again."""
        self._deleted: dict[str, str] = {}
        """Leader uids this replica deleted after a timeout, and when: shown terminating until they are gone
        (an older watch event must not make them count for a second timeout)."""

    # --- informer handlers: only enqueue ---------------------------------------------------------------

    def enqueue(self, key: str | None) -> None:
        if key:
            self.queue.add(key)
            self.metrics.queue_depth.set(len(self.queue))

    def enqueue_all(self) -> None:
        """Everything that may still need work: pending Jobs, Jobs with unbound followers, the gang queue."""
        for job in self.caches.jobs.items():
            self.enqueue(object_key(job))
        for key in self.caches.followers.index_values():
            self.enqueue(key)
        self.enqueue_gangs()

    def enqueue_gangs(self) -> None:
        """Look at the all-or-nothing queue again (a leader or a node changed), when there is one."""
        with self._gang_lock:
            any_gang = bool(self._gangs)
        if any_gang:
            self.enqueue(GANG_KEY)

    def _track_gang(self, pod: Obj, present: bool) -> None:
        """Keep the gang index of leader pods; a gang leader's change re-checks its Jobs (they grow once
        every leader is bound)."""
        gang = gang_of(pod)
        if gang is None:
            return
        pod_key = object_key(pod)
        with self._gang_lock:
            members = self._gangs.setdefault(gang, set())
            if present:
                members.add(pod_key)
            else:
                members.discard(pod_key)
            jobs = {owner_job_key(member) for member in self._gang_pods(gang)}
        for job_key in jobs:
            self.enqueue(job_key)

    def _gang_pods(self, gang: GangId) -> list[Obj]:
        """The cached leader pods of `gang` (call with `_gang_lock` held); forgets pods no longer cached."""
        members = self._gangs.get(gang, set())
        pods = []
        for pod_key in list(members):
            pod = self.caches.leaders.get(pod_key)
            if pod is None:
                members.discard(pod_key)
                continue
            pods.append(self._as_acted_on(pod))
        if not members:
            self._gangs.pop(gang, None)
        return pods

    def _as_acted_on(self, pod: Obj) -> Obj:
        """The cached pod with what this replica already did to it (call with `_gang_lock` held): a watch
        event older than our own patch or delete must not undo it in the queue's eyes."""
        uid = str(metadata(pod).get("uid") or "")
        deleted_at = self._deleted.get(uid)
        if deleted_at is not None and not metadata(pod).get("deletionTimestamp"):
            return {**pod, "metadata": {**metadata(pod), "deletionTimestamp": deleted_at}}
        released_at = self._ungated.get(uid)
        return as_released(pod, released_at) if released_at is not None else pod

    def gang(self, gang_id: GangId) -> Gang | None:
        with self._gang_lock:
            return build_gang(gang_id, self._gang_pods(gang_id))

    def gangs(self) -> list[Gang]:
        with self._gang_lock:
            ids = list(self._gangs)
            built = [build_gang(gang_id, self._gang_pods(gang_id)) for gang_id in ids]
        return [gang for gang in built if gang is not None]

    def leader_seen(self, old: Obj | None, new: Obj) -> None:
        key = owner_job_key(new)
        if key is None:
            return
        self._track_gang(new, present=True)
        self.enqueue_gangs()
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
        self._track_gang(old, present=False)
        with self._gang_lock:
            self._ungated.pop(str(metadata(old).get("uid") or ""), None)
            self._deleted.pop(str(metadata(old).get("uid") or ""), None)
        self.enqueue_gangs()

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
        if key == GANG_KEY:
            self._reconcile_gangs()
            return
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
            if not self._gang_complete(job):
                self._skipped(key, SkipReason.GANG_INCOMPLETE, job)
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
        if reason in (SkipReason.NO_LEADER, SkipReason.LEADER_NOT_BOUND, SkipReason.GANG_INCOMPLETE):
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
        gated = [follower for follower in followers if has_gate(follower)]
        if gated and not self._gang_complete(gated[0]):
            self.metrics.skips.labels(SkipReason.GANG_INCOMPLETE.value).inc()
            gated = []
        released = sum(self._release_one(key, follower, view) for follower in gated)
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
        uid = str(metadata(follower).get("uid") or "")
        if repair.status_patch is not None:
            fresh = self._guard(self.kube.patch_pod_status, namespace, name, repair.status_patch)
        else:
            fresh = self._guard(self.kube.get_pod, namespace, name)
        if fresh is None or is_terminating(fresh) or str(metadata(fresh).get("uid") or "") != uid:
            # Gone, or its deletion (ours, from a stale cached copy) already under way: nothing to repeat.
            self.caches.followers.delete(pod_key)
            return
        try:
            deleted = self._guard(self.kube.delete_pod, namespace, name, uid)
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

    # --- all-or-nothing --------------------------------------------------------------------------------

    def _gang_complete(self, obj: Obj) -> bool:
        """True unless `obj` (a Job or a follower) belongs to a gang not every Job of which has a bound
        leader yet."""
        gang_id = gang_of(obj)
        if gang_id is None:
            return True
        gang = self.gang(gang_id)
        return gang is not None and gang_complete(gang)

    def _held_nodes(self) -> dict[str, int]:
        """Nodes of bound, unfinished exclusive leaders (terminating ones still occupy their node), with the
        highest priority among them."""
        held: dict[str, int] = {}
        for pod in self.caches.leaders.items():
            node = node_name(pod)
            if node is not None and not is_finished_pod(pod):
                held[node] = max(held.get(node, DEFAULT_PRIORITY), pod_priority_value(pod))
        return held

    def _reconcile_gangs(self) -> None:
        plan = plan_admission(
            self.gangs(),
            [node_view(node) for node in self.caches.nodes.items()],
            self._held_nodes(),
            self._epoch(),
            self.gang_timeout,
        )
        queued = sum(1 for state in plan.states.values() if state is GangState.QUEUED)
        self.metrics.gangs_queued.set(queued - sum(1 for release in plan.releases if not release.resumed))
        self._log_blocked(plan)
        for timeout in plan.timeouts:
            self._time_out(timeout)
        for release in plan.releases:
            self._release_gang(release)
        if plan.timeouts:
            self.enqueue(GANG_KEY)  # their domains are free now
        if plan.next_deadline is not None:
            self._wake_gangs_at(plan.next_deadline)

    def _wake_gangs_at(self, deadline: float) -> None:
        """Look at the queue again at `deadline` (a timeout), once: not one timer per pass."""
        now = self._epoch()
        if self._gang_wakeup is not None and now < self._gang_wakeup <= deadline:
            return  # an earlier wake-up is pending; it schedules the next one
        self._gang_wakeup = deadline
        self.queue.add_after(GANG_KEY, max(0.0, deadline - now) + 0.01)

    def _log_blocked(self, plan: AdmissionPlan) -> None:
        if plan.blocked is not None and plan.blocked != self._blocked_logged:
            log.info(
                "all-or-nothing: JobSet %s waits for %d free domains (%d free)",
                plan.blocked,
                plan.blocked_needs,
                plan.blocked_free,
                extra={"jobset": str(plan.blocked), "reason": "waiting-for-domains"},
            )
        self._blocked_logged = plan.blocked
        for gang, needs, existing in plan.unfit:
            if gang not in self._unfit_logged:
                log.warning(
                    "all-or-nothing: JobSet %s needs %d domains, the cluster has %d: it waits without "
                    "holding up the queue",
                    gang,
                    needs,
                    existing,
                    extra={"jobset": str(gang), "reason": "more-jobs-than-domains"},
                )
        self._unfit_logged = {gang for gang, _, _ in plan.unfit}

    def _release_gang(self, release: Release) -> None:
        if self.dry_run:
            if str(release.gang) not in self._dry_run_logged:
                self._dry_run_logged.add(str(release.gang))
                log.info(
                    "dry-run: would release JobSet %s", release.gang, extra={"jobset": str(release.gang)}
                )
            return
        ungated = 0
        for pod_key in release.pods:
            if not self.leadership.is_leader():
                return
            ungated += self._ungate_leader(pod_key)
        if not release.resumed:
            self.metrics.gang_admissions.inc()
        log.info(
            "all-or-nothing: %s JobSet %s: %d leaders ungated",
            "finished releasing" if release.resumed else "released",
            release.gang,
            ungated,
            extra={"jobset": str(release.gang), "pods": ungated},
        )

    def _ungate_leader(self, pod_key: str) -> int:
        pod = self.caches.leaders.get(pod_key)
        for _ in range(MAX_CONFLICT_ROUNDS):
            if pod is None:
                return 0
            now = format_time(self._epoch())
            patch = release_patch(pod, now)
            if patch is None:
                return 0
            namespace, name = namespace_of(pod), str(metadata(pod).get("name"))
            try:
                patched = self._guard(self.kube.patch_pod, namespace, name, patch)
            except KubeError as error:
                if error.status not in (409, 422):  # 422: the `test` failed, the gates changed under us
                    raise
                self.metrics.conflicts.inc()
                pod = self._guard(self.kube.get_pod, namespace, name)
                continue
            if patched is None:
                return 0
            with self._gang_lock:
                self._ungated[str(metadata(patched).get("uid") or "")] = now
            self.caches.leaders.upsert(patched)
            self.metrics.leader_releases.inc()
            return 1
        raise Retry("conflict")

    def _time_out(self, timeout: Timeout) -> None:
        if self.dry_run:
            if f"timeout {timeout.gang}" not in self._dry_run_logged:
                self._dry_run_logged.add(f"timeout {timeout.gang}")
                log.info(
                    "dry-run: would time out JobSet %s", timeout.gang, extra={"jobset": str(timeout.gang)}
                )
            return
        log.warning(
            "all-or-nothing: JobSet %s released %.0fs ago but not all of its leaders bound: deleting its "
            "%d ungated leaders so that it queues again",
            timeout.gang,
            timeout.waited,
            len(timeout.pods),
            extra={"jobset": str(timeout.gang), "reason": "timeout"},
        )
        if not self.leadership.is_leader():
            return
        self.metrics.gang_timeouts.inc()
        now = self._wall_clock()
        condition = {"status": {"conditions": [timeout_condition(timeout.gang, timeout.waited, now)]}}
        for pod_key, uid in timeout.pods:
            namespace, name = pod_key.split("/", 1)
            if self._guard(self.kube.patch_pod_status, namespace, name, condition) is not None:
                try:
                    self._guard(self.kube.delete_pod, namespace, name, uid)
                except KubeError as error:
                    if error.status != 409:  # 409: the uid precondition failed, that pod is already gone
                        raise
            with self._gang_lock:
                self._deleted[uid] = now

    def _node(self, name: str | None) -> Obj | None:
        if name is None:
            return None
        watched = self.caches.nodes.get(name)  # the all-or-nothing queue's informer: labels, kept current
        if watched is not None:
            return watched
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


class NodeHandler:
    """Nodes: a change can free or take a domain of the all-or-nothing queue."""

    def __init__(self, resizer: Resizer) -> None:
        self.resizer = resizer

    def on_upsert(self, old: Obj | None, new: Obj) -> None:
        self.resizer.enqueue_gangs()

    def on_delete(self, old: Obj) -> None:
        self.resizer.enqueue_gangs()

    def on_relist(self, objects: list[Obj]) -> None:
        self.resizer.enqueue_gangs()


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
