"""Pure parts of the strategy benchmark: scenarios, records, checks, the report."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import main as bench_main
from bench.recorder import BacklogTracker, PodRecorder
from bench.report import markdown_table, scenario_label, write_outputs
from bench.scenarios import (
    FULL_SCENARIOS,
    QUICK_SCENARIOS,
    TOPOLOGY_KEY,
    Backlog,
    Scenario,
    backlog_jobs,
    jobset_manifest,
)
from bench.strategies import (
    RunSettings,
    backlog_namespace,
    cluster_flags,
    failures,
    result_from_stats,
    strategy_problems,
)
from devstack.commands import kubesim_command
from placement.constants import RESIZE_LABEL, ROLE_LABEL, STRATEGY_ANNOTATION

STATS = {
    "requests": {"total": 100, "writes": 40, "by_verb_resource": {"patch jobs": 4, "create pods": 39}},
    "pods": {"create_accepted": 32, "create_rejected": 7, "patched": 3},
    "jobs": {"patched": 4},
    "admission": {"calls": 80},
    "scheduler": {"attempts": 45, "filter_evaluations": 500, "affinity_evaluations": 60},
}


def test_issue_scenarios_are_covered() -> None:
    shapes = {(s.jobs, s.pods_per_job) for s in FULL_SCENARIOS if not s.contended}
    assert {(4, 8), (16, 32), (64, 64)} <= shapes
    assert any(s.contended for s in FULL_SCENARIOS)
    assert any(s.contended for s in QUICK_SCENARIOS)
    for scenario in FULL_SCENARIOS + QUICK_SCENARIOS:
        assert scenario.nodes * 8 >= scenario.pools * scenario.pods_per_job  # a pool holds a whole Job


@pytest.mark.parametrize("scenarios", [FULL_SCENARIOS, QUICK_SCENARIOS])
def test_a_throttled_scheduler_scenario_runs_in_real_time(scenarios: tuple[Scenario, ...]) -> None:
    throttled = [s for s in scenarios if s.throttled]
    assert throttled
    for scenario in throttled:
        assert not scenario.contended  # leaders wait for the scheduler, not for capacity
        flags = cluster_flags(scenario, RunSettings(time_scale=0.1, run_timeout=60))
        assert flags.time_scale == 1.0
        argv = kubesim_command(flags, port=0, kubeconfig=Path("kc"))
        assert argv[argv.index("--scheduler-pods-per-second") + 1] == "60.0"
    plain = cluster_flags(FULL_SCENARIOS[0], RunSettings(time_scale=0.1, run_timeout=60))
    assert plain.time_scale == 0.1
    assert "--scheduler-pods-per-second" not in kubesim_command(plain, port=0, kubeconfig=Path("kc"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"scheduler_pods_per_second": 0}, "scheduler_pods_per_second"), ({"time_scale": -1}, "time_scale")],
)
def test_scenario_rejects_bad_scheduler_settings(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Scenario("x", jobs=2, pods_per_job=2, pools=2, **kwargs)


@pytest.mark.parametrize(
    ("scenario", "label"),
    [
        ({"jobs": 4, "pods_per_job": 8, "pools": 4, "contended": False}, "4x8 on 4 pools"),
        ({"jobs": 6, "pods_per_job": 4, "pools": 2, "contended": True}, "6x4 on 2 pools, contended"),
        (
            {"jobs": 8, "pods_per_job": 16, "pools": 8, "contended": False, "time_scale": 0.1},
            "8x16 on 8 pools",
        ),
        (
            {
                "jobs": 8,
                "pods_per_job": 16,
                "pools": 8,
                "contended": False,
                "scheduler_pods_per_second": 60.0,
                "time_scale": 1.0,
            },
            "8x16 on 8 pools, scheduler 60 pods/s, time scale 1",
        ),
        (
            {
                "jobs": 16,
                "pods_per_job": 16,
                "pools": 16,
                "contended": False,
                "scheduler_pods_per_second": 60.0,
                "backlog_pods": 1200,
                "time_scale": 1.0,
            },
            "16x16 on 16 pools, scheduler 60 pods/s, behind a backlog of 1,200 pods, time scale 1",
        ),
    ],
)
def test_scenario_label(scenario: dict[str, Any], label: str) -> None:
    assert scenario_label(scenario, 0.1) == label


def test_the_backlog_scenario_is_in_the_full_bench_only() -> None:
    # Only a throttled scheduler keeps a backlog; the scenario costs ~2 minutes, so it is not in --quick.
    backlogged = [s for s in FULL_SCENARIOS if s.backlog]
    assert backlogged
    assert all(s.throttled and not s.contended and s.time_scale == 1.0 for s in backlogged)
    assert not any(s.backlog for s in QUICK_SCENARIOS)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backlog": Backlog(jobs=2, pods_per_job=10)}, "throttled scheduler"),
        (
            {"backlog": Backlog(jobs=3, pods_per_job=100), "scheduler_pods_per_second": 60.0},
            "exceed the 204 pod slots",
        ),
    ],
)
def test_scenario_rejects_a_backlog_that_cannot_queue_or_fit(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Scenario("x", jobs=2, pods_per_job=8, pools=2, **kwargs)


@pytest.mark.parametrize(("jobs", "pods"), [(0, 5), (2, 0)])
def test_backlog_rejects_empty_shapes(jobs: int, pods: int) -> None:
    with pytest.raises(ValueError, match="backlog"):
        Backlog(jobs=jobs, pods_per_job=pods)


def test_backlog_jobs_are_plain_cpu_only_batch_jobs() -> None:
    jobs = backlog_jobs(Backlog(jobs=3, pods_per_job=50), namespace="bl")
    assert [j["metadata"]["name"] for j in jobs] == ["backlog-0", "backlog-1", "backlog-2"]
    for job in jobs:
        assert job["metadata"]["namespace"] == "bl"
        assert (job["spec"]["parallelism"], job["spec"]["completions"]) == (50, 50)
        assert "completionMode" not in job["spec"]  # NonIndexed: not an exclusive-placement workload
        template = job["spec"]["template"]
        assert "metadata" not in template  # no strategy annotation, nothing for the webhook to place
        (container,) = template["spec"]["containers"]
        assert set(container["resources"]["requests"]) == {"cpu"}  # no GPU: the pools stay free


def test_backlog_namespace_stays_a_valid_name() -> None:
    assert backlog_namespace("bench-x-gate") == "bench-x-gate-backlog"
    assert len(backlog_namespace("n" * 63)) == 63


def test_backlog_tracker_counts_queued_pods() -> None:
    def bare(name: str, node: str = "") -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"nodeName": node} if node else {}}

    async def scenario() -> BacklogTracker:
        tracker = BacklogTracker(expected_pods=3)
        tracker.observe("ADDED", bare("a"))
        tracker.observe("ADDED", bare("b"))
        tracker.observe("MODIFIED", bare("a", "n1"))
        assert not tracker.all_created.is_set()
        tracker.observe("ADDED", bare("c"))
        tracker.observe("DELETED", bare("d"))  # a deletion is not a created pod
        return tracker

    tracker = asyncio.run(scenario())
    assert tracker.all_created.is_set()
    assert (len(tracker.created), len(tracker.bound), tracker.pending) == (3, 1, 2)


def test_contended_scenario_needs_pods_that_finish() -> None:
    with pytest.raises(ValueError, match="pod_run_seconds"):
        Scenario("x", jobs=4, pods_per_job=2, pools=2)


def test_jobset_carries_the_strategy_on_the_job_template() -> None:
    manifest = jobset_manifest(QUICK_SCENARIOS[0], "gate", name="b", namespace="ns")
    rjob = manifest["spec"]["replicatedJobs"][0]
    assert rjob["replicas"] == 4
    assert rjob["template"]["spec"]["template"]["metadata"]["annotations"] == {STRATEGY_ANNOTATION: "gate"}
    assert rjob["template"]["spec"]["completions"] == rjob["template"]["spec"]["parallelism"] == 8


def test_result_has_the_issue_fields_and_leader_waits() -> None:
    result = result_from_stats(STATS, 1.23456, 0, [0.5, 1.0, 2.0])
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
        "scheduler_attempts": 45,
        "leader_wait_mean_seconds": 1.167,
        "leader_wait_max_seconds": 2.0,
        "api_requests_by_verb_resource": {"create pods": 39, "patch jobs": 4},
    }
    assert result_from_stats(STATS, 1.0, 0)["leader_wait_max_seconds"] is None


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


def test_recorder_times_each_leader_from_creation_to_bind() -> None:
    now = [100.0]
    recorder = PodRecorder({"n1": "a"}, expected_pods=4, clock=lambda: now[0])
    recorder.observe("ADDED", pod("j1", 0, "", "Pending"))
    now[0] = 101.0
    recorder.observe("ADDED", pod("j2", 0, "", "Pending"))
    recorder.observe("ADDED", pod("j1", 1, "", "Pending"))
    assert recorder.leader_waits == {}
    now[0] = 103.5
    recorder.observe("MODIFIED", pod("j1", 0, "n1", "Pending"))
    now[0] = 110.0
    recorder.observe("MODIFIED", pod("j1", 0, "n1", "Running"))  # a later event does not move the bind
    assert recorder.leader_waits == {"ns/j1-0": 3.5}  # followers and unbound leaders are not timed


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
    assert "| `elastic` | 7 | 32 | 100 | 40 | 80 | 4 | 3 | 500 | 60 | n/a | 2.00 | 0 |" in rows[0]
    assert "FAILED: timeout" in rows[1]
    assert failures(REPORT) == ["4x8/gate: timeout"]
    assert "Behind a backlog" not in table
    scenario = {"jobs": 2, "pods_per_job": 2, "pools": 2, "contended": False, "backlog_pods": 800}
    footer = markdown_table({"time_scale": 1.0, "scenarios": [{**scenario, "results": {}}]})
    assert "Behind a backlog: the JobSet is created once every backlog pod exists" in footer


def test_outputs_written(tmp_path: Path) -> None:
    paths = write_outputs(REPORT, tmp_path)
    assert json.loads((tmp_path / "strategies.json").read_text()) == REPORT
    pngs = [p for p in paths if p.suffix == ".png"]
    assert sorted(p.name for p in pngs) == [
        "api_requests_vs_gate.png",
        "api_writes.png",
        "rejected_creates.png",
        "time_to_running.png",
    ]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_dispatcher_rejects_unknown_benchmarks(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["nope"]) == 2
    assert "choose one of: strategies, webhook, resizer, soak" in capsys.readouterr().err
    assert bench_main(["strategies", "--strategies", "spread"]) == 2
