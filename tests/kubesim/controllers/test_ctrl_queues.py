"""Work queue and scheduling queue behaviour under a fast clock."""

import asyncio

import pytest

from kubesim.clock import Clock
from kubesim.controllers.scheduling_queue import SchedulingQueue
from kubesim.controllers.workqueue import WorkQueue


def test_clock_rejects_a_non_positive_scale() -> None:
    with pytest.raises(ValueError, match="time_scale must be > 0"):
        Clock(0)


def test_keys_are_deduplicated_and_never_processed_twice_at_once(run) -> None:
    async def scenario() -> list[str]:
        queue = WorkQueue(Clock(0.001), 1.0, 60.0)
        queue.add("a")
        queue.add("a")
        queue.add("b")
        first = await queue.get()
        queue.add(first)  # while processing: queued again only when done
        second = await queue.get()
        assert len(queue) == 0
        queue.done(first)
        third = await queue.get()
        return [first, second, third]

    assert run(scenario()) == ["a", "b", "a"]


def test_rate_limited_delays_double_up_to_the_cap_and_reset_on_forget() -> None:
    queue = WorkQueue(Clock(0.001), 1.0, 60.0)
    delays = [queue.add_rate_limited("job") for _ in range(8)]
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60]
    assert queue.num_requeues("job") == 8
    queue.forget("job")
    assert queue.backoff("job") == 1


def test_a_shorter_delay_overrides_a_pending_longer_one() -> None:
    clock = Clock(0.001)
    queue = WorkQueue(clock, 1.0, 60.0)
    queue.add_after("job", 32)
    long_at = queue.pending_at("job")
    queue.add_after("job", 1)
    short_at = queue.pending_at("job")
    assert long_at is not None
    assert short_at is not None
    assert short_at < long_at - 30
    queue.add_after("job", 10)
    assert queue.pending_at("job") == short_at


def test_delayed_keys_come_out_in_time_order(run) -> None:
    async def scenario() -> list[str]:
        queue = WorkQueue(Clock(0.001), 1.0, 60.0)
        queue.add_after("late", 20)
        queue.add_after("early", 5)
        return [await queue.get(), await queue.get()]

    assert run(scenario()) == ["early", "late"]


def test_a_worker_cancelled_as_a_key_arrives_stops(run) -> None:
    """A cancellation landing in the loop iteration that wakes `get` must not be lost (Python 3.11's
    asyncio.wait_for drops it), or a TaskGroup of workers never finishes cancelling."""

    async def scenario() -> None:
        queue = WorkQueue(Clock(1.0), 1.0, 10.0)
        queue.add_after("later", 100.0)  # get() then waits with a finite timeout
        getter = asyncio.create_task(queue.get())
        await asyncio.sleep(0)  # the getter is waiting
        queue.add("now")
        getter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(getter, 5)

    run(scenario())


def test_scheduling_queue_parks_unschedulable_pods_until_a_cluster_event(run) -> None:
    async def scenario() -> None:
        clock = Clock(0.001)
        queue = SchedulingQueue(clock, 1.0, 10.0, 300.0)
        queue.add("p1")
        queue.add("p2", priority=10)
        assert await queue.pop() == "p2"
        assert await queue.pop() == "p1"
        queue.failed("p1", unschedulable=True)
        assert queue.sizes() == (0, 0, 1)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(queue.pop(), 0.05)
        assert queue.move(lambda key: key == "other") == 0
        assert queue.move() == 1
        assert await asyncio.wait_for(queue.pop(), 5) == "p1"

    run(scenario())


def test_scheduling_backoff_doubles_per_attempt_to_the_cap() -> None:
    queue = SchedulingQueue(Clock(0.001), 1.0, 10.0, 300.0)
    seen = []
    for _ in range(6):
        queue.failed("p", unschedulable=True)
        seen.append(queue.backoff_seconds("p"))
    assert seen == [1, 2, 4, 8, 10, 10]
    queue.forget("p")
    assert queue.backoff_seconds("p") == 0
    assert "p" not in queue
