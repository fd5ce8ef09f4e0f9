"""kubesim's gang progress model against the running simulator: gang members (pods annotated with
`sim.exclusive-placement.io/gang` and `gang-size`) advance their run time only while every member of their
gang is Running. Each check compares a gang with a plain control pod started at the same moment, so the
assertions are about the order things finish in, not about how long they took."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kubesim.apiserver.server import ApiServer
from kubesim.controllers.gang import GANG_ANNOTATION, GANG_SIZE_ANNOTATION
from kubesim.testing import KubesimServer
from tests.support.waiting import eventually

TIME_SCALE = 0.01
RUN_SECONDS = 100.0
"""Simulated: one real second at TIME_SCALE."""
REAL_RUN = RUN_SECONDS * TIME_SCALE
NAMESPACE = "default"


@pytest.fixture(scope="module")
def sim() -> Iterator[KubesimServer]:
    overrides = {"pod_run_seconds": RUN_SECONDS}
    with KubesimServer(nodes=2, pools=1, time_scale=TIME_SCALE, controller_overrides=overrides) as server:
        yield server


def _pod(name: str, gang: str | None = None, size: int = 0) -> dict[str, Any]:
    annotations = {GANG_ANNOTATION: gang, GANG_SIZE_ANNOTATION: str(size)} if gang else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "w", "image": "registry.example/w:1"}]},
    }


def _create(sim: KubesimServer, *pods: dict[str, Any]) -> None:
    async def create(api: ApiServer) -> None:
        for pod in pods:
            await api.create("pods", pod, namespace=NAMESPACE)

    sim.call(create)


def _phase(sim: KubesimServer, name: str) -> str:
    pod = sim.call(lambda api: api.get("pods", name, namespace=NAMESPACE))
    return str((pod.get("status") or {}).get("phase"))


def _wait_phase(sim: KubesimServer, phase: str, *names: str) -> None:
    eventually(
        lambda: all(_phase(sim, n) == phase for n in names),
        lambda: f"{phase}: {[(n, _phase(sim, n)) for n in names]}",
        timeout=30,
    )


def test_a_gang_missing_a_member_never_progresses_and_a_whole_one_runs_its_full_time(
    sim: KubesimServer,
) -> None:
    _create(sim, _pod("part-0", "part", 3), _pod("part-1", "part", 3), _pod("part-control"))
    _wait_phase(sim, "Succeeded", "part-control")
    assert [_phase(sim, n) for n in ("part-0", "part-1")] == ["Running", "Running"]

    completed_at = time.monotonic()
    _create(sim, _pod("part-2", "part", 3))
    _wait_phase(sim, "Succeeded", "part-0", "part-1", "part-2")
    # The two early members ran a whole run time while incomplete: had their clocks run, they would have
    # finished at once. Whole from the third's creation at the earliest, they need the full run time.
    assert time.monotonic() - completed_at >= REAL_RUN


def test_progress_pauses_while_a_member_is_gone_and_resumes_where_it_stopped(sim: KubesimServer) -> None:
    _create(sim, _pod("pause-0", "pause", 2), _pod("pause-1", "pause", 2))
    _wait_phase(sim, "Running", "pause-0", "pause-1")
    time.sleep(REAL_RUN / 2)  # shapes the run, not a wait: the gang makes about half its progress

    sim.call(lambda api: api.delete("pods", "pause-1", namespace=NAMESPACE))
    _create(sim, _pod("pause-control"))
    _wait_phase(sim, "Succeeded", "pause-control")
    assert _phase(sim, "pause-0") == "Running"  # a progressing member would have finished first

    _create(sim, _pod("pause-2", "pause", 2), _pod("resume-control"))
    _wait_phase(sim, "Succeeded", "pause-0", "pause-2")
    # Accumulated, not restarted: the gang had half its run left, the control pod its whole run.
    assert _phase(sim, "resume-control") == "Running"
