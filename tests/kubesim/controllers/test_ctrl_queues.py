"""Work queue and scheduling queue behaviour under a fast (or hand-driven) clock."""

import asyncio

import pytest

from kubesim.clock import Clock
from kubesim.controllers.cluster_events import Action, ClusterEvent, Resource
from kubesim.controllers.scheduling_queue import ACTIVE, BACKOFF, UNSCHEDULABLE, SchedulingQueue
from kubesim.controllers.workqueue import WorkQueue
from tests.kubesim.controllers.ctrl_harness import Run


def test_clock_rejects_a_non_positive_scale() -> None:
    with pytest.raises(ValueError, match="time_scale must be > 0"):
        Clock(0)


def test_keys_are_deduplicated_and_never_processed_twice_at_once(run: Run) -> None:
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


def test_delayed_keys_come_out_in_time_order(run: Run) -> None:
    async def scenario() -> list[str]:
        queue = WorkQueue(Clock(0.001), 1.0, 60.0)
        queue.add_after("late", 20)
        queue.add_after("early", 5)
        return [await queue.get(), await queue.get()]

    assert run(scenario()) == ["early", "late"]


def test_a_worker_cancelled_as_a_key_arrives_stops(run: Run) -> None:
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


class HandClock(Clock):
    """Simulated time that only moves when the test says so."""

    def __init__(self) -> None:
        super().__init__(0.001)
        self.at = 0.0

    def now(self) -> float:
        return self.at


NODE_ADDED = ClusterEvent(Resource.NODE, Action.ADD, None, {"metadata": {"name": "n9"}})
POD_DELETED = ClusterEvent(Resource.POD, Action.DELETE, {"metadata": {"name": "gone"}}, None)


class Hints:
    """A fake of the scheduler's queueing hints: Queue only for the (pod, plugin, event) it was told."""

    def __init__(self) -> None:
        self.queue_for: set[tuple[str, str, Action]] = set()
        self.asked: list[tuple[str, frozenset[str], Action]] = []

    def __call__(self, key: str, rejectors: frozenset[str], event: ClusterEvent) -> bool:
        self.asked.append((key, rejectors, event.action))
        return any((key, plugin, event.action) in self.queue_for for plugin in rejectors)


def _queue(clock: Clock, hints: Hints) -> SchedulingQueue:
    return SchedulingQueue(clock, 1.0, 10.0, 300.0, hints)


async def _attempt(queue: SchedulingQueue, rejectors: frozenset[str] = frozenset()) -> str:
    key = await asyncio.wait_for(queue.pop(), 5)
    queue.failed(key, rejectors)
    return key


def test_a_pod_moves_only_on_an_event_its_rejecting_plugins_hints_queue(run: Run) -> None:
    async def scenario() -> None:
        hints = Hints()
        queue = _queue(Clock(0.001), hints)
        queue.add("p1")
        queue.add("p2", priority=10)
        assert await queue.pop() == "p2"
        queue.failed("p2", frozenset({"NodeAffinity"}))
        await _attempt(queue, frozenset({"NodeResourcesFit"}))
        assert queue.sizes() == (0, 0, 2)
        hints.queue_for = {("p1", "NodeResourcesFit", Action.DELETE)}
        assert queue.on_event(NODE_ADDED) == 0
        assert queue.on_event(POD_DELETED) == 1
        assert queue.where("p1") in (ACTIVE, BACKOFF)
        assert queue.where("p2") == UNSCHEDULABLE
        assert ("p2", frozenset({"NodeAffinity"}), Action.DELETE) in hints.asked
        assert await asyncio.wait_for(queue.pop(), 5) == "p1"

    run(scenario())


