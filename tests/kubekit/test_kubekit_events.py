"""The Events of `kubekit.events.EventRecorder`, as the resizer runs it (its `Outcome`s and metrics), on the
fake API server: what each occurrence writes (client-go's events.k8s.io series), how many requests a repeated
Event costs, and that recording never waits for, nor fails with, the API server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kubekit.client import Kube
from kubekit.events import (
    FINISH_SECONDS,
    MAX_TRIES,
    REFRESH_SECONDS,
    RETRY_SECONDS,
    EventRecorder,
    EventType,
    ObjectRef,
)
from kubekit.objects import Obj
from resizer.metrics import Metrics
from resizer.recorder import REPORTING_CONTROLLER, Action, Outcome, Reason, job_reference_by_key
from tests.resizer.resizer_fakes import FakeClock
from tests.resizer.resizer_world import T0
from tests.support.fake_api import DROP, FakeKubeApi
from tests.support.metrics import RESIZER_PREFIX, sample
from tests.support.waiting import eventually

INSTANCE = f"{REPORTING_CONTROLLER}-resizer-7d9f"
JOB = job_reference_by_key("team/train-0", "job-uid")


def released(note: str = "released 1 gated followers into their leader's domain pool-2") -> Outcome:
    return Outcome(JOB, Reason.FOLLOWERS_RELEASED, Action.RELEASE_GATE, note)


def repaired(pod: str) -> Outcome:
    return Outcome(
        JOB,
        Reason.FOLLOWER_REPAIRED,
        Action.DELETE_POD,
        f"deleted follower {pod}",
        type=EventType.WARNING,
        related=ObjectRef("v1", "Pod", "team", pod, f"{pod}-uid"),
    )


class Recorded:
    """An `EventRecorder` on the fake API server, worked by the test (`flush`) at the test's clock."""

    def __init__(self, api: FakeKubeApi, kube: Kube, max_queued: int = 1000) -> None:
        self.api = api
        self.kube = kube
        self.metrics = Metrics()
        self.clock = FakeClock(T0)
        self.recorder = EventRecorder(
            self.kube,
            self.metrics,
            reporting_controller=REPORTING_CONTROLLER,
            reporting_instance=INSTANCE,
            clock=self.clock,
            max_queued=max_queued,
            jitter=lambda: 0.0,
        )

    def record(self, outcome: Outcome, times: int = 1) -> None:
        for _ in range(times):
            self.recorder.record(outcome)
            self.clock.advance(1)

    def after(self, seconds: float) -> None:
        """`seconds` later, with whatever became due written."""
        self.clock.advance(seconds)
        self.recorder.flush()

    def requests(self) -> list[tuple[str, str]]:
        """The Event writes: (verb, `events` for a create or `events/<name>`)."""
        return [(call.verb, call.what) for call in self.api.calls_of(resource="events")]

    def events(self) -> list[Obj]:
        """The stored Events, in the order they were created."""
        return self.api.objects("events")

    def metric(self, name: str, **labels: str) -> float:
        return sample(self.metrics.registry, f"{RESIZER_PREFIX}_{name}_total", **labels)


MakeRecorded = Callable[..., Recorded]


@pytest.fixture
def recorded(fake_api: FakeKubeApi, kube: Kube) -> MakeRecorded:
    """`Recorded(**options)` on the test's fake API server."""
    return lambda **options: Recorded(fake_api, kube, **options)


def test_an_outcome_is_created_as_an_events_k8s_io_event_about_its_object(recorded: MakeRecorded) -> None:
    events = recorded()
    events.record(repaired("train-0-3-abcde"))
    events.recorder.flush()
    (event,) = events.events()
    assert event["metadata"]["namespace"] == "team"
    assert event["metadata"]["name"].startswith("train-0.")
    assert {key: event[key] for key in event if key not in {"metadata", "eventTime"}} == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "reportingController": "exclusive-placement.io/resizer",
        "reportingInstance": INSTANCE,
        "action": "DeletePod",
        "reason": "FollowerRepaired",
        "type": "Warning",
        "note": "deleted follower train-0-3-abcde",
        "regarding": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "namespace": "team",
            "name": "train-0",
            "uid": "job-uid",
        },
        "related": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": "team",
            "name": "train-0-3-abcde",
            "uid": "train-0-3-abcde-uid",
        },
    }
    assert event["eventTime"] == "2026-05-01T10:00:00.000000Z"
    assert events.metric("event_writes", verb="create") == 1


def test_repeats_form_a_series_a_create_and_a_patch_however_many_they_are(recorded: MakeRecorded) -> None:
    events = recorded()
    events.record(released("released 1 gated followers"))
    events.record(released("released 2 gated followers"), times=99)
    events.recorder.flush()
    assert events.requests() == [
        ("create", "events"),
        ("patch", f"events/{events.events()[0]['metadata']['name']}"),
    ]
    (event,) = events.events()
    assert event["note"] == "released 1 gated followers"  # the series keeps its first note, as client-go's
    assert event["series"] == {"count": 2, "lastObservedTime": "2026-05-01T10:00:01.000000Z"}


