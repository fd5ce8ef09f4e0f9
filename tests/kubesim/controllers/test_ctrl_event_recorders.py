"""The recorders' writes against the real in-process API server: client-go's recordToSink for core/v1
(tools/record/event.go) and the events.k8s.io series broadcaster (tools/events/event_broadcaster.go)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubesim.apiserver.server import ApiServer
from kubesim.clock import Clock
from kubesim.controllers.event_series import (
    FINISH_SECONDS,
    REFRESH_SECONDS,
    EventSeriesCache,
    SeriesEventRecorder,
)
from kubesim.controllers.events import MAX_QUEUED_EVENTS, MAX_TRIES_PER_EVENT, EventRecorder
from kubesim.errors import ApiError
from kubesim.stats import Stats
from tests.support.waiting import eventually_async

Obj = dict[str, Any]


class ScriptedApi(ApiServer):
    """The real API server, with scripted failures for the next event writes (None = let it through)."""

    def __init__(self) -> None:
        super().__init__(Stats(), seed=0)
        self.failures: list[BaseException | None] = []
        self.calls: list[str] = []

    def _maybe_fail(self, verb: str) -> None:
        self.calls.append(verb)
        if self.failures:
            failure = self.failures.pop(0)
            if failure is not None:
                raise failure

    async def create(self, resource: str, obj: Obj, **kwargs: Any) -> Obj:
        self._maybe_fail("create")
        return await super().create(resource, obj, **kwargs)

    async def patch(self, resource: str, name: str, patch: Any, **kwargs: Any) -> Obj:
        self._maybe_fail("patch")
        return await super().patch(resource, name, patch, **kwargs)


class ManualClock(Clock):
    """Simulated time that only moves when the test advances it; sleepers wake when it passes their end."""

    def __init__(self) -> None:
        super().__init__(1.0)
        self.seconds = 0.0
        self.sleepers = 0
        self._moved = asyncio.Condition()

    def now(self) -> float:
        return self.seconds

    async def sleep(self, seconds: float) -> None:
        deadline = self.seconds + max(0.0, seconds)
        self.sleepers += 1
        try:
            async with self._moved:
                await self._moved.wait_for(lambda: self.seconds >= deadline)
        finally:
            self.sleepers -= 1

    async def advance(self, seconds: float) -> None:
        async with self._moved:
            self.seconds += seconds
            self._moved.notify_all()


def job(name: str = "job-a") -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "7"},
    }


def pod(resource_version: str = "7") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "default",
            "uid": "uid-p",
            "resourceVersion": resource_version,
        },
    }


@contextlib.asynccontextmanager
async def running(*tasks: Any) -> AsyncIterator[None]:
    started = [asyncio.create_task(t) for t in tasks]
    try:
        yield
    finally:
        for task in started:
            task.cancel()
        for task in started:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def stored_events(server: ApiServer) -> list[Obj]:
    items, _ = await server.list("events", namespace="default")
    return items


@pytest.mark.parametrize(
    ("failures", "calls", "stored"),
    [
        ([ApiError(500, "InternalError", "etcd down")], 1, 0),  # a StatusError, 5xx included, is final
        ([ApiError(429, "TooManyRequests", "slow down")], 1, 0),
        ([OSError("connection refused"), TimeoutError(), None], 3, 1),  # transport errors are retried
        ([OSError("connection refused")] * MAX_TRIES_PER_EVENT, MAX_TRIES_PER_EVENT, 0),  # then given up
    ],
)
def test_record_to_sink_retries_transport_errors_only(
    run: Callable[[Any], Any], failures: list[BaseException | None], calls: int, stored: int
) -> None:
    async def scenario() -> None:
        api = server = ScriptedApi()
        api.failures = list(failures)
        recorder = EventRecorder(api, "job-controller", clock=Clock(1e-5))
        async with running(recorder.run()):
            recorder.record(job(), "Warning", "FailedCreate", "Error creating: denied")
            # one writer: the next event is written only once the first one is done with
            recorder.record(job("sentinel"), "Normal", "SuccessfulCreate", "Created pod: sentinel-0")
            await eventually_async(lambda: len(api.calls) == calls + 1, "the sentinel's create")
        assert api.calls == ["create"] * (calls + 1)
        assert len(await stored_events(server)) == stored + 1
        await server.aclose()

    run(scenario())


def test_a_count_patch_of_a_vanished_event_creates_it_again(run: Callable[[Any], Any]) -> None:
    async def scenario() -> None:
        api = server = ScriptedApi()
        recorder = EventRecorder(api, "job-controller", clock=Clock(1e-5))
        async with running(recorder.run()):
            recorder.record(job(), "Warning", "FailedCreate", "Error creating: denied")
            await eventually_async(lambda: api.calls == ["create"], "the first create")
            (first,) = await stored_events(server)
            await server.delete("events", first["metadata"]["name"], namespace="default")
            recorder.record(job(), "Warning", "FailedCreate", "Error creating: denied")
            await eventually_async(lambda: len(api.calls) == 3, "patch, then create")
        assert api.calls == ["create", "patch", "create"]
        (again,) = await stored_events(server)
        assert (again["metadata"]["name"], again["count"]) == (first["metadata"]["name"], 2)
        await server.aclose()

    run(scenario())


def test_events_recorded_while_1000_wait_are_dropped(run: Callable[[Any], Any]) -> None:
    async def scenario() -> None:
        server = ApiServer(Stats(), seed=0)
        recorder = EventRecorder(server, "job-controller", clock=Clock(1e-5))
        for n in range(MAX_QUEUED_EVENTS + 1):  # distinct objects: no aggregation, a spam bucket each
            recorder.record(job(f"job-{n}"), "Warning", "FailedCreate", "Error creating: denied")
        assert recorder.dropped == 1
        async with running(recorder.run()):
            await eventually_async(
                lambda: server.stats.by_verb_resource["create events"] == MAX_QUEUED_EVENTS, "writes"
            )
        assert len(await stored_events(server)) == MAX_QUEUED_EVENTS
        await server.aclose()

    run(scenario())


def test_legacy_events_carry_the_source_and_reporting_fields_of_record_make_event(
    run: Callable[[Any], Any],
) -> None:
    async def scenario() -> None:
        server = ApiServer(Stats(), seed=0)
        recorder = EventRecorder(server, "kubelet", host="node-1", clock=Clock(1e-5))
        async with running(recorder.run()):
            recorder.record(
                pod(), "Normal", "Started", "Container started", field_path="spec.containers{main}"
            )
            await eventually_async(lambda: server.stats.by_verb_resource["create events"] == 1, "the create")
        (event,) = await stored_events(server)
        assert event["metadata"]["name"].startswith("p.")
        assert event["source"] == {"component": "kubelet", "host": "node-1"}
        assert (event["reportingComponent"], event["reportingInstance"]) == ("kubelet", "node-1")
        assert event["involvedObject"] == {
            "kind": "Pod",
            "namespace": "default",
            "name": "p",
            "uid": "uid-p",
            "apiVersion": "v1",
            "resourceVersion": "7",
            "fieldPath": "spec.containers{main}",
        }
        assert (event["count"], event["eventTime"]) == (1, None)
        await server.aclose()

    run(scenario())


# --- events.k8s.io series -------------------------------------------------------------------------------


def series_event(note: str = "0/8 nodes are available", resource_version: str = "7") -> Obj:
    return {
        "metadata": {"name": f"p.{note}", "namespace": "default"},
        "involvedObject": pod(resource_version)["metadata"] | {"kind": "Pod", "apiVersion": "v1"},
        "reason": "FailedScheduling",
        "message": note,
        "type": "Warning",
        "action": "Scheduling",
        "reportingComponent": "default-scheduler",
        "reportingInstance": "default-scheduler-host",
    }


@pytest.mark.parametrize(
    ("occurrences", "writes"),
    [
        (1, [None]),
        (2, [None, 2]),
        (5, [None, 2, "-", "-", "-"]),  # from the third on only the cached count grows
    ],
)
def test_isomorphic_events_form_a_series_written_at_its_first_two_occurrences(
    occurrences: int, writes: list[Any]
) -> None:
    cache = EventSeriesCache()
    seen: list[Any] = []
    for _ in range(occurrences):
        written = cache.observe(series_event(), now=0.0, observed_time="t")
        seen.append("-" if written is None else (written.get("series") or {}).get("count"))
    assert seen == writes


@pytest.mark.parametrize(
    ("second", "same_series"),
    [
        (series_event(note="0/9 nodes are available"), True),  # the note is not part of the key
        (series_event(resource_version="8"), False),  # the regarding reference (its resourceVersion too) is
        ({**series_event(), "action": "Binding"}, False),
        ({**series_event(), "reportingInstance": "other"}, False),
    ],
)
def test_the_series_key_ignores_the_note_only(second: Obj, same_series: bool) -> None:
    cache = EventSeriesCache()
    cache.observe(series_event(), now=0.0, observed_time="t")
    written = cache.observe(second, now=0.0, observed_time="t")
    assert written is not None
    assert ("series" in written) is same_series


def test_finished_series_get_a_final_write_and_old_singletons_leave_without_one() -> None:
    cache = EventSeriesCache()
    for _ in range(4):
        cache.observe(series_event(), now=0.0, observed_time="t")
    cache.observe(series_event(resource_version="8"), now=100.0, observed_time="t")
    assert cache.finished(now=FINISH_SECONDS) == []
    (final,) = cache.finished(now=FINISH_SECONDS + 1)
    assert final.event is not None
    assert final.event["series"]["count"] == 4
    cache.forget(final)
    (singleton,) = cache.finished(now=FINISH_SECONDS + 101)
    assert singleton.event is None
    cache.forget(singleton)
    assert len(cache) == 0


def test_an_entry_observed_while_its_final_write_was_in_flight_stays() -> None:
    cache = EventSeriesCache()
    cache.observe(series_event(), now=0.0, observed_time="t")
    cache.observe(series_event(), now=0.0, observed_time="t")
    (final,) = cache.finished(now=FINISH_SECONDS + 1)
    cache.observe(series_event(), now=FINISH_SECONDS + 1, observed_time="t")
    cache.forget(final)
    assert len(cache) == 1


def test_series_recorder_writes_create_patch_then_the_final_count(run: Callable[[Any], Any]) -> None:
    async def scenario() -> None:
        server = ApiServer(Stats(), seed=0)
        clock = ManualClock()
        recorder = SeriesEventRecorder(server, "default-scheduler", clock=clock, client="scheduler")
        writes = server.stats.by_verb_resource
        async with running(recorder.run()):
            await eventually_async(lambda: clock.sleepers == 2, "finishSeries and refresh to have run once")
            for attempt in range(5):
                recorder.record(pod(), "Warning", "FailedScheduling", f"note {attempt}", action="Scheduling")
            await eventually_async(
                lambda: (writes["create events"], writes["patch events"]) == (1, 1), "create + patch"
            )
            (event,) = await stored_events(server)
            assert (event["message"], event["series"]["count"]) == ("note 0", 2)
            assert event["reportingComponent"] == "default-scheduler"
            assert event["reportingInstance"] == "default-scheduler-kubesim-control-plane"
            assert (event["action"], event["source"], event["firstTimestamp"]) == ("Scheduling", {}, None)
            await clock.advance(FINISH_SECONDS + 1)
            await eventually_async(
                lambda: writes["patch events"] == 2, "the final write of the finished series"
            )
            (event,) = await stored_events(server)
            assert event["series"]["count"] == 5
            assert len(recorder.cache) == 0
        await server.aclose()

    run(scenario())


def test_series_recorder_refreshes_a_running_series_every_30_minutes(run: Callable[[Any], Any]) -> None:
    async def scenario() -> None:
        server = ApiServer(Stats(), seed=0)
        clock = ManualClock()
        recorder = SeriesEventRecorder(server, "default-scheduler", clock=clock, client="scheduler")
        writes = server.stats.by_verb_resource
        async with running(recorder.run()):
            await eventually_async(lambda: clock.sleepers == 2, "finishSeries and refresh to have run once")
            observed = 0
            while clock.seconds < REFRESH_SECONDS:  # observed every 5 min: never finished
                recorder.record(pod(), "Warning", "FailedScheduling", "note", action="Scheduling")
                observed += 1
                await clock.advance(300)
            await eventually_async(lambda: writes["patch events"] == 2, "the 30-minute refresh")
            (event,) = await stored_events(server)
            assert event["series"]["count"] == observed
            assert writes["create events"] == 1
        await server.aclose()

    run(scenario())