def test_a_moved_pod_goes_to_backoff_while_backing_off_else_to_active() -> None:
    clock = HandClock()
    hints = Hints()
    hints.queue_for = {(key, "NodeResourcesFit", Action.DELETE) for key in ("early", "late")}
    queue = _queue(clock, hints)
    queue.add("early")
    asyncio.run(_attempt(queue, frozenset({"NodeResourcesFit"})))
    clock.at = 0.5
    queue.on_event(POD_DELETED)
    assert queue.where("early") == BACKOFF  # 1 s backoff after the first attempt, 0.5 s gone
    queue.add("late")
    clock.at = 1.0
    asyncio.run(_attempt(queue, frozenset({"NodeResourcesFit"})))
    clock.at = 2.5
    queue.on_event(POD_DELETED)
    assert queue.where("late") == ACTIVE  # its 1 s backoff was over when the event came


def test_backoff_doubles_per_attempt_to_the_cap(run: Run) -> None:
    async def scenario() -> list[float]:
        hints = Hints()
        hints.queue_for = {("p", "X", Action.ADD)}
        queue = _queue(Clock(0.0001), hints)
        queue.add("p")
        seen = []
        for _ in range(6):
            await _attempt(queue, frozenset({"X"}))
            seen.append(queue.backoff_seconds("p"))
            queue.on_event(NODE_ADDED)
        queue.forget("p")
        assert queue.backoff_seconds("p") == 0
        assert "p" not in queue
        return seen

    assert run(scenario()) == [1, 2, 4, 8, 10, 10]


def test_an_error_goes_back_through_backoff_without_waiting_for_an_event() -> None:
    clock = HandClock()
    queue = _queue(clock, Hints())
    queue.add("p")
    asyncio.run(_attempt(queue))
    assert queue.where("p") == BACKOFF


def test_events_while_a_pod_is_in_flight_are_replayed_when_it_fails(run: Run) -> None:
    async def scenario() -> None:
        hints = Hints()
        hints.queue_for = {("late", "NodeResourcesFit", Action.DELETE)}
        queue = _queue(Clock(0.001), hints)
        queue.add("late")
        queue.add("other")
        assert await queue.pop() == "late"
        queue.on_event(POD_DELETED)  # the pod is being scheduled: nothing parked yet
        queue.failed("late", frozenset({"NodeResourcesFit"}))
        assert queue.where("late") in (ACTIVE, BACKOFF)
        assert await queue.pop() == "other"
        queue.failed("other", frozenset({"NodeAffinity"}))
        assert queue.where("other") == UNSCHEDULABLE

    run(scenario())


def test_a_gated_pod_waits_without_attempts_until_its_gates_are_lifted() -> None:
    hints = Hints()
    queue = _queue(HandClock(), hints)
    queue.add("g", gated_by="SchedulingGates")
    assert queue.sizes() == (0, 0, 1)
    hints.queue_for = {("g", "SchedulingGates", Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)}
    lifted = ClusterEvent(Resource.POD, Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED, {}, {})
    relabelled = ClusterEvent(Resource.POD, Action.UPDATE_POD_LABEL, {}, {})
    queue.update("g", [relabelled], gated_by="SchedulingGates")
    assert queue.where("g") == UNSCHEDULABLE
    queue.update("g", [lifted], gated_by=None)
    assert queue.where("g") == ACTIVE
    assert queue.backoff_seconds("g") == 0


def test_the_pool_is_flushed_after_five_minutes_except_gated_pods() -> None:
    clock = HandClock()
    queue = _queue(clock, Hints())
    queue.add("p")
    queue.add("g", gated_by="SchedulingGates")
    asyncio.run(_attempt(queue, frozenset({"NodeAffinity"})))
    clock.at = 300.0
    with pytest.raises(TimeoutError):  # checked every 30 s, moved once parked for more than 300 s
        asyncio.run(asyncio.wait_for(queue.pop(), 0.05))
    clock.at = 330.0
    assert asyncio.run(asyncio.wait_for(queue.pop(), 5)) == "p"
    assert queue.where("g") == UNSCHEDULABLE
