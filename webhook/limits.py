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


# --- what one review may ask the webhook to parse -----------------------------------------------------------

MAX_REVIEW_CONTAINERS = 50_000
"""JSON objects and arrays in one review body, counted on the raw bytes before it is decoded (`{` and `[`,
inside strings too, so the count errs high). A pod review counts a few hundred (its managedFields about
double the spec's), a pod with 2,000 env vars about 12,000; decoding 50,000 empty objects takes about 30 ms
here. Issue 30's flood sent 100,000 `nodeSelectorTerms` per pod: each took 0.5 s to admit, twice per pod."""
MAX_SCHEDULING_TERMS = 100
"""Terms in one list of a pod spec's scheduling constraints: nodeSelectorTerms, the required and preferred
(anti-)affinity terms, topologySpreadConstraints, scheduling gates. Real pods carry a handful (a JobSet
leader: one affinity and one anti-affinity term)."""
MAX_SELECTOR_EXPRESSIONS = 100
"""matchExpressions or matchFields of one selector, matchLabels entries, nodeSelector entries."""
MAX_LIST_ITEMS = 1_000
"""Any other list there: the values of one expression, the namespaces of a term, label keys."""
MAX_STRING_BYTES = 4_096
"""A string there: a label key is at most 317 bytes (a 253-byte prefix, '/', 63), a label value 63."""
MAX_SCHEDULING_NODES = 10_000
"""Values in a pod spec's scheduling constraints altogether (every object, list and scalar)."""
SCHEDULING_FIELDS = ("affinity", "topologySpreadConstraints", "nodeSelector", "schedulingGates")
"""What the webhook reads and rewrites in a pod spec: bounded. Containers, volumes and the rest are copied
as they are, and bounded by `MAX_REVIEW_CONTAINERS` and the memory budget."""
_TERM_LISTS = frozenset(
    {
        "nodeSelectorTerms",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "preferredDuringSchedulingIgnoredDuringExecution",
        "topologySpreadConstraints",
        "schedulingGates",
    }
)
_SELECTOR_FIELDS = frozenset({"matchExpressions", "matchFields", "matchLabels", "nodeSelector"})


class OverLimit(ValueError):
    """A review asks for far more work than any real object (its message names the field and the limit)."""


def _limit_of(field: str) -> int:
    if field in _TERM_LISTS:
        return MAX_SCHEDULING_TERMS
    if field in _SELECTOR_FIELDS:
        return MAX_SELECTOR_EXPRESSIONS
    return MAX_LIST_ITEMS


def check_pod_spec(spec: object, where: str) -> None:
    """Raise `OverLimit` when the scheduling constraints of a pod spec (at `where`, for the message) are
    beyond the limits above. Iterative and stopped at `MAX_SCHEDULING_NODES`: its cost is bounded whatever
    the spec holds."""
    if not isinstance(spec, dict):
        return
    stack: list[tuple[str, str, object]] = [
        (field, f"{where}.{field}", spec[field]) for field in SCHEDULING_FIELDS if field in spec
    ]
    visited = 0
    while stack:
        field, path, node = stack.pop()
        visited += 1
        if visited > MAX_SCHEDULING_NODES:
            raise OverLimit(
                f"{where} has more than {MAX_SCHEDULING_NODES} values in its scheduling constraints"
            )
        if isinstance(node, str):
            if len(node) > MAX_STRING_BYTES:  # characters: at least as many bytes
                raise OverLimit(f"{path} is a string of {len(node)} characters, more than {MAX_STRING_BYTES}")
        elif isinstance(node, list | dict):
            limit = _limit_of(field)
            if len(node) > limit:
                raise OverLimit(f"{path} has {len(node)} entries, more than the {limit} allowed")
            if isinstance(node, list):
                stack.extend((field, f"{path}[{i}]", item) for i, item in enumerate(node))
            else:
                for key, value in node.items():
                    if len(key) > MAX_STRING_BYTES:
                        raise OverLimit(
                            f"{path} has a key of {len(key)} characters, more than {MAX_STRING_BYTES}"
                        )
                    stack.append((key if isinstance(value, list | dict) else field, f"{path}.{key}", value))
