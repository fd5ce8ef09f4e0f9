"""kubesim's gang progress model, on the in-process cluster in virtual time: gang members (pods annotated
with `sim.exclusive-placement.io/gang` and `gang-size`) advance their run time only while every member of
their gang is Running. Each check compares a gang with a plain control pod started at the same moment, so
the assertions are about the order things finish in; virtual time makes that order exact (no real-time
margin decides it)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from kubesim.controllers.gang import GANG_ANNOTATION, GANG_SIZE_ANNOTATION
from tests.kubesim.controllers.ctrl_harness import Cluster, Run, cluster
from tests.support.builders import make_pod

RUN_SECONDS = 100.0
"""Simulated seconds every pod runs (its gang's clock, for a gang member)."""
NAMESPACE = "default"


def _pod(name: str, gang: str | None = None, size: int = 0) -> dict[str, Any]:
    pod = make_pod(name, NAMESPACE).spec(restartPolicy="Never")
    if gang:
        pod.annotation(GANG_ANNOTATION, gang).annotation(GANG_SIZE_ANNOTATION, str(size))
    return pod.obj()


async def _create(c: Cluster, *pods: dict[str, Any]) -> None:
    for pod in pods:
        await c.server.create("pods", pod, namespace=NAMESPACE)


async def _phases(c: Cluster, *names: str) -> list[str]:
    pods = [await c.server.get("pods", name, namespace=NAMESPACE) for name in names]
    return [str((pod.get("status") or {}).get("phase")) for pod in pods]


async def _wait_phase(c: Cluster, phase: str, *names: str) -> None:
    async def reached() -> bool:
        return await _phases(c, *names) == [phase] * len(names)

    await c.wait_for(reached, 30, f"{', '.join(names)} {phase}")


def _gang_cluster() -> AbstractAsyncContextManager[Cluster]:
    return cluster(
        nodes=2, pools=1, components=("scheduler", "kubelet"), virtual_time=True, pod_run_seconds=RUN_SECONDS
    )


def test_a_gang_missing_a_member_never_progresses_and_a_whole_one_runs_its_full_time(
    run_virtual_time: Run,
) -> None:
    async def scenario() -> None:
        async with _gang_cluster() as c:
            await _create(c, _pod("part-0", "part", 3), _pod("part-1", "part", 3), _pod("part-control"))
            await _wait_phase(c, "Succeeded", "part-control")
            assert await _phases(c, "part-0", "part-1") == ["Running", "Running"]

            whole_from = c.controllers.clock.now()
            await _create(c, _pod("part-2", "part", 3))
            await _wait_phase(c, "Succeeded", "part-0", "part-1", "part-2")
            # The two early members ran a whole run time while incomplete: had their clocks run, they would
            # have finished at once. Whole from the third's creation at the earliest, they need the full run.
            assert c.controllers.clock.now() - whole_from >= RUN_SECONDS

    run_virtual_time(scenario())


def test_progress_pauses_while_a_member_is_gone_and_resumes_where_it_stopped(run_virtual_time: Run) -> None:
    async def scenario() -> None:
        async with _gang_cluster() as c:
            await _create(c, _pod("pause-0", "pause", 2), _pod("pause-1", "pause", 2))
            await _wait_phase(c, "Running", "pause-0", "pause-1")
            await c.controllers.clock.sleep(
                RUN_SECONDS / 2
            )  # shapes the run: the gang makes half its progress

            await c.server.delete("pods", "pause-1", namespace=NAMESPACE)
            await _create(c, _pod("pause-control"))
            await _wait_phase(c, "Succeeded", "pause-control")
            assert await _phases(c, "pause-0") == [
                "Running"
            ]  # a progressing member would have finished first

            await _create(c, _pod("pause-2", "pause", 2), _pod("resume-control"))
            await _wait_phase(c, "Succeeded", "pause-0", "pause-2")
            # Accumulated, not restarted: the gang had half its run left, the control pod its whole run.
            assert await _phases(c, "resume-control") == ["Running"]

    run_virtual_time(scenario())