def test_a_series_unobserved_for_six_minutes_gets_its_final_count_then_starts_anew(
    recorded: MakeRecorded,
) -> None:
    events = recorded()
    events.record(released(), times=5)
    events.recorder.flush()
    name = events.events()[0]["metadata"]["name"]
    events.after(FINISH_SECONDS - 5)  # the finish pass runs, but the last one was seen 1 s short of 6 min
    assert events.events()[0]["series"]["count"] == 2
    events.after(FINISH_SECONDS)
    assert events.events()[0]["series"] == {
        "count": 5,
        "lastObservedTime": "2026-05-01T10:00:04.000000Z",
    }
    assert len(events.recorder.series) == 0
    events.record(released())
    events.recorder.flush()
    assert [event["metadata"]["name"] == name for event in events.events()] == [True, False]
    assert len(events.requests()) == 4  # create, patch, final patch; then the new series' create


def test_a_single_event_leaves_the_cache_after_six_minutes_without_a_request(recorded: MakeRecorded) -> None:
    events = recorded()
    events.record(released())
    events.after(FINISH_SECONDS)
    events.after(FINISH_SECONDS)
    assert events.requests() == [("create", "events")]
    assert len(events.recorder.series) == 0


def test_a_running_series_is_written_again_every_thirty_minutes(recorded: MakeRecorded) -> None:
    events = recorded()
    minute = 60.0
    events.record(released())
    for _ in range(int(REFRESH_SECONDS / minute) + 1):  # one occurrence a minute: the series never finishes
        events.record(released())
        events.after(minute - 1)
    patches = [event for verb, event in events.requests() if verb == "patch"]
    assert len(patches) == 2  # the series' start, then the refresh at 30 min
    assert events.events()[0]["series"]["count"] == 31


def test_outcomes_differing_in_reason_or_related_object_are_separate_events(recorded: MakeRecorded) -> None:
    events = recorded()
    events.record(repaired("train-0-3-a"))
    events.record(repaired("train-0-4-b"))
    events.record(released())
    events.recorder.flush()
    assert [(event["reason"], event.get("related", {}).get("name")) for event in events.events()] == [
        ("FollowerRepaired", "train-0-3-a"),
        ("FollowerRepaired", "train-0-4-b"),
        ("FollowersReleased", None),
    ]


def test_a_series_whose_event_is_gone_is_created_with_its_count(recorded: MakeRecorded) -> None:
    events = recorded()
    events.record(released())
    events.recorder.flush()
    (event,) = events.events()
    events.api.delete("events", event)
    events.record(released())
    events.recorder.flush()
    (recreated,) = events.events()
    assert recreated["series"]["count"] == 2
    assert events.requests()[-2:] == [("patch", f"events/{event['metadata']['name']}"), ("create", "events")]


def test_record_never_waits_a_full_queue_drops_the_event_and_counts_it(recorded: MakeRecorded) -> None:
    events = recorded(max_queued=2)
    events.record(repaired("a"))
    events.record(repaired("b"))
    events.record(repaired("c"))  # nothing writes meanwhile: the queue is full
    assert events.metric("events_dropped", reason="queue-full") == 1
    events.recorder.flush()
    assert [event["related"]["name"] for event in events.events()] == ["a", "b"]


def test_an_event_the_api_server_refuses_is_dropped_not_retried(recorded: MakeRecorded) -> None:
    events = recorded()
    events.api.fail_next(403)
    events.record(released())  # a reconcile calling this is never told
    events.recorder.flush()
    events.after(RETRY_SECONDS * 2)
    assert events.requests() == [("create", "events")]
    assert events.metric("events_dropped", reason="rejected") == 1


def test_a_transport_failure_is_retried_ten_seconds_later_without_holding_up_other_events(
    recorded: MakeRecorded,
) -> None:
    events = recorded()
    events.api.fail_next(DROP)
    events.record(repaired("a"))
    events.record(repaired("b"))
    events.recorder.flush()
    assert [event["related"]["name"] for event in events.events()] == ["b"]
    events.after(RETRY_SECONDS - 0.5)
    assert len(events.events()) == 1
    events.after(0.5)
    assert [event["related"]["name"] for event in events.events()] == ["b", "a"]


def test_a_transport_failure_is_given_up_after_twelve_tries(recorded: MakeRecorded) -> None:
    events = recorded()
    events.api.fail_next(DROP, times=MAX_TRIES + 1)
    events.record(released())
    events.recorder.flush()
    for _ in range(MAX_TRIES + 1):
        events.after(RETRY_SECONDS)
    assert events.requests() == [("create", "events")] * MAX_TRIES
    assert events.metric("events_dropped", reason="retries-exhausted") == 1


def test_the_writer_thread_writes_what_is_recorded(fake_api: FakeKubeApi, kube: Kube) -> None:
    recorder = EventRecorder(
        kube, Metrics(), reporting_controller=REPORTING_CONTROLLER, reporting_instance=INSTANCE
    )
    recorder.start()
    try:
        recorder.record(released())
        eventually(lambda: fake_api.objects("events"), "the Event written by the writer thread", 10)
    finally:
        recorder.stop(timeout=5)
    assert not recorder.alive()


@pytest.mark.parametrize("length", [1024, 5000])
def test_a_long_note_is_cut_to_what_the_api_server_accepts(recorded: MakeRecorded, length: int) -> None:
    events = recorded()
    events.record(released("x" * length))
    events.recorder.flush()
    assert len(events.events()[0]["note"]) == 1024
