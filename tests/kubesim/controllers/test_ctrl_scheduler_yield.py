"""Back-to-back scheduling cycles (`scheduler_pods_per_second=0`) share the API server's event loop: the
scheduler lets other tasks run every 5 ms of cycles, not every 64 cycles (at 15,000 nodes one cycle costs
~8 ms, so 64 cycles held every watch and request for ~0.5 s)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools

import pytest

from kubesim.apiserver.server import ApiServer
from kubesim.cluster import make_nodes
from kubesim.controllers import Controllers, scheduler
from kubesim.controllers.settings import ControllerSettings
from kubesim.stats import Stats
from tests.kubesim.controllers.ctrl_harness import Run, pod_spec

pytestmark = pytest.mark.timeout(60)
PODS = 40
CYCLE_SECONDS = 0.002
"""What each call of the scheduler's loop clock advances: a cycle of 2 ms."""


def test_a_backlog_of_cycles_yields_the_loop_every_few_cycles(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks = itertools.count()
    monkeypatch.setattr(scheduler, "_loop_clock", lambda: next(ticks) * CYCLE_SECONDS)

    async def scenario() -> int:
        stats = Stats()
        server = ApiServer(stats, seed=0)
        for node in make_nodes(4, 1, gpus_per_node=8):
            await server.create("nodes", node, client="bootstrap")
        for number in range(PODS):
            pod = {"metadata": {"name": f"p-{number}"}, "spec": pod_spec(gpus=0, cpu="10m")}
            await server.create("pods", pod, namespace="default")
        settings = ControllerSettings(time_scale=0.01, scheduler_pods_per_second=0)
        controllers = Controllers(server, settings, stats, admission=server.admission)
        task = asyncio.create_task(controllers.run(("scheduler",)))
        seen: list[int] = []
        try:
            while stats.scheduler_attempts < PODS:
                seen.append(stats.scheduler_attempts)
                await asyncio.sleep(0)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await server.aclose()
        seen.append(stats.scheduler_attempts)
        return max(later - earlier for earlier, later in itertools.pairwise(seen))

    # Every call of the loop clock is 2 ms later: the scheduler yields after at most three cycles (the
    # old count-based yield ran all 40 queued cycles without letting this task run once).
    assert run(scenario()) <= 3
