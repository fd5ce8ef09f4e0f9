"""Scale: N nodes and an N-pod Indexed Job all scheduled and Running (time reported, never asserted)."""

from __future__ import annotations

import time

import pytest

from kubesim.testing import KubesimServer
from tests.support.waiting import eventually


def run_to_running(count: int) -> float:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "scale"},
        "spec": {
            "completions": count,
            "parallelism": count,
            "completionMode": "Indexed",
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox:1.36",
                            "resources": {"requests": {"nvidia.com/gpu": "8"}},
                        }
                    ],
                }
            },
        },
    }
    overrides = {"scheduler_pods_per_second": 0}
    with KubesimServer(
        nodes=count, pools=max(1, count // 64), time_scale=0.01, controller_overrides=overrides
    ) as sim:
        start = time.monotonic()
        sim.call(lambda api: api.create("jobs", job, namespace="default"))
        eventually(
            lambda: sim.stats()["pods"]["running"] >= count,
            lambda: f"{count} pods Running (stats: {sim.stats()['pods']})",
            600,
            interval=0.1,
        )
        elapsed = time.monotonic() - start
        stats = sim.stats()
        pods, _ = sim.call(lambda api: api.list("pods", field_selector="status.phase=Running"))
    assert stats["pods"]["create_accepted"] == count
    assert stats["pods"]["bound"] == count
    assert len(pods) == count
    # 8 GPUs requested per pod on 8-GPU nodes: exactly one pod per node.
    assert len({p["spec"]["nodeName"] for p in pods}) == count
    print(f"kubesim scale: {count} nodes, {count} pods Running in {elapsed:.1f} s (time-scale 0.01)")
    return elapsed


def test_quick_scale_256() -> None:
    run_to_running(256)


@pytest.mark.slow
def test_scale_4096() -> None:
    run_to_running(4096)
