"""kube-scheduler's scheduling queue: activeQ, backoffQ and the unschedulable pool, with queueing hints.

kubernetes/kubernetes pkg/scheduler/backend/queue/scheduling_queue.go (PriorityQueue, SchedulerQueueingHints
enabled, the default since 1.32):
- a pod rejected in a scheduling cycle records the plugins that rejected it (UnschedulablePlugins) and is
  parked in the unschedulable pool (`AddUnschedulableIfNotPresent`); a cycle that failed with an error (no
  rejecting plugin) goes back through backoffQ at once;
- a cluster event moves a parked pod only when the queueing hint of one of its rejecting plugins says Queue
  (`isPodWorthRequeuing`), the scheduler's `worth_requeuing` callback; the pod then goes to backoffQ while
  its backoff (1 s doubling per attempt, capped) has not expired, else to activeQ
  (`requeuePodWithQueueingStrategy`);
- events that arrive while a pod is in flight (popped, not yet failed or done) are replayed through its
  hints when it fails (`determineSchedulingHintForInFlightPod`), so none is lost;
- a pod gated by a PreEnqueue plugin (scheduling gates) waits in the pool without attempts until an update
  lifts the gate;
- every 30 s, pods parked longer than `flush_after` are moved whatever their hints
  (`flushUnschedulablePodsLeftover`: its UnschedulableTimeout event is a wildcard); gated pods stay.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kubesim.clock import Clock

from .cluster_events import ClusterEvent

_FLUSH_CHECK_SECONDS = 30.0
"""The unschedulable pool is checked for pods waiting too long every 30 s (as upstream)."""

WorthRequeuing = Callable[[str, frozenset[str], ClusterEvent], bool]
"""(pod key, its rejecting plugins, the event) -> whether one of those plugins' hints says Queue."""

ACTIVE, BACKOFF, UNSCHEDULABLE, IN_FLIGHT = "activeQ", "backoffQ", "unschedulable", "in flight"


@dataclass
class _QueuedPod:
    priority: int
    timestamp: float
    """When it was added or last failed: backoff and the pool's timeout count from here."""
    where: str | None = None
    attempts: int = 0
    rejectors: frozenset[str] = frozenset()
    gated: bool = False
    sequence: int = 0
    """Identifies its current heap entry (older entries of the same pod are stale)."""


