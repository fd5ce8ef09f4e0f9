"""Per-Job state and the final table of `make run` / `make demo`."""

from __future__ import annotations

from typing import Any

import pytest

from devstack.report import (
    Timeline,
    format_table,
    job_status,
    resizer_summary,
    state_summary,
)
from placement.constants import (
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    RESIZE_LABEL,
    TARGET_COMPLETIONS_ANNOTATION,
)
from tests.support.builders import make_job, make_pod

POOL = "cloud.google.com/gke-nodepool"
NODES = {"n1": {POOL: "pool-1"}, "n2": {POOL: "pool-2"}}


def job(
    completions: int = 4, resize: str | None = None, target: int | None = None, complete: bool = False
) -> dict[str, Any]:
    built = make_job("train", "ns").annotation(JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION, POOL)
    built.spec(completions=completions, parallelism=completions).status()
    if resize:
        built.label(RESIZE_LABEL, resize)
    if target:
        built.annotation(TARGET_COMPLETIONS_ANNOTATION, str(target))
    return (built.condition("Complete") if complete else built).obj()


def pod(index: int, node: str = "", phase: str = "Pending", owner: str = "train") -> dict[str, Any]:
    return (
        make_pod(f"{owner}-{index}", "ns").job_label(owner).index(index).node(node or None).phase(phase).obj()
    )


@pytest.mark.parametrize(
    ("the_job", "pods", "state", "running", "target", "resized"),
    [
        pytest.param(job(1, "pending", 4), [pod(0)], "pending", 0, 4, False, id="elastic-leader-unbound"),
        pytest.param(
            job(1, "pending", 4), [pod(0, "n1")], "leader-bound", 0, 4, False, id="elastic-leader-bound"
        ),
        pytest.param(
            job(4, "done", 4),
            [pod(0, "n1", "Running"), pod(1, "n1")],
            "resized",
            1,
            4,
            True,
            id="elastic-resized",
        ),
        pytest.param(
            job(4, "done", 4),
            [pod(i, "n1", "Running") for i in range(4)],
            "running",
            4,
            4,
            True,
            id="elastic-running",
        ),
        pytest.param(
            job(4), [pod(0, "n2", "Running"), pod(1)], "leader-bound", 1, 4, None, id="gate-leader-bound"
        ),
        pytest.param(job(4, complete=True), [], "complete", 0, 4, None, id="complete"),
        pytest.param(
            job(2),
            [pod(0, "n1", "Running"), pod(1, "n1", "Running"), pod(0, "n2", "Running", owner="other")],
            "running",
            2,
            2,
            None,
            id="other-jobs-pods-skipped",
        ),
    ],
)
def test_job_status(
    the_job: dict[str, Any],
    pods: list[dict[str, Any]],
    state: str,
    running: int,
    target: int,
    resized: bool | None,
) -> None:
    status = job_status(the_job, pods, NODES)
    assert (status.state, status.pods_running, status.target, status.resized) == (
        state,
        running,
        target,
        resized,
    )
    assert status.job == "ns/train"


def test_domains_are_the_bound_pods_pools() -> None:
    status = job_status(job(2), [pod(0, "n1", "Running"), pod(1, "n2", "Running")], NODES)
    assert status.domains == ("pool-1", "pool-2")


def test_table_and_summary() -> None:
    statuses = [
        job_status(job(1, "pending", 4), [pod(0, "n1")], NODES),
        job_status(job(4), [pod(i, "n2", "Running") for i in range(4)], NODES),
    ]
    timeline = Timeline(start=100.0)
    timeline.observe(statuses, 101.5)
    timeline.observe(statuses, 105.0)
    table = format_table(statuses, timeline)
    lines = table.splitlines()
    assert lines[0].split() == [
        "Job",
        "node",
        "pool",
        "pods",
        "running",
        "leader",
        "bound",
        "resized",
        "state",
    ]
    assert lines[2].split() == ["ns/train", "pool-1", "0/4", "1.50s", "-", "leader-bound"]
    assert lines[3].split() == ["ns/train", "pool-2", "4/4", "1.50s", "n/a", "running"]
    assert state_summary(statuses) == "2 Jobs: 1 leader-bound, 1 running"


METRICS = """# HELP exclusive_placement_resizer_resizes_total Jobs restored to their target size.
# TYPE exclusive_placement_resizer_resizes_total counter
exclusive_placement_resizer_resizes_total {resizes}
# TYPE exclusive_placement_resizer_bind_to_resize_seconds histogram
exclusive_placement_resizer_bind_to_resize_seconds_bucket{{le="+Inf"}} {count}
exclusive_placement_resizer_bind_to_resize_seconds_count {count}
exclusive_placement_resizer_bind_to_resize_seconds_sum {total}
"""


def test_resizer_summary_adds_up_the_replicas() -> None:
    pages = [METRICS.format(resizes=3, count=3, total=0.009), METRICS.format(resizes=1, count=1, total=0.003)]
    assert resizer_summary(pages) == "resizer: 4 resizes, 0 gate releases, mean bind→resize 3.0 ms (/metrics)"
    assert resizer_summary([METRICS.format(resizes=0, count=0, total=0)]) is None
    assert resizer_summary([]) is None
