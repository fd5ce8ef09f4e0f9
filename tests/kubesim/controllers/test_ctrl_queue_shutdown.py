"""A cancelled queue worker stops, even when its cancellation races with a key arriving (cluster shutdown)."""

from __future__ import annotations

import asyncio

import pytest

from kubesim.clock import Clock
from kubesim.controllers.scheduling_queue import SchedulingQueue
from kubesim.controllers.workqueue import WorkQueue
from tests.kubesim.controllers.ctrl_harness import Run


@pytest.mark.parametrize("queue_kind", ["workqueue", "scheduling-queue"])
def test_a_worker_cancelled_as_a_key_arrives_still_stops(run: Run, queue_kind: str) -> None:
    """Python 3.11's asyncio.wait_for returned the result instead of raising when the cancellation raced with
    the event being set: the cancelled worker kept running and a cluster's shutdown hung."""

    async def scenario() -> None:
        clock = Clock(0.01)
        # something is waiting for a later time, so the worker waits with a timeout
        if queue_kind == "workqueue":
            work = WorkQueue(clock, 1.0, 60.0)
            work.add_after("ns/later", 60.0)
            getter = asyncio.create_task(work.get())
            await asyncio.sleep(0)
            work.add("ns/job")
        else:
            pods = SchedulingQueue(clock, 1.0, 10.0, 300.0)
            pods.add("ns/parked")
            pods.failed(await pods.pop(), frozenset({"NodeResourcesFit"}))
            getter = asyncio.create_task(pods.pop())
            await asyncio.sleep(0)
            pods.add("ns/pod")
        getter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await getter

    run(scenario())
