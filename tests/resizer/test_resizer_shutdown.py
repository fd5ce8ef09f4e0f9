"""Shutdown stays bounded however the stop request lines up with the informer's API calls."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubekit.client import Kube
from kubekit.election import ElectionConfig, LeaderElector, LeaseRecord
from kubekit.informer import Informer
from resizer.caches import new_caches
from resizer.manager import Resizer
from resizer.metrics import Metrics
from tests.resizer.resizer_fakes import FakeClock
from tests.support.fake_api import FakeKubeApi

Obj = dict[str, Any]


NEVER = 60.0
"""How long a fake blocking call waits when nothing wakes it: far past any deadline the tests use."""


class Ignore:
    def on_upsert(self, old: Obj | None, new: Obj) -> None:
        return None

    def on_delete(self, old: Obj) -> None:
        return None

    def on_relist(self, objects: list[Obj]) -> None:
        return None


def test_informer_stopped_while_its_watch_is_opening_ends_without_waiting_for_the_stream(
    fake_api: FakeKubeApi, kube: Kube
) -> None:
    opening = fake_api.hold_next("watch", "pods")
    informer = Informer(
        kube,
        "pods",
        name="opening",
        namespace="default",
        label_selector="app=x",
        handler=Ignore(),
    )
    informer.start()
    assert opening.arrived.wait(10), "the informer never opened a watch"

    informer.stop()  # no stream to interrupt yet: the request is still in flight
    opening.release()  # the response arrives after the stop; the watch would then stay open for minutes
    informer.join(10)

    assert not informer.is_alive(), "informer kept reading a watch opened after stop()"


def returns_within(deadline: float, call: Callable[[], None]) -> bool:
    """Run `call` in a helper thread; False if it is still running after `deadline` seconds."""
    helper = threading.Thread(target=call, daemon=True)
    helper.start()
    helper.join(deadline)
    return not helper.is_alive()


def leading_elector(kube: Kube) -> LeaderElector:
    """An elector holding the Lease (renew deadline 10 s: a renewal call may take up to 8 s)."""
    elector = LeaderElector(
        kube,
        ElectionConfig("kube-system", "resizer", "me", lease_duration=15, renew_deadline=10, retry_period=2),
        on_started_leading=lambda: None,
        on_stopped_leading=lambda: None,
        clock=FakeClock(),
        wall_clock=lambda: datetime(2026, 11, 29, tzinfo=UTC),
    )
    elector.step()
    assert elector.is_leader()
    return elector


def test_elector_stop_is_bounded_while_a_renewal_hangs_and_still_releases_the_lease(
    fake_api: FakeKubeApi, kube: Kube
) -> None:
    elector = leading_elector(kube)
    renewal = fake_api.hold_next("get", "leases")
    elector.start()
    try:
        assert renewal.arrived.wait(10), "the elector never tried to renew"

        # The old budget was retry period + 10 s for the join alone.
        assert returns_within(6.0, lambda: elector.stop(release=True, timeout=0.5))

        lease = fake_api.stored("leases", "kube-system", "resizer")
        assert LeaseRecord.from_lease(lease).holder == ""
    finally:
        renewal.release()


def test_elector_stop_gives_up_on_a_release_that_hangs_too(fake_api: FakeKubeApi, kube: Kube) -> None:
    """The release's own calls carry its short timeout (at least 1 s), not the renewal's 8 s: a release the
    API server never answers is abandoned, and stop returns well before a renewal call would have."""
    elector = leading_elector(kube)
    renewal = fake_api.hold_next("get", "leases")
    release = fake_api.hold_next("get", "leases")
    elector.start()
    try:
        assert renewal.arrived.wait(10), "the elector never tried to renew"
        assert returns_within(4.0, lambda: elector.stop(release=True, timeout=0.5))
        assert release.arrived.is_set()
        assert LeaseRecord.from_lease(fake_api.stored("leases", "kube-system", "resizer")).holder == "me"
    finally:
        renewal.release()
        release.release()


class Stuck:
    """A leadership switch whose check blocks: every worker is stuck inside a reconcile."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)

    def is_leader(self) -> bool:
        self.entered.release()
        self.release.wait(NEVER)
        return False


def test_stop_workers_waits_its_timeout_in_total_not_per_worker(kube: Kube) -> None:
    workers, stuck = 20, Stuck()
    resizer = Resizer(kube, new_caches(), Metrics(), stuck)
    resizer.start_workers(workers)
    for number in range(workers):
        resizer.resize.enqueue(f"default/job-{number}")
    try:
        for _ in range(workers):
            assert stuck.entered.acquire(timeout=10), "a worker never picked up its key"

        # Per worker, 20 stuck workers x 0.5 s would take 10 s.
        assert returns_within(6.0, lambda: resizer.stop_workers(timeout=0.5))
    finally:
        stuck.release.set()
