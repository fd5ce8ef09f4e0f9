"""kube-scheduler's scheduling queue: activeQ, backoffQ and the unschedulable pool.

A pod that failed is parked as unschedulable until a cluster event that may help it (`move`), or until it
has waited `unschedulable_flush_seconds`; it then goes back through backoffQ, whose per-pod delay doubles
with each failed attempt from `initial_backoff` to `max_backoff`.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Callable

from kubesim.clock import Clock

_FLUSH_CHECK_SECONDS = 30.0
"""The unschedulable pool is checked for pods waiting too long every 30 s (as upstream)."""


class SchedulingQueue:
    def __init__(self, clock: Clock, initial_backoff: float, max_backoff: float, flush_after: float) -> None:
        self._clock = clock
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._flush_after = flush_after
        self._sequence = itertools.count()
        self._active: list[tuple[int, int, str]] = []
        self._in_active: set[str] = set()
        self._backoff: list[tuple[float, int, str]] = []
        self._backoff_until: dict[str, float] = {}
        self._unschedulable: dict[str, float] = {}
        self._attempts: dict[str, int] = {}
        self._last_attempt: dict[str, float] = {}
        self._priority: dict[str, int] = {}
        self._next_flush = clock.now() + _FLUSH_CHECK_SECONDS
        self._changed = asyncio.Event()

    def __contains__(self, key: str) -> bool:
        return key in self._in_active or key in self._backoff_until or key in self._unschedulable

    def sizes(self) -> tuple[int, int, int]:
        return len(self._in_active), len(self._backoff_until), len(self._unschedulable)

    def add(self, key: str, priority: int = 0) -> None:
        """A new pending pod (or one whose update may make it schedulable)."""
        self._priority[key] = priority
        if key in self._in_active or key in self._backoff_until:
            return
        if key in self._unschedulable:
            self._requeue(key)
            return
        self._push_active(key)

    def forget(self, key: str) -> None:
        """The pod was bound or deleted."""
        self._in_active.discard(key)
        self._backoff_until.pop(key, None)
        self._unschedulable.pop(key, None)
        self._attempts.pop(key, None)
        self._last_attempt.pop(key, None)
        self._priority.pop(key, None)

    def failed(self, key: str, unschedulable: bool) -> None:
        """An attempt failed: park the pod (unschedulable) or retry it after its backoff (an error)."""
        self._attempts[key] = self._attempts.get(key, 0) + 1
        self._last_attempt[key] = self._clock.now()
        if unschedulable:
            self._unschedulable[key] = self._clock.now()
        else:
            self._push_backoff(key)

    def move(self, wanted: Callable[[str], bool] | None = None) -> int:
        """A cluster event: unschedulable pods it may help go back to backoffQ/activeQ. Returns how many."""
        keys = [k for k in self._unschedulable if wanted is None or wanted(k)]
        for key in keys:
            self._requeue(key)
        return len(keys)

    def backoff_seconds(self, key: str) -> float:
        attempts = self._attempts.get(key, 0)
        if attempts == 0:
            return 0.0
        return float(min(self._initial_backoff * 2 ** (attempts - 1), self._max_backoff))

    async def pop(self) -> str:
        while True:
            self._promote()
            while self._active:
                _, _, key = heapq.heappop(self._active)
                if key in self._in_active:
                    self._in_active.discard(key)
                    return key
            self._changed.clear()
            deadline = self._next_flush if self._unschedulable else None
            if self._backoff:
                deadline = min(self._backoff[0][0], deadline or self._backoff[0][0])
            timeout = None
            if deadline is not None:
                timeout = max(0.0, (deadline - self._clock.now()) * self._clock.time_scale)
            # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancellation that races
            # with the event being set, and the cancelled worker would then never stop
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._changed.wait()

    def _requeue(self, key: str) -> None:
        self._unschedulable.pop(key, None)
        if self._last_attempt.get(key, 0.0) + self.backoff_seconds(key) > self._clock.now():
            self._push_backoff(key)
        else:
            self._push_active(key)

    def _push_active(self, key: str) -> None:
        self._backoff_until.pop(key, None)
        self._in_active.add(key)
        heapq.heappush(self._active, (-self._priority.get(key, 0), next(self._sequence), key))
        self._changed.set()

    def _push_backoff(self, key: str) -> None:
        ready_at = self._last_attempt.get(key, self._clock.now()) + self.backoff_seconds(key)
        self._backoff_until[key] = ready_at
        heapq.heappush(self._backoff, (ready_at, next(self._sequence), key))
        self._changed.set()

    def _promote(self) -> None:
        now = self._clock.now()
        while self._backoff and self._backoff[0][0] <= now:
            ready_at, _, key = heapq.heappop(self._backoff)
            if self._backoff_until.get(key) == ready_at:
                del self._backoff_until[key]
                self._push_active(key)
        if now >= self._next_flush:
            self._next_flush = now + _FLUSH_CHECK_SECONDS
            for key, since in list(self._unschedulable.items()):
                if now - since >= self._flush_after:
                    self._requeue(key)
