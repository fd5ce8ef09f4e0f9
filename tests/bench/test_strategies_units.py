"""Pure parts of the strategy benchmark: scenarios, records, checks, the report."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import main as bench_main
from bench.contenders import BY_KEY, CONTENDER_KEYS, JOBSET, contenders, placement_problems
from bench.measures import (
    HEADLINE_METRICS,
    MAX_FAILED_CREATE_MESSAGES,
    JobTimeline,
    failed_create_messages,
    headline_ratios,
    nearest_rank,
)
from bench.recorder import BacklogTracker, PodRecorder
from bench.report import markdown_table, scenario_label, write_outputs
from bench.scenarios import (
    FULL_SCENARIOS,
    MIN_REAL_POD_SECONDS,
    QUICK_SCENARIOS,
    TOPOLOGY_KEY,
    Backlog,
    Scenario,
    backlog_pods,
    jobset_manifest,
    scenarios_named,
)
from bench.strategies import (
    RunSettings,
    backlog_namespace,
    baseline_problems,
    cluster_flags,
    failures,
    fresh_stack_per_strategy,
    long_wait_fields,
    result_from_stats,
    run_namespace,
)
from devstack.commands import kubesim_command
from placement.constants import JOB_KEY_LABEL, RESIZE_LABEL, ROLE_LABEL, STRATEGY_ANNOTATION, Strategy
from tests.support.builders import make_job, make_pod

STATS = {
    "requests": {
        "total": 100,
        "writes": 40,
        "by_verb_resource": {"patch jobs": 4, "create pods": 39},
        "by_client": {"job-controller": 43, "external:exclusive-placement-webhook": 16},
        "by_namespace": {"ns": {"total": 90, "writes": 38}, "ns-backlog": {"total": 5, "writes": 2}},
        "by_client_verb_resource": {
            "job-controller": {"patch jobs": 4, "create pods": 39},
            "external:exclusive-placement-webhook": {"list pods": 15, "get nodes": 1, "watch pods": 2},
            "external:exclusive-placement-resizer": {
                "watch jobs": 1,
                "watch pods": 2,
                "get leases": 9,
                "update leases": 9,
            },
        },
    },
    "pods": {"create_accepted": 32, "create_rejected": 7, "patched": 3},
    "jobs": {"patched": 4},
    "events": {"writes_by_reason": {"FailedCreate": 6, "Scheduled": 32}},
    "admission": {"calls": 80},
    "jobset_webhooks": {"calls": 0, "denied": 0},
    "scheduler": {"attempts": 45, "filter_evaluations": 500, "affinity_evaluations": 60},
}
SETTINGS = RunSettings(time_scale=0.1, run_timeout=60)


def test_issue_scenarios_are_covered() -> None:
    shapes = {(s.jobs, s.pods_per_job) for s in FULL_SCENARIOS if not s.contended}
    assert (4, 8) in shapes
    # 64x64 is over make bench's 15-minute budget: it runs by name
    assert [(s.jobs, s.pods_per_job) for s in scenarios_named(["64x64"])] == [(64, 64)]
    assert not any(s.name == "64x64" for s in FULL_SCENARIOS)
    assert any(s.contended and not s.long_wait for s in FULL_SCENARIOS)
    for scenarios in (FULL_SCENARIOS, QUICK_SCENARIOS):
        assert any(s.long_wait for s in scenarios)
        assert all(s.jobset_webhooks for s in scenarios)  # a real JobSet install in every scenario
    for scenario in FULL_SCENARIOS + QUICK_SCENARIOS:
        assert scenario.nodes * 8 >= scenario.pools * scenario.pods_per_job  # a pool holds a whole Job


@pytest.mark.parametrize("scenarios", [FULL_SCENARIOS, QUICK_SCENARIOS])
def test_long_wait_scenarios_wait_minutes_at_a_compressed_time_scale(scenarios: tuple[Scenario, ...]) -> None:
    (long_wait,) = [s for s in scenarios if s.long_wait]
    assert long_wait.jobs >= 2 * long_wait.pools  # at least one wave waits a whole pod run
    assert long_wait.pod_run_seconds is not None
    assert long_wait.pod_run_seconds >= 600  # ten simulated minutes or more: beyond the 60 s backoff cap
    flags = cluster_flags(long_wait, SETTINGS, jobset_webhooks=True)
    assert flags.time_scale == long_wait.time_scale
    assert flags.time_scale <= 0.01
    waves = long_wait.jobs / long_wait.pools
    assert waves * long_wait.pod_run_seconds * flags.time_scale <= 40  # real seconds of waves per run
    assert long_wait.pod_run_seconds * flags.time_scale >= MIN_REAL_POD_SECONDS
    # Few Jobs wait at once: each one's retries must fit inside the backoff cap in real time (docstring).
    assert long_wait.jobs - long_wait.pools <= 8


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pools": 8}, "a long wait needs more Jobs than pools"),
        ({"time_scale": None}, "needs its own time scale"),
        ({"time_scale": 0.001}, "at least 5 real seconds"),  # 1,200 simulated seconds = 1.2 real
    ],
)
def test_long_wait_scenario_validation(kwargs: dict[str, Any], message: str) -> None:
    shape: dict[str, Any] = {"jobs": 8, "pods_per_job": 4, "pools": 2, "pod_run_seconds": 1200.0}
    Scenario("ok", **shape, time_scale=0.005, long_wait=True)
    with pytest.raises(ValueError, match=message):
        Scenario("x", **{**shape, "time_scale": 0.005, **kwargs}, long_wait=True)


@pytest.mark.parametrize("scenarios", [FULL_SCENARIOS, QUICK_SCENARIOS])
def test_a_throttled_scheduler_scenario_runs_in_real_time(scenarios: tuple[Scenario, ...]) -> None:
    throttled = [s for s in scenarios if s.throttled]
    assert throttled
    for scenario in throttled:
        assert not scenario.contended  # leaders wait for the scheduler, not for capacity
        flags = cluster_flags(scenario, SETTINGS, jobset_webhooks=True)
        assert flags.time_scale == 1.0
        argv = kubesim_command(flags, port=0, kubeconfig=Path("kc"))
        assert argv[argv.index("--scheduler-pods-per-second") + 1] == "60.0"
    plain = cluster_flags(FULL_SCENARIOS[0], SETTINGS, jobset_webhooks=False)
    assert plain.time_scale == 0.1
    argv = kubesim_command(plain, port=0, kubeconfig=Path("kc"))
    assert "--scheduler-pods-per-second" not in argv
    assert argv[argv.index("--jobset-webhooks") + 1] == "false"
    on = kubesim_command(
        cluster_flags(FULL_SCENARIOS[0], SETTINGS, jobset_webhooks=True), port=0, kubeconfig=Path("kc")
    )
    assert "--jobset-webhooks" not in on  # kubesim's default: JobSet's webhooks on


def test_large_scenarios_run_each_strategy_on_a_fresh_stack() -> None:
    by_name = {s.name: s for s in FULL_SCENARIOS + QUICK_SCENARIOS}
    assert fresh_stack_per_strategy(by_name["throttled-32x32"])  # 1,024 pods
    assert fresh_stack_per_strategy(by_name["backlog-16x16"])  # 256 pods behind 800
    assert not fresh_stack_per_strategy(by_name["contended-16x8-on-4"])  # 128 pods
    assert not fresh_stack_per_strategy(by_name["throttled-4x8"])
    assert not fresh_stack_per_strategy(Scenario("edge", jobs=25, pods_per_job=8, pools=25))  # 200
    assert fresh_stack_per_strategy(Scenario("over", jobs=67, pods_per_job=3, pools=67))  # 201


def test_contenders_are_the_issue_keys_in_order() -> None:
    assert CONTENDER_KEYS == (
        "jobset",
        "gate",
        "elastic",
        "scheduling-gate",
        "affinity",
        "elastic+all-or-nothing",
        "scheduling-gate+all-or-nothing",
    )
    assert [c.key for c in contenders(["affinity", "jobset"])] == ["jobset", "affinity"]
    assert JOBSET.strategy is None
    assert not JOBSET.uses_project_webhooks
    assert [c.key for c in contenders(CONTENDER_KEYS) if c.resized] == ["elastic", "elastic+all-or-nothing"]
    for bad in (["spread"], []):
        with pytest.raises(ValueError, match="unknown strategies"):
            contenders(bad)


def test_run_namespaces_are_per_scenario_and_strategy_and_valid_names() -> None:
    assert run_namespace(QUICK_SCENARIOS[0], JOBSET) == "bench-throttled-4x8-jobset"
    long_name = Scenario("L" * 70, jobs=2, pods_per_job=2, pools=2)
    assert len(run_namespace(long_name, BY_KEY["scheduling-gate"])) == 63


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scheduler_pods_per_second": 0}, "scheduler_pods_per_second"),
        ({"time_scale": -1}, "time_scale"),
    ],
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
        (
            {
                "jobs": 48,
                "pods_per_job": 8,
                "pools": 8,
                "contended": True,
                "long_wait": True,
                "pod_run_seconds": 1200.0,
                "time_scale": 0.005,
            },
            "48x8 on 8 pools, long wait (pods run 20 min), time scale 0.005",
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


def test_backlog_pods_are_plain_cpu_only_bare_pods() -> None:
    pods = backlog_pods(Backlog(jobs=3, pods_per_job=2), namespace="bl")
    assert [p["metadata"]["name"] for p in pods] == [
        "backlog-0-0",
        "backlog-0-1",
        "backlog-1-0",
        "backlog-1-1",
        "backlog-2-0",
        "backlog-2-1",
    ]
    for pod in pods:
        assert pod["kind"] == "Pod"
        assert pod["metadata"]["namespace"] == "bl"
        assert "ownerReferences" not in pod["metadata"]  # created by the bench, not the Job controller
        assert (
            "annotations" not in pod["metadata"]
        )  # no strategy annotation, nothing for the webhook to place
        (container,) = pod["spec"]["containers"]
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
    manifest = jobset_manifest(QUICK_SCENARIOS[0], Strategy.GATE, name="b", namespace="ns")
    rjob = manifest["spec"]["replicatedJobs"][0]
    assert rjob["replicas"] == 4
    assert rjob["template"]["spec"]["template"]["metadata"]["annotations"] == {STRATEGY_ANNOTATION: "gate"}
    assert rjob["template"]["spec"]["completions"] == rjob["template"]["spec"]["parallelism"] == 8


def test_the_jobset_baseline_submits_jobsets_own_annotation_only() -> None:
    manifest = jobset_manifest(QUICK_SCENARIOS[0], JOBSET.strategy, name="b", namespace="ns")
    assert manifest["metadata"]["annotations"] == {
        "alpha.jobset.sigs.k8s.io/exclusive-topology": TOPOLOGY_KEY
    }
    template = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert STRATEGY_ANNOTATION not in (template.get("metadata") or {}).get("annotations", {})


def test_result_has_the_issue_fields_and_the_waste_by_cause() -> None:
    result = result_from_stats(STATS, 1.23456, 0, namespace="ns")
    assert result == {
        "pod_creates_rejected": 7,
        "pod_creates_accepted": 32,
        "api_requests": 100,
        "api_writes": 40,
        "api_requests_in_namespace": 90,
        "api_writes_in_namespace": 38,
        "admission_calls": 80,
        "jobset_webhook_calls": 0,
        "jobset_webhook_denied": 0,
        "all_webhook_calls": 80,
        # 7 rejected + 6 FailedCreate event writes + min(2 x 7, 16 webhook GET/LISTs)
        "wasted_requests": 27,
        "wasted_rejected_creates": 7,
        "wasted_event_writes": 6,
        "wasted_webhook_lookups": 14,
        "webhook_lookups": 16,
        "resizer_requests": 0,  # its watches and its Lease are not requests the workload made
        "job_patches": 4,
        "pod_patches": 3,
        "scheduler_filter_evaluations": 500,
        "scheduler_affinity_evaluations": 60,
        "seconds_to_all_running": 1.235,
        "exclusive_violations": 0,
        "scheduler_attempts": 45,
        "api_requests_by_verb_resource": {"create pods": 39, "patch jobs": 4},
        "api_requests_by_client": {"external:exclusive-placement-webhook": 16, "job-controller": 43},
        "api_requests_by_client_verb_resource": {
            "external:exclusive-placement-resizer": {
                "watch jobs": 1,
                "watch pods": 2,
                "get leases": 9,
                "update leases": 9,
            },
            "external:exclusive-placement-webhook": {"get nodes": 1, "list pods": 15, "watch pods": 2},
            "job-controller": {"create pods": 39, "patch jobs": 4},
        },
    }


def stats_with(
    *,
    rejected: int = 0,
    failed_create_writes: int = 0,
    webhook: dict[str, int] | None = None,
    resizer: dict[str, int] | None = None,
    jobset: tuple[int, int] = (0, 0),
    admission_calls: int = 0,
) -> dict[str, Any]:
    clients = {
        "external:exclusive-placement-webhook": webhook or {},
        "external:exclusive-placement-resizer": resizer or {},
    }
    return {
        "requests": {"total": 1, "writes": 1, "by_client_verb_resource": clients},
        "pods": {"create_accepted": 1, "create_rejected": rejected, "patched": 0},
        "jobs": {"patched": 0},
        "events": {"writes_by_reason": {"FailedCreate": failed_create_writes, "Started": 9}},
        "admission": {"calls": admission_calls},
        "jobset_webhooks": {"calls": jobset[0], "denied": jobset[1]},
        "scheduler": {"filter_evaluations": 0, "affinity_evaluations": 0},
    }


@pytest.mark.parametrize(
    ("stats", "parts"),
    [
        # JobSet: denied by its in-process webhook; no lookups (it reads its cache only)
        (stats_with(rejected=120, failed_create_writes=95, jobset=(300, 120)), (120, 95, 0)),
        # gate: two live lookups per rejection, plus two for a follower admitted on a lagging cache
        (stats_with(rejected=70, failed_create_writes=70, webhook={"list pods": 142}), (70, 70, 140)),
        # fewer lookups than two per rejection (some found the leader in the cache): all of them count
        (
            stats_with(rejected=10, failed_create_writes=10, webhook={"list pods": 12, "get nodes": 1}),
            (10, 10, 13),
        ),
        # lookups without any rejection (scheduling-gate's gated followers) are not waste
        (stats_with(webhook={"list pods": 40, "watch pods": 1}), (0, 0, 0)),
        # the spam filter dropped events: only the writes that happened count
        (stats_with(rejected=60, failed_create_writes=26), (60, 26, 0)),
    ],
)
def test_wasted_requests_are_attributed_by_cause(stats: dict[str, Any], parts: tuple[int, int, int]) -> None:
    result = result_from_stats(stats, 1.0, 0, namespace="ns")
    got = (result["wasted_rejected_creates"], result["wasted_event_writes"], result["wasted_webhook_lookups"])
    assert got == parts
    assert result["wasted_requests"] == sum(parts)


@pytest.mark.parametrize(
    ("stats", "expected"),
    [
        (stats_with(jobset=(300, 120)), []),
        (stats_with(), ["JobSet's pod webhooks were never called: the baseline is not JobSet"]),
        (stats_with(jobset=(10, 0), admission_calls=4), ["this project's webhook was called 4 times"]),
        (stats_with(jobset=(10, 0), resizer={"watch jobs": 1}), []),
        (
            stats_with(jobset=(10, 0), resizer={"get jobs": 2, "patch jobs": 1}),
            ["the resizer made 3 requests"],
        ),
    ],
)
def test_the_baseline_is_jobset_alone(stats: dict[str, Any], expected: list[str]) -> None:
    result = result_from_stats(stats, 1.0, 0, namespace="ns")
    assert baseline_problems(JOBSET, result) == expected
    assert baseline_problems(BY_KEY["gate"], result) == []  # only the baseline must be left alone


@pytest.mark.parametrize(
    ("wasted", "minutes", "per_minute"),
    [(245, 68.24, 3.59), (0, 70.0, 0.0), (12, 0.0, None)],
)
def test_wasted_requests_per_waiting_job_minute(
    wasted: int, minutes: float, per_minute: float | None
) -> None:
    assert long_wait_fields({"wasted_requests": wasted, "waiting_job_minutes": minutes}) == {
        "wasted_requests_per_waiting_job_minute": per_minute
    }


def job(name: str, resize: str | None) -> dict[str, Any]:
    built = make_job(name)
    return (built.label(RESIZE_LABEL, resize) if resize else built).obj()


@pytest.mark.parametrize(
    ("strategy", "jobs", "count"),
    [
        ("elastic", [job("a", "done"), job("b", "done")], 0),
        ("elastic", [job("a", "done"), job("b", "pending")], 1),
        ("gate", [job("a", None), job("b", None)], 0),
        ("gate", [job("a", "done"), job("b", None)], 1),
        ("gate", [job("a", None)], 1),
        ("jobset", [job("a", None), job("b", "pending")], 1),
    ],
)
def test_placement_problems_of_jobs(strategy: str, jobs: list[dict[str, Any]], count: int) -> None:
    problems = placement_problems(BY_KEY[strategy], jobs, [], expected_jobs=2, topology_key=TOPOLOGY_KEY)
    assert len(problems) == count


def pod_of(index: int, spec: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    built = make_pod(f"p-{index}").index(index).spec(**spec)
    for key, value in (labels or {}).items():
        built.label(key, value)
    return built.obj()


PINNED: dict[str, Any] = {"nodeSelector": {TOPOLOGY_KEY: "pool-00"}}
ANTI: dict[str, Any] = {"affinity": {"podAntiAffinity": {}, "podAffinity": {}}}
OURS = {ROLE_LABEL: "follower", JOB_KEY_LABEL: "k"}


@pytest.mark.parametrize(
    ("strategy", "pod", "count"),
    [
        ("elastic", pod_of(1, PINNED, OURS), 0),
        ("scheduling-gate", pod_of(1, PINNED, OURS), 0),
        ("gate", pod_of(1, {}, OURS), 1),
        ("gate", pod_of(1, {**PINNED, **ANTI}, OURS), 1),
        ("affinity", pod_of(1, ANTI, OURS), 0),
        ("affinity", pod_of(1, PINNED, OURS), 1),
        ("gate", pod_of(0, ANTI, OURS), 0),  # the leader carries affinity under every strategy
        ("jobset", pod_of(1, PINNED), 0),  # JobSet's own webhook pins followers by nodeSelector
        ("jobset", pod_of(1, {}), 1),
        ("jobset", pod_of(0, ANTI, {ROLE_LABEL: "leader"}), 1),  # our webhook touched the exempt namespace
    ],
)
def test_placement_problems_of_pods(strategy: str, pod: dict[str, Any], count: int) -> None:
    jobs = [job("a", "done" if strategy == "elastic" else None)]
    problems = placement_problems(BY_KEY[strategy], jobs, [pod], expected_jobs=1, topology_key=TOPOLOGY_KEY)
    assert len(problems) == count, problems


def pod(job_name: str, index: int, node: str, phase: str) -> dict[str, Any]:
    return (
        make_pod(f"{job_name}-{index}", "ns").job_label(job_name).index(index).node(node).phase(phase).obj()
    )


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


def test_recorder_keeps_each_jobs_timeline() -> None:
    now = [100.0]
    recorder = PodRecorder({"n1": "a"}, expected_pods=4, clock=lambda: now[0])
    events = [
        (100.0, "ADDED", pod("j1", 0, "", "Pending")),
        (101.0, "ADDED", pod("j2", 0, "", "Pending")),
        (101.0, "ADDED", pod("j1", 1, "", "Pending")),  # a follower before its leader bound (gated)
        (103.5, "MODIFIED", pod("j1", 0, "n1", "Pending")),
        (104.0, "MODIFIED", pod("j1", 1, "n1", "Pending")),
        (105.5, "MODIFIED", pod("j1", 0, "n1", "Running")),
        (106.0, "MODIFIED", pod("j1", 1, "n1", "Running")),
        (107.0, "MODIFIED", pod("j1", 1, "n1", "Succeeded")),  # a later phase does not move its start
        (110.0, "DELETED", pod("j1", 0, "n1", "Running")),
    ]
    for at, kind, obj in events:
        now[0] = at
        recorder.observe(kind, obj)
    assert recorder.timelines == {
        "ns/j1": JobTimeline(leader_created=100.0, leader_bound=103.5, running={"0": 105.5, "1": 106.0}),
        "ns/j2": JobTimeline(leader_created=101.0),
    }


@pytest.mark.parametrize(
    ("timeline", "pods_per_job", "wait", "span"),
    [
        (JobTimeline(100.0, 103.5, {"0": 105.5, "1": 106.0}), 2, 3.5, 2.5),
        (JobTimeline(100.0, 103.5, {"0": 105.5}), 2, 3.5, None),  # a follower never ran
        (JobTimeline(100.0, None, {}), 2, None, None),
        (JobTimeline(None, 103.0, {"0": 104.0}), 1, None, 1.0),  # leader seen first already bound
        # a follower that ran before its leader bound (affinity) does not shorten the span
        (JobTimeline(100.0, 103.0, {"0": 105.0, "1": 102.0}), 2, 3.0, 2.0),
    ],
)
def test_job_timeline_figures(
    timeline: JobTimeline, pods_per_job: int, wait: float | None, span: float | None
) -> None:
    assert timeline.leader_wait == wait
    assert timeline.bind_to_all_running(pods_per_job) == span


REPORT: dict[str, Any] = {
    "time_scale": 0.1,
    "scenarios": [
        {
            "name": "4x8",
            "jobs": 4,
            "pods_per_job": 8,
            "pools": 4,
            "contended": False,
            "jobset_webhooks": False,
            "results": {
                "elastic": result_from_stats(STATS, 2.0, 0, namespace="ns"),
                "gate": {"error": "timeout"},
            },
            "elastic_vs_jobset": {"api_requests_in_namespace": 0.5},
            "elastic_vs_gate": {},
        }
    ],
}


def test_markdown_table_and_failures() -> None:
    table = markdown_table(REPORT)
    rows = [line for line in table.splitlines() if line.startswith("| 4x8")]
    assert len(rows) == 5  # two in the main table, two in the waste table, one ratios row (gate failed)
    main_row = (
        "| `elastic` | 7 | 27 | 100 | 90 | 40 | 80 | 0 | 0 | 4 | 3 | 500 | 60 | n/a | n/a | n/a | 2.00 | 0 |"
    )
    assert main_row in rows[0]
    assert "FAILED: timeout" in rows[1]
    assert "| `elastic` | 7 | 6 | 14 | 27 | n/a | n/a |" in rows[2]
    assert rows[4] == "| 4x8 on 4 pools | 0.50 | n/a | n/a | n/a | n/a | n/a |"
    assert "elastic / jobset" in table
    assert "elastic / gate" not in table  # no scenario has that ratio: no table of n/a
    assert failures(REPORT) == ["4x8/gate: timeout"]
    assert "Behind a backlog" not in table
    assert "In 1 of 1 scenarios JobSet's webhooks were on for the `jobset` baseline only" in table
    scenario = {"jobs": 2, "pods_per_job": 2, "pools": 2, "contended": False, "backlog_pods": 800}
    footer = markdown_table({"time_scale": 1.0, "scenarios": [{**scenario, "results": {}}]})
    assert "Behind a backlog: the JobSet is created once every backlog pod exists" in footer
    assert "JobSet's webhooks were on" not in footer


def test_outputs_written(tmp_path: Path) -> None:
    report = {
        **REPORT,
        "scenarios": [
            {
                **REPORT["scenarios"][0],
                "results": {"jobset": result_from_stats(STATS, 1.0, 0, namespace="ns")},
            }
        ],
    }
    paths = write_outputs(report, tmp_path)
    assert json.loads((tmp_path / "strategies.json").read_text()) == report
    pngs = [p for p in paths if p.suffix == ".png"]
    assert sorted(p.name for p in pngs) == [
        "api_requests_vs_jobset.png",
        "api_writes.png",
        "leader_bind_to_running.png",
        "rejected_creates.png",
        "time_to_running.png",
        "wasted_requests.png",
    ]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_dispatcher_rejects_unknown_benchmarks(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["nope"]) == 2
    assert "choose one of: strategies, webhook, resizer, soak" in capsys.readouterr().err
    assert bench_main(["strategies", "--strategies", "spread"]) == 2
    assert "unknown strategies ['spread']; valid: jobset, gate, elastic" in capsys.readouterr().err
    assert bench_main(["strategies", "--scenario", "4x8", "--scenario", "128x128"]) == 2
    assert "unknown scenarios ['128x128']; known: 4x8, contended-16x8-on-4" in capsys.readouterr().err


def test_scenarios_are_found_by_name_in_order() -> None:
    names = ["64x64", "long-wait-4x4-on-2", "4x8"]
    assert [s.name for s in scenarios_named(names)] == names
    with pytest.raises(ValueError, match="unknown scenarios"):
        scenarios_named([])


@pytest.mark.parametrize(
    ("values", "quantile", "expected"),
    [
        ([3.0, 1.0, 2.0, 4.0], 0.5, 2.0),
        ([3.0, 1.0, 2.0, 4.0], 0.99, 4.0),
        ([5.0], 0.5, 5.0),
        (list(map(float, range(1, 101))), 0.99, 99.0),
        ([], 0.5, None),
    ],
)
def test_nearest_rank_percentiles(values: list[float], quantile: float, expected: float | None) -> None:
    assert nearest_rank(values, quantile) == expected


def test_headline_ratios_compare_elastic_with_a_baseline() -> None:
    metrics = [key for key, _ in HEADLINE_METRICS]
    jobset = dict.fromkeys(metrics, 200.0) | {"wasted_requests": 40}
    elastic = dict.fromkeys(metrics, 150.0) | {"wasted_requests": 0}
    gate = dict.fromkeys(metrics, 0.0)
    results: dict[str, dict[str, Any]] = {
        "jobset": jobset,
        "elastic": elastic,
        "gate": gate,
        "broken": {"error": "x"},
    }
    ratios = headline_ratios(results, baseline="jobset")
    assert ratios == dict.fromkeys(metrics, 0.75) | {"wasted_requests": 0.0}
    assert set(headline_ratios(results, baseline="gate").values()) == {None}  # no ratio to a zero
    assert headline_ratios(results, baseline="broken") == {}
    assert headline_ratios(results, baseline="affinity") == {}


def test_failed_creates_are_told_by_their_message_most_frequent_first() -> None:
    def event(reason: str, message: str, count: int | None) -> dict[str, Any]:
        return {"reason": reason, "message": message, **({"count": count} if count else {})}

    denied = 'admission webhook "vpod.kb.io" denied the request: follower pod node selector not set'
    events = [
        event("FailedCreate", f"Error creating: {denied}", 5),
        event("FailedCreate", f"Error creating: {denied}", 2),
        event("FailedCreate", "Error creating: pods is forbidden: exceeded quota", None),
        event("SuccessfulCreate", "Created pod: bench-w-0-0", 1),
    ]
    assert failed_create_messages(events) == {denied: 7, "pods is forbidden: exceeded quota": 1}
    many = [event("FailedCreate", f"m{i}", i + 1) for i in range(MAX_FAILED_CREATE_MESSAGES + 3)]
    assert len(failed_create_messages(many)) == MAX_FAILED_CREATE_MESSAGES


def test_the_resizers_workload_requests_are_its_patches_and_events_not_its_watches_or_lease() -> None:
    resizer = {"watch pods": 2, "get leases": 30, "update leases": 30, "patch jobs": 4, "create events": 4}
    assert result_from_stats(stats_with(resizer=resizer), 1.0, 0, namespace="ns")["resizer_requests"] == 8
