"""The work queue: de-duplication, one worker per key, re-queue after processing, per-key backoff."""

from __future__ import annotations

import threading

import pytest

from kubekit.workqueue import ShutDown, WorkQueue
from tests.resizer.resizer_fakes import FakeClock


def test_duplicate_adds_are_collapsed() -> None:
    queue = WorkQueue()
    for key in ["a", "b", "a", "a", "c", "b"]:
        queue.add(key)
    assert [queue.get(timeout=0) for _ in range(3)] == ["a", "b", "c"]
    assert queue.get(timeout=0.01) is None


def test_key_readded_while_processing_comes_back_only_after_done() -> None:
    queue = WorkQueue()
    queue.add("job")
    assert queue.get(timeout=0) == "job"
    queue.add("job")
    assert queue.get(timeout=0.01) is None  # never handed to a second worker concurrently
    queue.done("job")
    assert queue.get(timeout=0) == "job"
    queue.done("job")
    assert queue.get(timeout=0.01) is None


@pytest.mark.parametrize(
    ("base", "cap", "expected"),
    [(0.05, 30.0, [0.05, 0.1, 0.2, 0.4, 0.8]), (1.0, 3.0, [1.0, 2.0, 3.0, 3.0, 3.0])],
)
def test_retry_delay_doubles_per_key_up_to_cap(base: float, cap: float, expected: list[float]) -> None:
    queue = WorkQueue(base_delay=base, max_delay=cap)
    assert [queue.retry("job") for _ in expected] == expected
    assert queue.retry("other") == base  # per key
    queue.forget("job")
    assert queue.failures("job") == 0
    assert queue.retry("job") == base


def test_retried_key_comes_back_after_its_delay() -> None:
    clock = FakeClock()
    queue = WorkQueue(base_delay=0.5, clock=clock)
    queue.retry("job")
    assert queue.get(timeout=0) is None
    clock.advance(0.49)
    assert queue.get(timeout=0) is None
    clock.advance(0.01)
    assert queue.get(timeout=0) == "job"


def test_add_after_orders_by_due_time() -> None:
    queue = WorkQueue()
    queue.add_after("late", 0.06)
    queue.add_after("early", 0.02)
    assert queue.get(timeout=2) == "early"
    assert queue.get(timeout=2) == "late"


def test_shut_down_wakes_blocked_workers() -> None:
    queue = WorkQueue()
    outcome: list[str] = []

    def worker() -> None:
        try:
            queue.get()
        except ShutDown:
            outcome.append("shut down")

    thread = threading.Thread(target=worker)
    thread.start()
    queue.shut_down()
    thread.join(5)
    assert outcome == ["shut down"]
    queue.add("ignored")
    with pytest.raises(ShutDown):
        queue.get(timeout=0)


def test_rejects_nonsense_delays() -> None:
    with pytest.raises(ValueError, match="base_delay"):
        WorkQueue(base_delay=0)
    with pytest.raises(ValueError, match="max_delay"):
        WorkQueue(base_delay=2, max_delay=1)
