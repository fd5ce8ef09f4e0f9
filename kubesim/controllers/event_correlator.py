"""client-go's EventCorrelator (tools/record/events_cache.go): what a legacy core/v1 recorder really writes.

Every event a component records passes, in order, through

1. the EventAggregator: events that differ only by message (same source, involved object, type, reason,
   reporting controller and instance) are counted per 600 s window; from the 10th distinct message on, the
   event is replaced by one "(combined from similar events): <message>" event keyed by the group;
2. the EventLogger: an event whose key was seen before becomes a PATCH of the first occurrence
   (`count` + 1, `lastTimestamp`, `message`) instead of a new object;
3. the EventSourceObjectSpamFilter: a token bucket per source and involved object (and type) with a burst of
   25 and a refill of one token per 300 s; an event without a token is dropped (after step 2 counted it, so
   the next PATCH that goes out carries the dropped occurrences in its count).

All three caches are LRUs of 4096 entries. Pure: no I/O; time comes from the injected `now` (simulated
seconds), timestamps written into events from `wall_time`.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kubesim.clock import Clock

Event = dict[str, Any]
Key = TypeVar("Key")
Value = TypeVar("Value")

MAX_LRU_CACHE_ENTRIES = 4096
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL_SECONDS = 600.0
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0
COMBINED_PREFIX = "(combined from similar events): "


class LruCache(Generic[Key, Value]):
    """k8s.io/utils/lru: a get refreshes an entry; adding past `max_entries` evicts the least recent."""

    def __init__(self, max_entries: int) -> None:
        self._max_entries = max_entries
        self._items: OrderedDict[Key, Value] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Key) -> Value | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def add(self, key: Key, value: Value) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self._max_entries:
            self._items.popitem(last=False)


def _source(event: Event) -> tuple[str, str]:
    source = event.get("source") or {}
    return str(source.get("component") or ""), str(source.get("host") or "")


def _involved(event: Event, *fields: str) -> list[str]:
    involved = event.get("involvedObject") or {}
    return [str(involved.get(name) or "") for name in fields]


def event_key(event: Event) -> str:
    """getEventKey: source, involved object (with fieldPath), type, reason and message, concatenated."""
    return "".join(
        [
            *_source(event),
            *_involved(event, "kind", "namespace", "name", "fieldPath", "uid", "apiVersion"),
            str(event.get("type") or ""),
            str(event.get("reason") or ""),
            str(event.get("message") or ""),
        ]
    )


def spam_key(event: Event) -> str:
    """getSpamKey: source, involved object (without fieldPath) and type; reason and message do not count."""
    return "".join(
        [
            *_source(event),
            *_involved(event, "kind", "namespace", "name", "uid", "apiVersion"),
            str(event.get("type") or ""),
        ]
    )


def aggregate_key(event: Event) -> tuple[str, str]:
    """EventAggregatorByReasonFunc: (the group of similar events, the message that varies inside it)."""
    group = "".join(
        [
            *_source(event),
            *_involved(event, "kind", "namespace", "name", "uid", "apiVersion"),
            str(event.get("type") or ""),
            str(event.get("reason") or ""),
            str(event.get("reportingComponent") or ""),
            str(event.get("reportingInstance") or ""),
        ]
    )
    return group, str(event.get("message") or "")


class TokenBucket:
    """golang.org/x/time/rate.Limiter.Allow as flowcontrol's passive limiter uses it: starts full."""

    def __init__(self, qps: float, burst: int, now: float) -> None:
        self._qps = qps
        self._burst = float(burst)
        self._tokens = float(burst)
        self._last = now

    def try_accept(self, now: float) -> bool:
        tokens = min(self._burst, self._tokens + max(0.0, now - self._last) * self._qps)
        if tokens < 1.0:
            return False  # a refused request leaves the bucket untouched, as rate.Limiter does
        self._tokens = tokens - 1.0
        self._last = now
        return True


class SpamFilter:
    """EventSourceObjectSpamFilter: True means drop the event."""

    def __init__(self, now: Callable[[], float], *, burst: int = SPAM_BURST, qps: float = SPAM_QPS) -> None:
        self._now = now
        self._burst = burst
        self._qps = qps
        self._buckets: LruCache[str, TokenBucket] = LruCache(MAX_LRU_CACHE_ENTRIES)

    def filter(self, event: Event) -> bool:
        key = spam_key(event)
        now = self._now()
        bucket = self._buckets.get(key) or TokenBucket(self._qps, self._burst, now)
        accepted = bucket.try_accept(now)
        self._buckets.add(key, bucket)
        return not accepted


