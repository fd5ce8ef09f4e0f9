"""The events.k8s.io/v1 recorder with EventSeries (client-go tools/events): what kube-scheduler uses.

Unlike the legacy recorder there is no aggregation or spam filter; instead, isomorphic events — same type,
action, reason, reporting controller and instance, `regarding` and `related` references (resourceVersion
included, the note NOT) — form a series (event_broadcaster.go recordToSink):

- the first occurrence is created;
- the second turns it into a series: one PATCH `{"series": {"count": 2, "lastObservedTime": ...}}`;
- later occurrences only raise the cached count, with no write;
- every 30 min (refreshExistingEventSeries) each series is PATCHed with its current count; every 6 min
  (finishSeries) a series last observed over 6 min ago gets a final PATCH and leaves the cache, and so
  does (without a write) a single event older than 6 min.

Writes go through a queue of 1000 (dropped when full) drained by 8 workers; a PATCH answered 404 falls back
to a create; a create of a series answered 409 is retried, as are transport errors (at most 12 tries,
10-12.5 s apart); other API errors drop the event.

The recorder runs in the API server's process and writes the stored (core/v1) form directly: the API
server's core/v1 view of what the events.k8s.io client sent (note -> message, regarding -> involvedObject,
reportingController -> reportingComponent, no source/count/first- or lastTimestamp; an HTTP client's
events.k8s.io requests are converted the same way, `kubesim.apiserver.conversion`). Requests count as
`create events` / `patch events` where upstream's are `events.k8s.io` ones.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
from dataclasses import dataclass
from typing import Any

from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.interface import KubeApi

from .events import (
    EVENT_KINDS,
    MAX_QUEUED_EVENTS,
    MAX_TRIES_PER_EVENT,
    EventKind,
    event_name,
    object_reference,
)
from .objects import Obj

log = logging.getLogger(__name__)

Event = dict[str, Any]
SeriesKey = tuple[Any, ...]

FINISH_SECONDS = 6 * 60.0
"""finishTime: a series unobserved this long is finished; finishSeries also runs this often."""
REFRESH_SECONDS = 30 * 60.0
"""refreshTime: every series is re-written this often (keeps it from expiring on the server)."""
RECORD_WORKERS = 8
RETRY_SLEEP_SECONDS = 10.0
RETRY_JITTER = 0.25
CONTROL_PLANE_HOSTNAME = "kubesim-control-plane"


def clone(event: Event) -> Event:
    """A copy safe to mutate where the recorder mutates: metadata and series (references stay shared)."""
    copied = {**event, "metadata": dict(event["metadata"])}
    if event.get("series"):
        copied["series"] = dict(event["series"])
    return copied


def _frozen(reference: dict[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((reference or {}).items()))


def series_key(event: Event) -> SeriesKey:
    """getKey: everything identifying the event except its note (message) and timestamps."""
    return (
        event.get("type"),
        event.get("action"),
        event.get("reason"),
        event.get("reportingComponent"),
        event.get("reportingInstance"),
        _frozen(event.get("involvedObject")),
        _frozen(event.get("related")),
    )


@dataclass
class _Entry:
    event: Event
    observed_at: float
    """Simulated time of the last observation (the eventTime for a single event)."""
    generation: int = 0
    """Bumped on every change: a write that raced with a new observation must not overwrite it."""


@dataclass(frozen=True)
class PendingWrite:
    key: SeriesKey
    generation: int
    event: Event | None
    """None: drop the entry without a write (a single event past finishTime)."""


class EventSeriesCache:
    """The broadcaster's eventCache as a pure state machine (no I/O, time passed in)."""

    def __init__(self) -> None:
        self._entries: dict[SeriesKey, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def observe(self, event: Event, now: float, observed_time: str) -> Event | None:
        """The event to write for this occurrence, or None when only the cached series count grows."""
        key = series_key(event)
        entry = self._entries.get(key)
        if entry is None:
            self._entries[key] = _Entry(clone(event), now)
            return clone(event)
        entry.generation += 1
        entry.observed_at = now
        series = entry.event.get("series")
        if series:
            series["count"] += 1
            series["lastObservedTime"] = observed_time
            return None
        entry.event["series"] = {"count": 2, "lastObservedTime": observed_time}
        return clone(entry.event)

    def finished(self, now: float) -> list[PendingWrite]:
        """Series unobserved for FINISH_SECONDS (final write) and single events that old (no write)."""
        horizon = now - FINISH_SECONDS
        return [
            PendingWrite(key, entry.generation, clone(entry.event) if entry.event.get("series") else None)
            for key, entry in self._entries.items()
            if entry.observed_at < horizon
        ]

    def series(self) -> list[PendingWrite]:
        return [
            PendingWrite(key, entry.generation, clone(entry.event))
            for key, entry in self._entries.items()
            if entry.event.get("series")
        ]

    def forget(self, write: PendingWrite) -> None:
        entry = self._entries.get(write.key)
        if entry is not None and entry.generation == write.generation:
            del self._entries[write.key]

    def replace(self, write: PendingWrite, stored: Event) -> None:
        entry = self._entries.get(write.key)
        if entry is not None and entry.generation == write.generation:
            entry.event = stored
            entry.generation += 1


class SeriesEventRecorder:
    """One component's events.k8s.io broadcaster (reportingController + reportingInstance)."""

    def __init__(
        self,
        api: KubeApi,
        reporting_controller: str,
        enabled: bool = True,
        *,
        clock: Clock | None = None,
        client: str | None = None,
        reporting_instance: str | None = None,
    ) -> None:
        self._api = api
        self._controller = reporting_controller
        self._instance = reporting_instance or f"{reporting_controller}-{CONTROL_PLANE_HOSTNAME}"
        self._enabled = enabled
        self._clock = clock or Clock()
        self._client = client or reporting_controller
        self.cache = EventSeriesCache()
        self._queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=MAX_QUEUED_EVENTS)
        self._rng = random.Random()
        self.dropped = 0

    def record(
        self,
        regarding: Obj,
        kind: EventKind,
        reason: str,
        note: str,
        *,
        action: str,
        related: Obj | None = None,
    ) -> None:
        if not self._enabled:
            return
        if kind not in EVENT_KINDS:
            log.error("unsupported event type %r (reason %s): not recorded", kind, reason)
            return
        event = self._make_event(regarding, kind, reason, note, action=action, related=related)
        to_write = self.cache.observe(event, self._clock.now(), Clock.wall_time_micro())
        if to_write is None:
            return
        try:
            self._queue.put_nowait(to_write)
        except asyncio.QueueFull:
            self.dropped += 1
            log.warning("%s: too many queued events, dropped %s event", self._controller, reason)

    def _make_event(
        self, regarding: Obj, kind: str, reason: str, note: str, *, action: str, related: Obj | None
    ) -> Event:
        reference = object_reference(regarding)
        event: Event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": event_name(str(reference.get("name") or "")),
                "namespace": reference.get("namespace") or "default",
            },
            "involvedObject": reference,
            "reason": reason,
            "message": note,
            "source": {},
            "firstTimestamp": None,
            "lastTimestamp": None,
            "type": kind,
            "eventTime": Clock.wall_time_micro(),
            "action": action,
            "reportingComponent": self._controller,
            "reportingInstance": self._instance,
        }
        if related is not None:
            event["related"] = object_reference(related)
        return event

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for _ in range(RECORD_WORKERS):
                group.create_task(self._worker())
            group.create_task(self._every(FINISH_SECONDS, self.finish_series))
            group.create_task(self._every(REFRESH_SECONDS, self.refresh_series))

    async def _every(self, period: float, action: Any) -> None:
        """wait.UntilWithContext: run now, then `period` after each run ends."""
        while True:
            await action()
            await self._clock.sleep(period)

    async def _worker(self) -> None:
        while True:
            event = await self._queue.get()
            await self._attempt_recording(event)

    async def _attempt_recording(self, event: Event) -> None:
        for tries in itertools.count(1):
            _, retry = await self._record_event(clone(event))
            if not retry:
                return
            if tries >= MAX_TRIES_PER_EVENT:
                log.error(
                    "%s: unable to write event %s (retry limit exceeded)", self._controller, event["reason"]
                )
                return
            await self._clock.sleep(RETRY_SLEEP_SECONDS * (1 + RETRY_JITTER * self._rng.random()))

    async def finish_series(self) -> None:
        for write in self.cache.finished(self._clock.now()):
            if write.event is not None:
                _, retry = await self._record_event(write.event)
                if retry:
                    continue
            self.cache.forget(write)

    async def refresh_series(self) -> None:
        for write in self.cache.series():
            if write.event is None:
                continue
            stored, retry = await self._record_event(write.event)
            if stored is not None and not retry:
                self.cache.replace(write, stored)

    async def _record_event(self, event: Event) -> tuple[Event | None, bool]:
        """(the stored event or None, whether to retry) — recordEvent."""
        meta = event["metadata"]
        series = event.get("series")
        try:
            stored: Event | None = None
            if series:
                stored = await self._patch_series(meta, series)
            if stored is None:
                meta.pop("resourceVersion", None)
                stored = await self._api.create(
                    "events", event, namespace=meta["namespace"], client=self._client
                )
        except ApiError as error:
            if error.status == 409 and series:
                return None, True  # the first create of this series is still in flight: retry the patch
            log.debug(
                "%s: server rejected event %s (not retried): %s", self._controller, event["reason"], error
            )
            return None, False
        except (OSError, TimeoutError) as error:
            log.info(
                "%s: unable to write event %s (will retry): %s", self._controller, event["reason"], error
            )
            return None, True
        return stored, False

    async def _patch_series(self, meta: dict[str, Any], series: dict[str, Any]) -> Event | None:
        try:
            return await self._api.patch(
                "events",
                meta["name"],
                {"series": series},
                patch_type="strategic",
                namespace=meta["namespace"],
                client=self._client,
            )
        except ApiError as error:
            if error.status == 404:
                return None
            raise
