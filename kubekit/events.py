"""Events (events.k8s.io/v1) of what a controller did: the recorder the resizer runs with (its `Outcome`s,
reasons and actions are the resizer's, `resizer/recorder.py`; its metrics are passed in as `EventMetrics`).

client-go's `tools/events` broadcaster and recorder, with the same rules (`event_broadcaster.go`):

- Each `Occurrence` is an Event of the reporting controller and reporting instance the recorder is given
  (the resizer's: `exclusive-placement.io/resizer`, `exclusive-placement.io/resizer-<pod or host name>`),
  in the namespace of the object it is about.
- Isomorphic Events (same type, action, reason, reporting controller and instance, `regarding` and
  `related`; the note and the time aside) form a **series**: the first occurrence is created; the second
  PATCHes the Event with `series: {count: 2, lastObservedTime}`; later ones only count in memory. Every
  `FINISH_SECONDS` a series unobserved for that long gets one final PATCH with its count and leaves the
  cache (a single Event that old leaves without a write); every `REFRESH_SECONDS` each series is PATCHed
  with its current count. So a series costs a create, a PATCH and a final PATCH (plus one per 30 min it
  lasts), however often it repeats.
- `record` never blocks a reconcile and never fails it: it updates the series under a lock and queues the
  write, or drops it when `MAX_QUEUED` writes are waiting (`events_dropped_total{reason="queue-full"}`).
- One writer thread sends the writes in order. A PATCH of an Event that is gone (404) creates it again; a
  transport failure is retried, `RETRY_SECONDS` (+ up to 25 %) later, up to `MAX_TRIES` tries, without
  holding up the other writes; an answer from the API server that refuses the write drops it
  (`events_dropped_total{reason="rejected"}`), except that a create of a series whose first create is still
  on its way (409) is retried.

`regarding` and `related` carry no resourceVersion (client-go's references do): a Job's changes with every
status write, which would start a new series for every repeat.
"""

from __future__ import annotations

import heapq
import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

from kubekit.client import KubeError
from kubekit.counters import LabelledCounter
from kubekit.objects import Obj

log = logging.getLogger(__name__)

