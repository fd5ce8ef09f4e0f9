"""Pure parts of the strategy benchmark: scenarios, records, checks, the report."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import main as bench_main
from bench.recorder import PodRecorder
from bench.report import markdown_table, write_outputs
from bench.scenarios import FULL_SCENARIOS, QUICK_SCENARIOS, TOPOLOGY_KEY, Scenario, jobset_manifest
from bench.strategies import failures, result_from_stats, strategy_problems
from placement.constants import RESIZE_LABEL, ROLE_LABEL, STRATEGY_ANNOTATION

STATS = {
    "requests": {"total": 100, "writes": 40, "by_verb_resource": {"patch jobs": 4, "create pods": 39}},
    "pods": {"create_accepted": 32, "create_rejected": 7, "patched": 3},
    "jobs": {"patched": 4},
    "admission": {"calls": 80},
    "scheduler": {"filter_evaluations": 500, "affinity_evaluations": 60},
}


def test_issue_scenarios_are_covered() -> None:
    shapes = {(s.jobs, s.pods_per_job) for s in FULL_SCENARIOS if not s.contended}
    assert {(4, 8), (16, 32), (64, 64)} <= shapes
    assert any(s.contended for s in FULL_SCENARIOS)
    assert any(s.contended for s in QUICK_SCENARIOS)
    for scenario in FULL_SCENARIOS + QUICK_SCENARIOS:
        assert scenario.nodes * 8 >= scenario.pools * scenario.pods_per_job  # a pool holds a whole Job


def test_contended_scenario_needs_pods_that_finish() -> None:
    with pytest.raises(ValueError, match="pod_run_seconds"):
        Scenario("x", jobs=4, pods_per_job=2, pools=2)


def test_jobset_carries_the_strategy_on_the_job_template() -> None:
    manifest = jobset_manifest(QUICK_SCENARIOS[0], "gate", name="b", namespace="ns")
    rjob = manifest["spec"]["replicatedJobs"][0]
    assert rjob["replicas"] == 4
    assert rjob["template"]["spec"]["template"]["metadata"]["annotations"] == {STRATEGY_ANNOTATION: "gate"}
    assert rjob["template"]["spec"]["completions"] == rjob["template"]["spec"]["parallelism"] == 8


def test_result_has_exactly_the_issue_fields() -> None:
    result = result_from_stats(STATS, 1.23456, 0)
    assert result == {
        "pod_creates_rejected": 7,
        "pod_creates_accepted": 32,
        "api_requests": 100,
        "api_writes": 40,
        "admission_calls": 80,
        "job_patches": 4,
        "pod_patches": 3,
        "scheduler_filter_evaluations": 500,
        "scheduler_affinity_evaluations": 60,
        "seconds_to_all_running": 1.235,
        "exclusive_violations": 0,
        "api_requests_by_verb_resource": {"create pods": 39, "patch jobs": 4},
    }


def job(name: str, resize: str | None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {RESIZE_LABEL: resize} if resize else {}}}


@pytest.mark.parametrize(
    ("strategy", "jobs", "count"),
    [
        ("elastic", [job("a", "done"), job("b", "done")], 0),
        ("elastic", [job("a", "done"), job("b", "pending")], 1),
        ("gate", [job("a", None), job("b", None)], 0),
        ("gate", [job("a", "done"), job("b", None)], 1),
        ("gate", [job("a", None)], 1),
    ],
)
def test_strategy_problems_of_jobs(strategy: str, jobs: list[dict[str, Any]], count: int) -> None:
    assert len(strategy_problems(strategy, jobs, [], expected_jobs=2)) == count


def follower(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "labels": {ROLE_LABEL: "follower"}}, "spec": spec}


PINNED: dict[str, Any] = {"nodeSelector": {TOPOLOGY_KEY: "pool-00"}}
ANTI: dict[str, Any] = {"affinity": {"podAntiAffinity": {}, "podAffinity": {}}}


@pytest.mark.parametrize(
    ("strategy", "spec", "count"),
    [
        ("elastic", PINNED, 0),
        ("scheduling-gate", PINNED, 0),
        ("gate", {}, 1),
        ("gate", {**PINNED, **ANTI}, 1),
        ("affinity", ANTI, 0),
        ("affinity", PINNED, 1),
    ],
)
def test_strategy_problems_of_followers(strategy: str, spec: dict[str, Any], count: int) -> None:
    jobs = [job("a", "done" if strategy == "elastic" else None)]
    assert len(strategy_problems(strategy, jobs, [follower(spec)], expected_jobs=1)) == count


def pod(job_name: str, index: int, node: str, phase: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{job_name}-{index}",
            "namespace": "ns",
            "labels": {"batch.kubernetes.io/job-name": job_name},
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
        },
        "spec": {"nodeName": node},
        "status": {"phase": phase},
    }


def test_recorder_counts_each_pod_once_and_replays_exclusivity() -> None:
    async def scenario() -> PodRecorder:
        recorder = PodRecorder({"n1": "a", "n2": "b"}, expected_pods=3)
        recorder.observe("ADDED", pod("j1", 0, "n1", "Running"))
        recorder.observe("MODIFIED", pod("j1", 0, "n1", "Succeeded"))
        recorder.observe("ADDED", pod("j1", 1, "n1", "Running"))
        assert not recorder.all_running.is_set()
        recorder.observe("MODIFIED", pod("j2", 0, "n1", "Running"))
        return recorder

    recorder = asyncio.run(scenario())
    assert recorder.all_running.is_set()
    assert recorder.replay.violations == 1  # j2 ran in pool a while j1's index 1 was still running


REPORT = {
    "time_scale": 0.1,
    "scenarios": [
        {
            "name": "4x8",
            "jobs": 4,
            "pods_per_job": 8,
            "pools": 4,
            "contended": False,
            "results": {"elastic": result_from_stats(STATS, 2.0, 0), "gate": {"error": "timeout"}},
        }
    ],
}


def test_markdown_table_and_failures() -> None:
    table = markdown_table(REPORT)
    rows = [line for line in table.splitlines() if line.startswith("| 4x8")]
    assert len(rows) == 2
    assert "| `elastic` | 7 | 32 | 100 | 40 | 80 | 4 | 3 | 500 | 60 | 2.00 | 0 |" in rows[0]
    assert "FAILED: timeout" in rows[1]
    assert failures(REPORT) == ["4x8/gate: timeout"]


def test_outputs_written(tmp_path: Path) -> None:
    paths = write_outputs(REPORT, tmp_path)
    assert json.loads((tmp_path / "strategies.json").read_text()) == REPORT
    pngs = [p for p in paths if p.suffix == ".png"]
    assert len(pngs) == 3
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_dispatcher_rejects_unknown_benchmarks(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["nope"]) == 2
    assert "choose one of: strategies, webhook, resizer, soak" in capsys.readouterr().err
    assert bench_main(["strategies", "--strategies", "spread"]) == 2
