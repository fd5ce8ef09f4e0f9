"""A de-duplicating, rate-limited work queue keyed by object (client-go's workqueue semantics).

- A key is queued at most once; adding it again while queued is a no-op.
- A key is handed to at most one worker at a time; re-added while processing, it is queued again when
  that worker calls `done`, so no change is lost and no key is worked on concurrently.
- `add_after(key, delay)` queues it after `delay` s; a key waits at most once, for the earliest of its
  delays (client-go's delaying queue).
- `retry(key)` re-queues after a per-key exponential delay (base * 2^failures, capped); `forget(key)`
  resets it after a success and drops the key's pending delay: the reconcile that just succeeded decided
  anew whether, and when, to look again.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque
from collections.abc import Callable


class ShutDown(Exception):
    """Raised by `get` once the queue is shut down."""


class WorkQueue:
    def __init__(
        self,
        base_delay: float = 0.05,
        max_delay: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if base_delay <= 0 or max_delay < base_delay:
            raise ValueError(f"need 0 < base_delay <= max_delay, got {base_delay} and {max_delay}")
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._clock = clock
        self._lock = threading.Condition()
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._waiting: list[tuple[float, int, str]] = []
        """A heap of (due time, sequence, key); exactly one entry per key in `_due`."""
        self._due: dict[str, float] = {}
        self._sequence = 0
        self._failures: dict[str, int] = {}
        self._shut_down = False

    def add(self, key: str) -> None:
        with self._lock:
            if self._shut_down or key in self._dirty:
                return
            self._dirty.add(key)
            if key not in self._processing:
                self._queue.append(key)
                self._lock.notify()

    def add_after(self, key: str, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._lock:
            if self._shut_down:
                return
            due = self._clock() + delay
            if key in self._due:
                if self._due[key] <= due:
                    return
                self._cancel(key)
            self._due[key] = due
            self._sequence += 1
            heapq.heappush(self._waiting, (due, self._sequence, key))
            self._lock.notify()

    def retry(self, key: str) -> float:
        """Re-queue after this key's next backoff delay; returns the delay."""
        with self._lock:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        delay = min(self._max_delay, self._base_delay * (2.0**failures))
        self.add_after(key, delay)
        return delay

    def failures(self, key: str) -> int:
        with self._lock:
            return self._failures.get(key, 0)

    def forget(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)
            if key in self._due:
                self._cancel(key)

    def _cancel(self, key: str) -> None:
        """Drop the key's waiting entry (call with the lock held)."""
        del self._due[key]
        self._waiting = [entry for entry in self._waiting if entry[2] != key]
        heapq.heapify(self._waiting)

    def get(self, timeout: float | None = None) -> str | None:
        """The next key to work on (call `done` after), None on timeout; raises ShutDown when shut down."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._lock:
            while True:
                if self._shut_down:
                    raise ShutDown
                self._promote_due()
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                wait = None if deadline is None else deadline - self._clock()
                if self._waiting:
                    until_due = self._waiting[0][0] - self._clock()
                    wait = until_due if wait is None else min(wait, until_due)
                if wait is not None and wait <= 0:
                    if deadline is not None and self._clock() >= deadline:
                        return None
                    continue
                self._lock.wait(wait)

    def done(self, key: str) -> None:
        with self._lock:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._lock.notify()

    def shut_down(self) -> None:
        with self._lock:
            self._shut_down = True
            self._lock.notify_all()

    def footprint(self) -> dict[str, int]:
        """Entries per internal structure: all zero once every key is done and forgotten."""
        with self._lock:
            return {
                "queued": len(self._queue),
                "dirty": len(self._dirty),
                "processing": len(self._processing),
                "waiting": len(self._waiting),
                "failures": len(self._failures),
            }

    def __len__(self) -> int:
        with self._lock:
            return len(self._queue) + len(self._waiting)

    def _promote_due(self) -> None:
        now = self._clock()
        while self._waiting and self._waiting[0][0] <= now:
            _, _, key = heapq.heappop(self._waiting)
            del self._due[key]
            if key not in self._dirty:
                self._dirty.add(key)
                if key not in self._processing:
                    self._queue.append(key)
