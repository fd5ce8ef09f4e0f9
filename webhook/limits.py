"""Bounds that keep the webhook answering under abuse: admissions in flight, memory of request bodies.

A webhook with failurePolicy Fail must fail fast and clearly rather than hang. Connections are bounded
before TLS (`webhook.listener`), request headers in size and time (`webhook.protocol`); this module bounds
what admission requests hold once their headers are in:

- `InflightGate`: admissions being decided. A body is read *before* a slot is taken, so a client trickling
  bodies holds no slot; beyond `max_inflight` an admission is shed at once with 429 + Retry-After (health
  checks never are), and `/readyz` reports unready while shedding goes on, so the API server's Service
  stops routing to a saturated replica.
- `MemoryBudget`: bytes of request bodies buffered and of reviews being parsed, estimated before parsing
  (`webhook.body.parsed_size_estimate`); a review that would not fit is refused (413 when it could never
  fit, 429 while others hold the budget).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_MAX_INFLIGHT = 256
"""~10x what one API server replica sends in practice (its admission concurrency per webhook is far
lower), so only a flood is shed."""
DEFAULT_BODY_TIMEOUT_SECONDS = 10.0
"""The API server's own default webhook timeout: a body slower than that is never going to be useful."""
DEFAULT_ADMISSION_MEMORY_MIB = 64
"""Bodies and parsed reviews in flight. The largest object the API server stores (1.5 MiB in etcd, ~3 MiB
as JSON) is estimated at 47 MiB parsed (docs/reliability.md, "Memory per request"); with the
webhook's own ~130 MB at 15,000 nodes this stays under the chart's 256 MiB limit."""
READINESS_HOLD_SECONDS = 5.0
"""`/readyz` stays unready this long after the last shed admission: one readiness period of the chart's
probe, so that shedding sustained over two probes takes the replica out of the Service, a burst does not."""


@dataclass(frozen=True)
class AdmissionLimits:
    max_inflight: int = DEFAULT_MAX_INFLIGHT
    body_timeout: float = DEFAULT_BODY_TIMEOUT_SECONDS
    memory_bytes: int = DEFAULT_ADMISSION_MEMORY_MIB * 1024 * 1024
    retry_after_seconds: int = 1


class Shedding:
    """When admissions were last refused for lack of capacity: `/readyz` reads it."""

    def __init__(
        self, hold_seconds: float = READINESS_HOLD_SECONDS, clock: Callable[[], float] = time.monotonic
    ):
        self._hold = hold_seconds
        self._clock = clock
        self._last: float | None = None

    def refused(self) -> None:
        self._last = self._clock()

    def recently(self) -> bool:
        return self._last is not None and self._clock() - self._last < self._hold


class InflightGate:
    """Counts admissions being decided, on the event loop (single-threaded: no lock needed)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.inflight = 0

    def try_enter(self) -> bool:
        if self.inflight >= self.limit:
            return False
        self.inflight += 1
        return True

    def leave(self) -> None:
        self.inflight -= 1

    @property
    def full(self) -> bool:
        return self.inflight >= self.limit


class MemoryBudget:
    """Bytes reserved by requests in flight, on the event loop. A reservation that would exceed the budget
    is refused; every reservation is released by its holder (`Reservation`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.reserved = 0

    def try_reserve(self, size: int) -> bool:
        if self.reserved + size > self.limit:
            return False
        self.reserved += size
        return True

    def release(self, size: int) -> None:
        self.reserved -= size


class Reservation:
    """What one request holds of a `MemoryBudget`; grows as its body arrives, released once."""

    def __init__(self, budget: MemoryBudget) -> None:
        self._budget = budget
        self.size = 0

    def grow_to(self, size: int) -> bool:
        """Holds `size` bytes in all (never less than now); False, holding what it held, if the budget has
        no room."""
        extra = size - self.size
        if extra <= 0:
            return True
        if not self._budget.try_reserve(extra):
            return False
        self.size = size
        return True

    def release(self) -> None:
        self._budget.release(self.size)
        self.size = 0
