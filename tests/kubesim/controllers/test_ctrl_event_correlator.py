"""client-go's EventCorrelator (tools/record/events_cache.go) as kubesim reproduces it, on a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.controllers.event_correlator import (
    COMBINED_PREFIX,
    MAX_LRU_CACHE_ENTRIES,
    Correlation,
    EventCorrelator,
    LruCache,
    SpamFilter,
    aggregate_key,
    event_key,
    spam_key,
)

Event = dict[str, Any]


class FakeClock:
    def __init__(self) -> None:
        self.seconds = 1000.0

    def now(self) -> float:
        return self.seconds


def make_event(
    message: str = "Error creating: denied",
    *,
    reason: str = "FailedCreate",
    kind: str = "Warning",
    involved: str = "job-a",
    field_path: str = "",
) -> Event:
    reference = {"kind": "Job", "namespace": "default", "name": involved, "uid": f"uid-{involved}"}
    if field_path:
        reference["fieldPath"] = field_path
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{involved}.{id(reference):x}", "namespace": "default"},
        "involvedObject": {**reference, "apiVersion": "batch/v1"},
        "reason": reason,
        "message": message,
        "source": {"component": "job-controller"},
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "count": 1,
        "type": kind,
        "reportingComponent": "job-controller",
        "reportingInstance": "",
    }


class FakeSink:
    """The API side of recordEvent: creates, patches (merge of count/lastTimestamp/message), feedback."""

    def __init__(self, correlator: EventCorrelator) -> None:
        self.correlator = correlator
        self.stored: dict[str, Event] = {}
        self.writes: list[str] = []
        self._rv = 0

    def deliver(self, event: Event) -> Correlation:
        result = self.correlator.correlate(event)
        if result.skip:
            self.writes.append("skip")
            return result
        name = result.event["metadata"]["name"]
        self._rv += 1
        if result.patch is not None:
            stored = {**self.stored[name], **result.patch}
            self.writes.append("patch")
        else:
            stored = {**result.event}
            self.writes.append("create")
        stored["metadata"] = {**stored["metadata"], "resourceVersion": str(self._rv)}
        self.stored[name] = stored
        self.correlator.update_state(stored)
        return result


def sink() -> tuple[FakeSink, FakeClock]:
    clock = FakeClock()
    return FakeSink(EventCorrelator(clock.now, lambda: "2026-01-01T00:00:00Z")), clock


@pytest.mark.parametrize("repeats", [1, 2, 5, 25])
def test_identical_events_are_one_event_whose_count_is_patched(repeats: int) -> None:
    fake, _ = sink()
    for _ in range(repeats):
        fake.deliver(make_event())
    assert fake.writes == ["create"] + ["patch"] * (repeats - 1)
    (stored,) = fake.stored.values()
    assert stored["count"] == repeats


def test_a_count_patch_carries_count_last_timestamp_and_message_only() -> None:
    fake, _ = sink()
    first = fake.deliver(make_event())
    second = fake.deliver(make_event())
    assert first.patch is None
    assert second.patch == {
        "count": 2,
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "message": "Error creating: denied",
    }
    assert second.event["metadata"]["name"] == first.event["metadata"]["name"]
    assert second.event["metadata"]["resourceVersion"] == "1"


@pytest.mark.parametrize(
    ("similar", "creates", "patches", "combined_count"),
    [
        (9, 9, 0, None),  # below maxEvents: every message is its own event
        (10, 10, 0, 1),  # the 10th distinct message within 600 s is replaced by the combined event
        (11, 10, 1, 2),  # later ones patch the combined event's count
        (15, 10, 5, 6),
    ],
)
def test_similar_events_are_aggregated_from_the_tenth_distinct_message(
    similar: int, creates: int, patches: int, combined_count: int | None
) -> None:
    fake, _ = sink()
    for n in range(1, similar + 1):
        fake.deliver(make_event(f"Created pod: job-a-{n}", reason="SuccessfulCreate", kind="Normal"))
    assert (fake.writes.count("create"), fake.writes.count("patch")) == (creates, patches)
    combined = [e for e in fake.stored.values() if str(e["message"]).startswith(COMBINED_PREFIX)]
    if combined_count is None:
        assert combined == []
    else:
        (event,) = combined
        assert event["count"] == combined_count
        assert event["message"] == f"{COMBINED_PREFIX}Created pod: job-a-{similar}"
        assert (event["reportingComponent"], event["reportingInstance"]) == ("", "")


@pytest.mark.parametrize(("gap", "aggregated"), [(600.0, True), (601.0, False)])
def test_aggregation_forgets_a_group_unseen_for_more_than_600_seconds(gap: float, aggregated: bool) -> None:
    fake, clock = sink()
    for n in range(1, 11):
        clock.seconds += gap
        fake.deliver(make_event(f"Created pod: job-a-{n}", reason="SuccessfulCreate", kind="Normal"))
    combined = any(str(e["message"]).startswith(COMBINED_PREFIX) for e in fake.stored.values())
    assert combined is aggregated


@pytest.mark.parametrize(
    ("offsets", "accepted"),
    [
        ([0.0] * 26, [True] * 25 + [False]),
        ([0.0] * 25 + [299.0], [True] * 25 + [False]),
        ([0.0] * 25 + [300.0, 300.0], [True] * 25 + [True, False]),
        ([0.0] * 25 + [600.0, 600.0, 600.0], [True] * 25 + [True, True, False]),
        # an idle object refills to the burst of 25, never beyond
        ([0.0] * 25 + [300.0 * 100] * 26, [True] * 25 + [True] * 25 + [False]),
    ],
)
def test_spam_filter_allows_a_burst_of_25_then_one_event_per_300_seconds(
    offsets: list[float], accepted: list[bool]
) -> None:
    clock = FakeClock()
    start = clock.seconds
    spam = SpamFilter(clock.now)
    results: list[bool] = []
    for offset in offsets:
        clock.seconds = start + offset
        results.append(not spam.filter(make_event(f"message {len(results)}")))
    assert results == accepted


def test_spam_buckets_are_per_source_object_and_type() -> None:
    clock = FakeClock()
    spam = SpamFilter(clock.now)
    for _ in range(25):
        assert not spam.filter(make_event())
    assert spam.filter(make_event(reason="AnotherReason"))  # the reason does not get a bucket of its own
    assert not spam.filter(make_event(kind="Normal"))
    assert not spam.filter(make_event(involved="job-b"))


def test_dropped_repeats_still_count_in_the_next_patch() -> None:
    fake, clock = sink()
    for _ in range(30):
        fake.deliver(make_event())
    assert fake.writes == ["create"] + ["patch"] * 24 + ["skip"] * 5
    clock.seconds += 300
    fake.deliver(make_event())
    assert fake.writes[-1] == "patch"
    (stored,) = fake.stored.values()
    assert stored["count"] == 31


@pytest.mark.parametrize(
    ("change", "in_event_key", "in_spam_key", "in_aggregate_group"),
    [
        ({"message": "other"}, True, False, False),
        ({"reason": "Other"}, True, False, True),
        ({"type": "Normal"}, True, True, True),
        ({"source": {"component": "job-controller", "host": "node-1"}}, True, True, True),
        ({"reportingInstance": "x"}, False, False, True),
        (
            {"involvedObject": {**make_event()["involvedObject"], "fieldPath": "spec.containers{a}"}},
            True,
            False,
            False,
        ),
        (
            {"involvedObject": {**make_event()["involvedObject"], "resourceVersion": "99"}},
            False,
            False,
            False,
        ),
    ],
)
def test_keys_read_the_fields_client_go_reads(
    change: dict[str, Any], in_event_key: bool, in_spam_key: bool, in_aggregate_group: bool
) -> None:
    base, changed = make_event(), {**make_event(), **change}
    assert (event_key(base) != event_key(changed)) is in_event_key
    assert (spam_key(base) != spam_key(changed)) is in_spam_key
    assert (aggregate_key(base)[0] != aggregate_key(changed)[0]) is in_aggregate_group


def test_lru_cache_evicts_the_least_recently_used_entry() -> None:
    cache: LruCache[int, str] = LruCache(3)
    for key in (1, 2, 3):
        cache.add(key, str(key))
    assert cache.get(1) == "1"  # refreshes 1
    cache.add(4, "4")
    assert (cache.get(1), cache.get(2), cache.get(3), cache.get(4)) == ("1", None, "3", "4")
    assert len(cache) == 3


def test_an_event_evicted_from_the_logger_cache_is_created_again() -> None:
    fake, clock = sink()
    fake.deliver(make_event(involved="first"))
    for n in range(MAX_LRU_CACHE_ENTRIES):
        clock.seconds += 1000.0  # keep the spam filter and the aggregator out of the way
        fake.deliver(make_event(involved=f"other-{n}"))
    fake.deliver(make_event(involved="first"))
    assert fake.writes.count("patch") == 0
