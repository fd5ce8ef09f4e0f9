"""A client-go style work queue: deduplicated keys, delayed adds, per-key exponential backoff.

A key is never handed to two workers at once: a key added while it is being processed is queued again
when the worker calls `done`. `add_after` keeps the earliest pending time of a key, so a short delay
(a pod update) overrides a long one (a failure backoff), as client-go's delaying queue does.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import deque

from kubesim.clock import Clock


class WorkQueue:
    def __init__(self, clock: Clock, base_delay: float, max_delay: float) -> None:
        self._clock = clock
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._queue: deque[str] = deque()
        self._queued: set[str] = set()
        self._processing: set[str] = set()
        self._dirty: set[str] = set()
        self._waiting: dict[str, float] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._sequence = itertools.count()
        self._failures: dict[str, int] = {}
        self._changed = asyncio.Event()

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: str) -> None:
        self._waiting.pop(key, None)
        if key in self._processing:
            self._dirty.add(key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._queue.append(key)
            self._changed.set()

    def add_after(self, key: str, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        ready_at = self._clock.now() + delay
        current = self._waiting.get(key)
        if current is not None and current <= ready_at:
            return
        self._waiting[key] = ready_at
        heapq.heappush(self._heap, (ready_at, next(self._sequence), key))
        self._changed.set()

    def backoff(self, key: str) -> float:
        """The delay the next `add_rate_limited(key)` will use."""
        failures = self._failures.get(key, 0)
        return float(min(self._base_delay * (2**failures), self._max_delay))

    def add_rate_limited(self, key: str) -> float:
        delay = self.backoff(key)
        self._failures[key] = self._failures.get(key, 0) + 1
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: str) -> int:
        return self._failures.get(key, 0)

    def pending_at(self, key: str) -> float | None:
        """Simulated time at which a delayed `key` becomes ready (None when not waiting)."""
        return self._waiting.get(key)

    async def get(self) -> str:
        while True:
            self._promote_due()
            if self._queue:
                key = self._queue.popleft()
                self._queued.discard(key)
                self._processing.add(key)
                return key
            self._changed.clear()
            timeout = None
            if self._heap:
                timeout = max(0.0, (self._heap[0][0] - self._clock.now()) * self._clock.time_scale)
            # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancellation that races
            # with the event being set, and the cancelled worker would then never stop
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._changed.wait()

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def _promote_due(self) -> None:
        now = self._clock.now()
        while self._heap and self._heap[0][0] <= now:
            ready_at, _, key = heapq.heappop(self._heap)
            if self._waiting.get(key) == ready_at:
                del self._waiting[key]
                self.add(key)
