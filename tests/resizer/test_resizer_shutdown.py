"""Shutdown stays bounded however the stop request lines up with the informer's API calls."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from kubekit.election import ElectionConfig, LeaderElector, LeaseRecord
from kubekit.informer import Informer
from resizer.caches import new_caches
from resizer.manager import Resizer
from resizer.metrics import Metrics
from tests.resizer.resizer_fakes import FakeClock, FakeKube

Obj = dict[str, Any]

NEVER = 60.0
"""How long a fake blocking call waits when nothing wakes it: far past any deadline the tests use."""


class BlockingStream:
    """A watch stream with no events that blocks its reader until `interrupt()` (as a real socket does)."""

    def __init__(self) -> None:
        self.interrupted = threading.Event()

    def __iter__(self) -> Iterator[Obj]:
        self.interrupted.wait(NEVER)
        return iter(())

    def interrupt(self) -> None:
        self.interrupted.set()

    def close(self) -> None:
        return None


class SlowToOpenWatchKube:
    """Lists nothing; each watch request is still being opened when the test calls `stop()`."""

    def __init__(self) -> None:
        self.opening = threading.Event()
        self.may_open = threading.Event()

    def list_objects(self, resource: str, **_selectors: Any) -> tuple[list[Obj], str]:
        return [], "1"

    def watch(self, resource: str, **_selectors: Any) -> BlockingStream:
        self.opening.set()
        self.may_open.wait(NEVER)
        return BlockingStream()


class Ignore:
    def on_upsert(self, old: Obj | None, new: Obj) -> None:
        return None

    def on_delete(self, old: Obj) -> None:
        return None

    def on_relist(self, objects: list[Obj]) -> None:
        return None


def test_informer_stopped_while_its_watch_is_opening_ends_without_waiting_for_the_stream() -> None:
    kube = SlowToOpenWatchKube()
    informer = Informer(
        kube,
        "pods",
        name="opening",
        namespace="default",
        label_selector="app=x",
        handler=Ignore(),
    )
    informer.start()
    assert kube.opening.wait(10), "the informer never opened a watch"

    informer.stop()  # no stream to interrupt yet: the request is still in flight
    kube.may_open.set()  # the response arrives after the stop
    informer.join(10)

    assert not informer.is_alive(), "informer kept reading a watch opened after stop()"


def returns_within(deadline: float, call: Callable[[], None]) -> bool:
    """Run `call` in a helper thread; False if it is still running after `deadline` seconds."""
    helper = threading.Thread(target=call, daemon=True)
    helper.start()
    helper.join(deadline)
    return not helper.is_alive()


class RenewalHangsOnceKube(FakeKube):
    """After `arm()`, the next Lease read hangs until `unblock` (a renewal stuck on a slow API server)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.hanging = threading.Event()
        self.unblock = threading.Event()

    def arm(self) -> None:
        self.armed = True

    def get_lease(self, namespace: str, name: str, timeout: float | None = None) -> Obj:
        if self.armed:
            self.armed = False
            self.hanging.set()
            self.unblock.wait(NEVER)
        return super().get_lease(namespace, name, timeout)


def test_elector_stop_is_bounded_while_a_renewal_hangs_and_still_releases_the_lease() -> None:
    kube = RenewalHangsOnceKube()
    elector = LeaderElector(
        kube,  # type: ignore[arg-type]
        ElectionConfig("kube-system", "resizer", "me", lease_duration=15, renew_deadline=10, retry_period=2),
        on_started_leading=lambda: None,
        on_stopped_leading=lambda: None,
        clock=FakeClock(),
        wall_clock=lambda: datetime(2026, 11, 29, tzinfo=UTC),
    )
    elector.step()
    assert elector.is_leader()
    kube.arm()
    elector.start()
    try:
        assert kube.hanging.wait(10), "the elector never tried to renew"
        kube.timeouts.clear()

        # The old budget was retry period + 10 s for the join alone.
        assert returns_within(6.0, lambda: elector.stop(release=True, timeout=0.5))

        lease = kube.stored("leases", "kube-system", "resizer")
        assert LeaseRecord.from_lease(lease).holder == ""
        assert kube.timeouts
        assert all(t is not None and t <= 1.0 for t in kube.timeouts)
    finally:
        kube.unblock.set()


class Stuck:
    """A leadership switch whose check blocks: every worker is stuck inside a reconcile."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)

    def is_leader(self) -> bool:
        self.entered.release()
        self.release.wait(NEVER)
        return False


def test_stop_workers_waits_its_timeout_in_total_not_per_worker() -> None:
    workers, stuck = 20, Stuck()
    resizer = Resizer(FakeKube(), new_caches(), Metrics(), stuck)  # type: ignore[arg-type]
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
