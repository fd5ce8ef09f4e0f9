"""Scale: N nodes and N pods scheduled and running at time scale 0.01. The quick variant runs in the default
suite; the 4,096 variants are `slow` and print the figures recorded in docs/kubesim-controllers.md."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from placement.constants import GKE_NODEPOOL_LABEL
from tests.kubesim.controllers.ctrl_harness import Run, cluster, exclusive_job, indexed_job, pod_spec
from tests.support.waiting import eventually_async


async def _fill(nodes: int, pools: int, jobs: int, size: int, exclusive: bool) -> dict[str, float]:
    async with cluster(nodes=nodes, pools=pools, time_scale=0.01) as c:
        started = time.monotonic()
        for number in range(jobs):
            name = f"fill-{number}"
            job = (
                exclusive_job(name, size, gpus=8)
                if exclusive
                else indexed_job(name, size, spec=pod_spec(gpus=8))
            )
            await c.server.create("jobs", job, namespace="default")
        await eventually_async(
            lambda: c.stats.pods_running >= jobs * size,
            lambda: f"{jobs * size} pods Running (stats: {c.stats.snapshot()['pods']})",
            900,
            interval=0.05,
        )
        elapsed = time.monotonic() - started
        pods = await c.pods()
        assert len(pods) == jobs * size
        assert all(p["status"]["phase"] == "Running" for p in pods)
        # 8-GPU pods on 8-GPU nodes: exactly one pod per node
        assert Counter(p["spec"]["nodeName"] for p in pods).most_common(1)[0][1] == 1
        if exclusive:
            node_pool = {
                n["metadata"]["name"]: n["metadata"]["labels"][GKE_NODEPOOL_LABEL]
                for n in (await c.server.list("nodes"))[0]
            }
            pools_per_job: dict[str, set[str]] = {}
            for pod in pods:
                job = pod["metadata"]["labels"]["batch.kubernetes.io/job-name"]
                pools_per_job.setdefault(job, set()).add(node_pool[pod["spec"]["nodeName"]])
            assert all(len(p) == 1 for p in pools_per_job.values())
            assert len({next(iter(p)) for p in pools_per_job.values()}) == jobs
        scheduler = c.stats.snapshot()["scheduler"]
        figures = {
            "seconds": round(elapsed, 1),
            "pods_per_second": round(jobs * size / elapsed, 1),
            "attempts": scheduler["attempts"],
            "filter_evaluations": scheduler["filter_evaluations"],
            "affinity_evaluations": scheduler["affinity_evaluations"],
        }
        print(f"\n{nodes} nodes, {jobs * size} pods, exclusive={exclusive}: {figures}")
        return figures


@pytest.mark.timeout(120)
def test_quick_scale_256_nodes_256_pods(run: Run) -> None:
    figures = run(_fill(256, 16, 16, 16, exclusive=False))
    assert figures["attempts"] == 256


@pytest.mark.timeout(120)
def test_quick_scale_exclusive_affinity_256_nodes(run: Run) -> None:
    figures = run(_fill(256, 16, 16, 16, exclusive=True))
    assert figures["affinity_evaluations"] > 0


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_scale_4096_nodes_4096_pods(run: Run) -> None:
    figures = run(_fill(4096, 256, 256, 16, exclusive=False))
    assert figures["attempts"] == 4096


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_scale_4096_nodes_4096_pods_exclusive_affinity(run: Run) -> None:
    figures = run(_fill(4096, 256, 256, 16, exclusive=True))
    assert figures["affinity_evaluations"] > 0