class SchedulingQueue:
    def __init__(
        self,
        clock: Clock,
        initial_backoff: float,
        max_backoff: float,
        flush_after: float,
        worth_requeuing: WorthRequeuing | None = None,
    ) -> None:
        self._clock = clock
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._flush_after = flush_after
        self._worth: WorthRequeuing = worth_requeuing or (lambda _key, _rejectors, _event: True)
        self._sequence = itertools.count()
        self._pods: dict[str, _QueuedPod] = {}
        self._active: list[tuple[int, int, str]] = []
        self._backoff: list[tuple[float, int, str]] = []
        self._unschedulable: set[str] = set()
        self._counts = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, IN_FLIGHT: 0}
        self._flight_log: list[tuple[ClusterEvent, str | None]] = []
        """Events seen while pods were in flight; (event, the only pod it concerns or None)."""
        self._flight_log_base = 0
        """Absolute position of `_flight_log[0]`."""
        self._in_flight: dict[str, int] = {}
        """In-flight pod -> absolute log position when it was popped."""
        self._next_flush = clock.now() + _FLUSH_CHECK_SECONDS
        self._changed = asyncio.Event()

    def __contains__(self, key: str) -> bool:
        return key in self._pods

    def where(self, key: str) -> str | None:
        pod = self._pods.get(key)
        return None if pod is None else pod.where

    def sizes(self) -> tuple[int, int, int]:
        """(activeQ, backoffQ, unschedulable pool) lengths."""
        return self._counts[ACTIVE], self._counts[BACKOFF], self._counts[UNSCHEDULABLE]

    def rejectors(self, key: str) -> frozenset[str]:
        pod = self._pods.get(key)
        return frozenset() if pod is None else pod.rejectors

    def waiting(self) -> Iterable[str]:
        """Keys of the pods in the unschedulable pool."""
        return tuple(self._unschedulable)

    # --- informer-driven changes -----------------------------------------------------------------------

    def add(self, key: str, priority: int = 0, gated_by: str | None = None) -> None:
        """A new pending pod: activeQ, or the pool when a PreEnqueue plugin (`gated_by`) holds it."""
        if key in self._pods:
            return
        pod = _QueuedPod(priority, self._clock.now())
        self._pods[key] = pod
        if gated_by is not None:
            pod.gated, pod.rejectors = True, frozenset({gated_by})
            self._move(key, pod, UNSCHEDULABLE)
            return
        self._push_active(key, pod)

    def update(
        self, key: str, events: Iterable[ClusterEvent], priority: int = 0, gated_by: str | None = None
    ) -> None:
        """The pending pod itself changed (PriorityQueue.Update): a parked pod is moved when a hint of its
        rejectors says the change may help; an in-flight pod gets the change replayed if it fails."""
        pod = self._pods.get(key)
        if pod is None:
            self.add(key, priority, gated_by)
            return
        pod.gated = gated_by is not None
        if pod.where == IN_FLIGHT:
            self._flight_log += [(event, key) for event in events]
            return
        if pod.where != UNSCHEDULABLE:
            return
        if any(self._worth(key, pod.rejectors, event) for event in events):
            self._requeue(key, pod)

    def forget(self, key: str) -> None:
        """The pod was bound, deleted, or is no longer this scheduler's."""
        pod = self._pods.pop(key, None)
        if pod is None:
            return
        if pod.where is not None:
            self._counts[pod.where] -= 1
        self._unschedulable.discard(key)
        self._end_flight(key)

    def on_event(self, event: ClusterEvent, candidate: Callable[[str], bool] | None = None) -> int:
        """A cluster event (movePodsToActiveOrBackoffQueue): parked pods (those `candidate` accepts) whose
        rejectors' hints say Queue go to backoffQ/activeQ. Returns how many moved."""
        if self._in_flight:
            self._flight_log.append((event, None))
        moved = 0
        for key in list(self._unschedulable):
            if candidate is not None and not candidate(key):
                continue
            pod = self._pods[key]
            if self._worth(key, pod.rejectors, event):
                self._requeue(key, pod)
                moved += pod.where != UNSCHEDULABLE
        return moved

    # --- the scheduling loop ---------------------------------------------------------------------------

    async def pop(self) -> str:
        """The next pod to schedule (highest priority, then first in); it is in flight until `failed` or
        `forget`."""
        while True:
            self._promote()
            while self._active:
                _, sequence, key = heapq.heappop(self._active)
                pod = self._pods.get(key)
                if pod is None or pod.where != ACTIVE or pod.sequence != sequence:
                    continue
                pod.attempts += 1
                self._move(key, pod, IN_FLIGHT)
                self._in_flight[key] = self._flight_log_base + len(self._flight_log)
                return key
            self._changed.clear()
            deadline = self._next_flush if self._unschedulable else None
            if self._backoff:
                deadline = min(self._backoff[0][0], deadline or self._backoff[0][0])
            timeout = None
            if deadline is not None:
                timeout = max(0.0, (deadline - self._clock.now()) * self._clock.time_scale)
            # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancellation that arrives
            # as the event is set, and the scheduler's task would then never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._changed.wait()

    def failed(self, key: str, rejectors: frozenset[str] = frozenset()) -> None:
        """An attempt failed (AddUnschedulableIfNotPresent): rejected by `rejectors`, or an error when empty
        (then retried after its backoff)."""
        pod = self._pods.get(key)
        if pod is None:
            return
        replay = self._end_flight(key)
        pod.timestamp = self._clock.now()
        pod.rejectors = rejectors
        if not rejectors or any(
            self._worth(key, rejectors, event) for event, only in replay if only in (None, key)
        ):
            self._requeue(key, pod)
        else:
            self._move(key, pod, UNSCHEDULABLE)

    def backoff_seconds(self, key: str) -> float:
        """podInitialBackoffDuration doubled per attempt, capped at podMaxBackoffDuration."""
        pod = self._pods.get(key)
        if pod is None or pod.attempts == 0:
            return 0.0
        return float(min(self._initial_backoff * 2 ** (pod.attempts - 1), self._max_backoff))

    # --- internals -------------------------------------------------------------------------------------

    def _requeue(self, key: str, pod: _QueuedPod) -> None:
        """requeuePodWithQueueingStrategy: backoffQ while backing off, else activeQ; a gated pod stays."""
        if pod.gated:
            self._move(key, pod, UNSCHEDULABLE)
            return
        ready_at = pod.timestamp + self.backoff_seconds(key)
        if ready_at > self._clock.now():
            self._move(key, pod, BACKOFF)
            pod.sequence = next(self._sequence)
            heapq.heappush(self._backoff, (ready_at, pod.sequence, key))
            self._changed.set()
        else:
            self._push_active(key, pod)

    def _push_active(self, key: str, pod: _QueuedPod) -> None:
        self._move(key, pod, ACTIVE)
        pod.sequence = next(self._sequence)
        heapq.heappush(self._active, (-pod.priority, pod.sequence, key))
        self._changed.set()

    def _move(self, key: str, pod: _QueuedPod, where: str) -> None:
        if pod.where is not None:
            self._counts[pod.where] -= 1
        self._counts[where] += 1
        if where == UNSCHEDULABLE:
            self._unschedulable.add(key)
        elif pod.where == UNSCHEDULABLE:
            self._unschedulable.discard(key)
        pod.where = where

    def _end_flight(self, key: str) -> list[tuple[ClusterEvent, str | None]]:
        """Stop tracking an in-flight pod; returns the events seen since it was popped."""
        since = self._in_flight.pop(key, None)
        if since is None:
            return []
        replay = self._flight_log[since - self._flight_log_base :]
        oldest = min(self._in_flight.values(), default=self._flight_log_base + len(self._flight_log))
        del self._flight_log[: oldest - self._flight_log_base]
        self._flight_log_base = oldest
        return replay

    def _promote(self) -> None:
        now = self._clock.now()
        while self._backoff and self._backoff[0][0] <= now:
            _, sequence, key = heapq.heappop(self._backoff)
            pod = self._pods.get(key)
            if pod is not None and pod.where == BACKOFF and pod.sequence == sequence:
                self._push_active(key, pod)
        if now >= self._next_flush:
            self._next_flush = now + _FLUSH_CHECK_SECONDS
            for key in list(self._unschedulable):
                pod = self._pods[key]
                if not pod.gated and now - pod.timestamp > self._flush_after:
                    self._requeue(key, pod)
