"""Lease election: the pure rules (table-driven) and two electors racing on the fake API server with a fake
clock."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from kubekit.client import Kube
from kubekit.election import (
    ElectionConfig,
    LeaderElector,
    LeaseRecord,
    format_micro_time,
    may_take,
    next_record,
    parse_micro_time,
)
from tests.resizer.resizer_fakes import FakeClock
from tests.support.fake_api import DROP, FakeKubeApi

NOW = "2026-11-29T19:00:00.123456Z"


def test_micro_time_is_rfc3339_with_microseconds_in_utc() -> None:
    moment = datetime(2026, 11, 29, 19, 0, 0, 123456, tzinfo=UTC)
    assert format_micro_time(moment) == NOW
    assert parse_micro_time(NOW) == moment
    assert parse_micro_time(None) is None


@pytest.mark.parametrize(
    ("holder", "observed_at", "now", "allowed"),
    [
        ("", 0.0, 0.0, True),  # released
        ("me", 0.0, 0.0, True),  # renewing my own
        ("other", 0.0, 14.9, False),  # unchanged for less than the duration
        ("other", 0.0, 15.0, True),  # unchanged for the full duration
    ],
)
def test_may_take(holder: str, observed_at: float, now: float, allowed: bool) -> None:
    record = LeaseRecord(holder, 15, NOW, NOW, 3)
    assert may_take(record, "me", observed_at, now) is allowed


def test_next_record_keeps_acquire_time_on_renew_and_counts_transitions_on_takeover() -> None:
    mine = LeaseRecord("me", 15, "t0", "t0", 2)
    assert next_record(mine, "me", 15, "t1") == LeaseRecord("me", 15, "t0", "t1", 2)
    theirs = LeaseRecord("other", 15, "t0", "t0", 2)
    assert next_record(theirs, "me", 15, "t1") == LeaseRecord("me", 15, "t1", "t1", 3)
    assert next_record(None, "me", 15, "t1") == LeaseRecord("me", 15, "t1", "t1", 0)


def test_config_rejects_inconsistent_timings() -> None:
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        ElectionConfig("ns", "lease", "me", lease_duration=10, renew_deadline=10, retry_period=2)


FIFTEEN_SECONDS = ElectionConfig(
    "kube-system", "resizer", "", lease_duration=15, renew_deadline=10, retry_period=2
)


class Candidate:
    def __init__(
        self, kube: Kube, clock: FakeClock, identity: str, config: ElectionConfig = FIFTEEN_SECONDS
    ) -> None:
        self.events: list[str] = []
        self.elector = LeaderElector(
            kube,
            replace(config, identity=identity),
            on_started_leading=lambda: self.events.append("started"),
            on_stopped_leading=lambda: self.events.append("stopped"),
            clock=clock,
            wall_clock=lambda: datetime(2026, 11, 29, tzinfo=UTC),
        )


def test_one_leader_standby_takes_over_only_after_lease_duration_and_old_leader_stops_first(
    fake_api: FakeKubeApi, kube: Kube
) -> None:
    clock = FakeClock()
    a, b = Candidate(kube, clock, "a"), Candidate(kube, clock, "b")
    a.elector.step()
    b.elector.step()
    assert a.elector.is_leader()
    assert not b.elector.is_leader()
    lease = fake_api.stored("leases", "kube-system", "resizer")["spec"]
    assert lease["holderIdentity"] == "a"
    assert lease["leaseDurationSeconds"] == 15
    assert lease["renewTime"] == "2026-11-29T00:00:00.000000Z"

    # a's API access breaks: it can no longer renew.
    for second in range(1, 16):
        clock.advance(1)
        fake_api.fail_next(DROP)
        a.elector.step()
        b.elector.step()
        if second >= 10:
            assert not a.elector.is_leader(), "the old leader must stop acting at the renew deadline"
        if second < 15:
            assert not b.elector.is_leader(), "the standby must wait a full lease duration"
    assert b.elector.is_leader()
    assert a.events == ["started", "stopped"]
    assert b.events == ["started"]
    assert fake_api.stored("leases", "kube-system", "resizer")["spec"]["leaseTransitions"] == 1


def test_release_lets_the_standby_take_over_at_once(fake_api: FakeKubeApi, kube: Kube) -> None:
    clock = FakeClock()
    a, b = Candidate(kube, clock, "a"), Candidate(kube, clock, "b")
    a.elector.step()
    b.elector.step()
    a.elector.release()
    assert not a.elector.is_leader()
    assert fake_api.stored("leases", "kube-system", "resizer")["spec"]["holderIdentity"] == ""
    b.elector.step()
    assert b.elector.is_leader()
    assert a.events == ["started", "stopped"]


def test_concurrent_takeover_has_one_winner(fake_api: FakeKubeApi, kube: Kube) -> None:
    clock = FakeClock()
    a, b = Candidate(kube, clock, "a"), Candidate(kube, clock, "b")
    a.elector.step()
    a.elector.release()

    # a read the same released lease before b's write landed: its write carries a stale resourceVersion.
    late_write = fake_api.hold_next("update", "leases")
    a_steps = threading.Thread(target=a.elector.step)
    a_steps.start()
    assert late_write.arrived.wait(10), "a never wrote the lease"
    b.elector.step()  # b writes first
    assert b.elector.is_leader()
    late_write.release()
    a_steps.join(10)
    assert not a.elector.is_leader()
    assert fake_api.stored("leases", "kube-system", "resizer")["spec"]["holderIdentity"] == "b"
    assert [call.code for call in fake_api.calls_of("update", "leases")][-2:] == [200, 409]


def test_renewal_requests_time_out_before_the_renew_deadline(fake_api: FakeKubeApi, kube: Kube) -> None:
    """A renewal the API server never answers is given up on before the renew deadline (2 s here), so the
    next one can still come in time."""
    config = ElectionConfig("kube-system", "resizer", "", lease_duration=3, renew_deadline=2, retry_period=1)
    a = Candidate(kube, FakeClock(), "a", config)
    a.elector.step()
    hung = fake_api.hold_next("get", "leases")
    renewing = threading.Thread(target=a.elector.step, daemon=True)
    try:
        renewing.start()
        assert hung.arrived.wait(10), "a never renewed"
        renewing.join(config.renew_deadline)
        assert not renewing.is_alive(), "the renewal outlived the renew deadline"
    finally:
        hung.release()
