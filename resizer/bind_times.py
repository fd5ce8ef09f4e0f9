"""When this replica first saw each Job's leader bound: where `bind_to_resize_seconds` starts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from prometheus_client import Histogram

BIND_TIMES_LIMIT = 50_000


class BindTimes:
    """By Job key; forgotten when the Job's resize or last gate release is observed, or its leader goes."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, limit: int = BIND_TIMES_LIMIT) -> None:
        self._clock = clock
        self._limit = limit
        self._lock = threading.Lock()
        self._seen: dict[str, float] = {}

    def bound(self, job_key: str) -> None:
        """The Job's leader was seen bound now (the first time counts)."""
        with self._lock:
            if job_key not in self._seen and len(self._seen) >= self._limit:
                # Leaders of Jobs that never need us (other strategies): forget the oldest.
                del self._seen[next(iter(self._seen))]
            self._seen.setdefault(job_key, self._clock())

    def observe(self, job_key: str, histogram: Histogram) -> None:
        """The Job grew (or its followers were released): its bind-to-resize time into `histogram`."""
        with self._lock:
            seen = self._seen.pop(job_key, None)
        if seen is not None:
            histogram.observe(self._clock() - seen)

    def forget(self, job_key: str) -> None:
        with self._lock:
            self._seen.pop(job_key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)