@dataclass
class _AggregateRecord:
    # a dict as an insertion-ordered set: Go's PopAny takes an arbitrary member, kubesim the oldest
    local_keys: dict[str, None] = field(default_factory=dict)
    last_seen: float | None = None


class Aggregator:
    """EventAggregator with EventAggregatorByReasonFunc / EventAggregatorByReasonMessageFunc."""

    def __init__(self, now: Callable[[], float], wall_time: Callable[[], str]) -> None:
        self._now = now
        self._wall_time = wall_time
        self._records: LruCache[str, _AggregateRecord] = LruCache(MAX_LRU_CACHE_ENTRIES)

    def aggregate(self, event: Event) -> tuple[Event, str]:
        """(the event to record, its cache key): the event itself, or the group's combined event."""
        now = self._now()
        group, local = aggregate_key(event)
        record = self._records.get(group) or _AggregateRecord()
        if record.last_seen is None or now - record.last_seen > AGGREGATE_INTERVAL_SECONDS:
            record = _AggregateRecord()
        record.local_keys[local] = None
        record.last_seen = now
        self._records.add(group, record)
        if len(record.local_keys) < AGGREGATE_MAX_EVENTS:
            return event, event_key(event)
        del record.local_keys[next(iter(record.local_keys))]
        stamp = self._wall_time()
        involved = event.get("involvedObject") or {}
        combined: Event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{involved.get('name')}.{time.time_ns():x}",
                "namespace": event["metadata"]["namespace"],
            },
            "involvedObject": dict(involved),
            "reason": event.get("reason"),
            "message": COMBINED_PREFIX + str(event.get("message") or ""),
            "source": dict(event.get("source") or {}),
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": event.get("type"),
            "eventTime": None,
            "reportingComponent": "",
            "reportingInstance": "",
        }
        return combined, group


@dataclass(frozen=True)
class _Observation:
    count: int
    first_timestamp: str | None
    name: str
    resource_version: str


def _observation(event: Event) -> _Observation:
    meta = event.get("metadata") or {}
    return _Observation(
        count=int(event.get("count") or 0),
        first_timestamp=event.get("firstTimestamp"),
        name=str(meta.get("name") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
    )


class EventLogger:
    """eventLogger: turns a repeat of a known key into a count PATCH of the first occurrence."""

    def __init__(self) -> None:
        self._seen: LruCache[str, _Observation] = LruCache(MAX_LRU_CACHE_ENTRIES)

    def observe(self, event: Event, key: str) -> tuple[Event, dict[str, Any] | None]:
        # only metadata and top-level fields change: the nested references are shared, never mutated
        observed = {**event, "metadata": dict(event["metadata"])}
        last = self._seen.get(key)
        patch: dict[str, Any] | None = None
        if last is not None and last.count > 0:
            meta = observed["metadata"]
            meta["name"] = last.name
            if last.resource_version:
                meta["resourceVersion"] = last.resource_version
            observed["firstTimestamp"] = last.first_timestamp
            observed["count"] = last.count + 1
            # CreateTwoWayMergePatch against a copy with count 0, lastTimestamp 1970 and no message
            patch = {"count": observed["count"], "lastTimestamp": observed.get("lastTimestamp")}
            if observed.get("message"):
                patch["message"] = observed["message"]
        self._seen.add(key, _observation(observed))
        return observed, patch

    def update_state(self, stored: Event) -> None:
        """Remember the server's copy (name, resourceVersion, count) under the stored event's own key."""
        self._seen.add(event_key(stored), _observation(stored))


@dataclass(frozen=True)
class Correlation:
    event: Event
    patch: dict[str, Any] | None
    skip: bool


class EventCorrelator:
    """NewEventCorrelator with client-go's defaults: aggregate, then count, then spam-filter."""

    def __init__(self, now: Callable[[], float], wall_time: Callable[[], str] = Clock.wall_time) -> None:
        self.aggregator = Aggregator(now, wall_time)
        self.logger = EventLogger()
        self.spam_filter = SpamFilter(now)

    def correlate(self, event: Event) -> Correlation:
        aggregated, key = self.aggregator.aggregate(event)
        observed, patch = self.logger.observe(aggregated, key)
        if self.spam_filter.filter(observed):
            return Correlation(observed, None, skip=True)
        return Correlation(observed, patch, skip=False)

    def update_state(self, stored: Event) -> None:
        self.logger.update_state(stored)