MAX_QUEUED = 1000
"""client-go's maxQueuedEvents: writes waiting beyond this are dropped."""
MAX_TRIES = 12
RETRY_SECONDS = 10.0
RETRY_JITTER = 0.25
FINISH_SECONDS = 6 * 60.0
REFRESH_SECONDS = 30 * 60.0
NOTE_LIMIT = 1024
"""The API server refuses a longer note (events.k8s.io/v1 validation)."""
FIELD_LIMIT = 128
"""Longest reportingInstance, action and reason the API server accepts."""


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True)
class ObjectRef:
    """An ObjectReference: what an Event's `regarding` and `related` hold."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""


class Occurrence(Protocol):
    """One thing a controller did, as an Event tells it (the resizer's `resizer.recorder.Outcome`):
    `reason` and `action` are fixed words, `note` is for people."""

    @property
    def regarding(self) -> ObjectRef: ...

    @property
    def related(self) -> ObjectRef | None: ...

    @property
    def reason(self) -> str: ...

    @property
    def action(self) -> str: ...

    @property
    def note(self) -> str: ...

    @property
    def type(self) -> str: ...


class EventMetrics(Protocol):
    """What the writer counts: requests that succeeded, by verb (`event_writes`), and writes given up, by
    reason (`events_dropped`). The caller names them (the resizer's `resizer.metrics.Metrics`)."""

    @property
    def event_writes(self) -> LabelledCounter: ...

    @property
    def events_dropped(self) -> LabelledCounter: ...


class EventSink(Protocol):
    """The two writes Events need (`kubekit.client.Kube`)."""

    def create_event(self, namespace: str, event: Obj) -> Obj: ...

    def patch_event(self, namespace: str, name: str, strategic_merge_patch: Obj) -> Obj: ...


SeriesKey = tuple[str, str, str, ObjectRef, ObjectRef | None]
"""(type, action, reason, regarding, related): the reporting controller and instance are the recorder's."""


def micro_time(epoch: float) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds, UTC, `Z`."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def reference(ref: ObjectRef) -> Obj:
    """An ObjectReference as the API takes it."""
    obj = {"apiVersion": ref.api_version, "kind": ref.kind, "namespace": ref.namespace, "name": ref.name}
    if ref.uid:
        obj["uid"] = ref.uid
    return obj


@dataclass(frozen=True)
class Write:
    """One request to send: a create, or (`series` set) a PATCH of the series, or a create when the Event
    is gone. `generation` is the series' when the write was decided."""

    key: SeriesKey
    event: Obj
    series: Obj | None
    generation: int
    tries: int = 0

    @property
    def namespace(self) -> str:
        return str(self.event["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.event["metadata"]["name"])

    @property
    def reason(self) -> str:
        return str(self.event["reason"])

    def body(self) -> Obj:
        """What a create sends: the Event with its series, if any."""
        return {**self.event, "series": dict(self.series)} if self.series else dict(self.event)


@dataclass
class _Entry:
    event: Obj
    """The Event as first created (its note, name and eventTime stay those of the first occurrence)."""
    first_seen: float
    count: int = 1
    last_observed: float = 0.0
    generation: int = 0
    """Bumped by every observation: a final write decided before a new one must not end the series."""

    @property
    def series(self) -> Obj | None:
        if self.count < 2:
            return None
        return {"count": self.count, "lastObservedTime": micro_time(self.last_observed)}


@dataclass
class EventSeries:
    """The broadcaster's event cache: which write each occurrence costs (no I/O; time passed in)."""

    entries: dict[SeriesKey, _Entry] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.entries)

    def observe(self, key: SeriesKey, event: Obj, now: float) -> Write | None:
        """The write this occurrence needs: a create the first time, a PATCH that starts the series the
        second, nothing after (the series only counts)."""
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = _Entry(event, first_seen=now, last_observed=now)
            return Write(key, event, None, entry.generation)
        entry.count += 1
        entry.last_observed = now
        entry.generation += 1
        if entry.count > 2:
            return None
        return Write(key, entry.event, entry.series, entry.generation)

    def finished(self, now: float) -> list[Write]:
        """Series unobserved for FINISH_SECONDS (their final write), and single Events that old (a write
        of None series: leave the cache without a request)."""
        horizon = now - FINISH_SECONDS
        return [
            Write(key, entry.event, entry.series, entry.generation)
            for key, entry in self.entries.items()
            if entry.last_observed < horizon
        ]

    def running(self) -> list[Write]:
        """Every series, as it stands (the periodic refresh)."""
        return [
            Write(key, entry.event, entry.series, entry.generation)
            for key, entry in self.entries.items()
            if entry.series is not None
        ]

    def forget(self, write: Write) -> None:
        """End the series `write` finished, unless it was observed again since."""
        entry = self.entries.get(write.key)
        if entry is not None and entry.generation == write.generation:
            del self.entries[write.key]


class EventRecorder:
    """Writes each `Occurrence` as an Event (see the module's docstring)."""

    def __init__(
        self,
        sink: EventSink,
        metrics: EventMetrics,
        *,
        reporting_controller: str,
        reporting_instance: str,
        clock: Callable[[], float] = time.time,
        max_queued: int = MAX_QUEUED,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._sink = sink
        self._metrics = metrics
        self._controller = reporting_controller
        self._instance = reporting_instance[:FIELD_LIMIT]
        self._clock = clock
        self._jitter = jitter
        self._lock = threading.Lock()
        self.series = EventSeries()
        self._queue: queue.Queue[Write] = queue.Queue(maxsize=max_queued)
        self._retries: list[tuple[float, int, Write]] = []
        self._retry_order = 0
        self._next_finish = clock() + FINISH_SECONDS
        self._next_refresh = clock() + REFRESH_SECONDS
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the reconcilers' side ---------------------------------------------------------------------------

    def record(self, outcome: Occurrence) -> None:
        now = self._clock()
        event = self._event(outcome, now)
        key: SeriesKey = (str(outcome.type), str(outcome.action), str(outcome.reason), outcome.regarding,
                          outcome.related)  # fmt: skip
        with self._lock:
            write = self.series.observe(key, event, now)
        if write is None:
            return
        try:
            self._queue.put_nowait(write)
        except queue.Full:
            self._dropped(write, "queue-full")

    def _event(self, outcome: Occurrence, now: float) -> Obj:
        regarding = outcome.regarding
        event: Obj = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                "name": f"{regarding.name}.{time.time_ns():x}",
                "namespace": regarding.namespace or "default",
            },
            "eventTime": micro_time(now),
            "reportingController": self._controller,
            "reportingInstance": self._instance,
            "action": str(outcome.action),
            "reason": str(outcome.reason),
            "regarding": reference(regarding),
            "note": outcome.note[:NOTE_LIMIT],
            "type": str(outcome.type),
        }
        if outcome.related is not None:
            event["related"] = reference(outcome.related)
        return event

    # --- the writer --------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="event-writer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Write what is queued (no more retries) for at most `timeout` s, then stop."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while True:
            try:
                write = self._queue.get(timeout=self._idle_seconds())
            except queue.Empty:
                if self._stopping.is_set():
                    return
            else:
                self._attempt(write)
            if not self._stopping.is_set():
                self.run_due()

    def _idle_seconds(self) -> float:
        """How long the writer may wait for the next write: until a retry or the housekeeping is due."""
        if self._stopping.is_set():
            return 0.0
        due = min(self._next_finish, self._next_refresh, *(due for due, _, _ in self._retries[:1]))
        return max(0.0, min(1.0, due - self._clock()))

    def flush(self) -> None:
        """Send every queued write now, then what is due (the writer's loop, run by the caller: tests)."""
        while True:
            try:
                write = self._queue.get_nowait()
            except queue.Empty:
                break
            self._attempt(write)
        self.run_due()

    def run_due(self) -> None:
        """Retries whose time has come, then the finish and refresh passes when due."""
        now = self._clock()
        while self._retries and self._retries[0][0] <= now:
            _, _, write = heapq.heappop(self._retries)
            self._attempt(write)
        if now >= self._next_finish:
            self._next_finish = now + FINISH_SECONDS
            self._finish_series(now)
        if now >= self._next_refresh:
            self._next_refresh = now + REFRESH_SECONDS
            self._refresh_series()

    def _finish_series(self, now: float) -> None:
        with self._lock:
            finished = self.series.finished(now)
        for write in finished:
            if write.series is None or not self._send(write):
                with self._lock:
                    self.series.forget(write)

    def _refresh_series(self) -> None:
        with self._lock:
            running = self.series.running()
        for write in running:
            self._send(write)

    def _attempt(self, write: Write) -> None:
        if self._send(write) and not self._stopping.is_set():
            self._retry(write)

    def _retry(self, write: Write) -> None:
        tries = write.tries + 1
        if tries >= MAX_TRIES:
            log.error("unable to write event %s (tried %d times)", write.reason, tries, extra=_about(write))
            self._dropped(write, "retries-exhausted")
            return
        due = self._clock() + RETRY_SECONDS * (1 + RETRY_JITTER * self._jitter())
        self._retry_order += 1
        heapq.heappush(self._retries, (due, self._retry_order, replace(write, tries=tries)))

    def _send(self, write: Write) -> bool:
        """Write once; True when it should be tried again (client-go's `recordEvent`)."""
        try:
            if write.series is not None:
                try:
                    self._sink.patch_event(write.namespace, write.name, {"series": write.series})
                    self._metrics.event_writes.labels("patch").inc()
                    return False
                except KubeError as error:
                    if not error.not_found:
                        raise
            self._sink.create_event(write.namespace, write.body())
            self._metrics.event_writes.labels("create").inc()
            return False
        except KubeError as error:
            if error.status is None or (error.conflict and write.series is not None):
                log.info(
                    "unable to write event %s (will retry): %s", write.reason, error, extra=_about(write)
                )
                return True
            log.warning("event %s refused, not retried: %s", write.reason, error, extra=_about(write))
            self._dropped(write, "rejected")
            return False

    def _dropped(self, write: Write, reason: str) -> None:
        self._metrics.events_dropped.labels(reason).inc()
        if reason == "queue-full":
            log.warning(
                "too many events waiting to be written: dropped %s", write.reason, extra=_about(write)
            )


def _about(write: Write) -> dict[str, str]:
    regarding = write.event["regarding"]
    return {
        "event": write.name,
        "reason": write.reason,
        "regarding": f"{regarding['namespace']}/{regarding['name']}",
    }
