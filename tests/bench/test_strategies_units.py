"""Pure parts of the strategy benchmark: scenarios, records, checks, the report."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.__main__ import main as bench_main
from bench.apiserver_profile import ProfiledCounters, ProfileTarget
from bench.contenders import BY_KEY, CONTENDER_KEYS, JOBSET, contenders, placement_problems
from bench.counters import AdmissionCalls, SchedulerCounts, StoredEvent, WindowCounts
from bench.measures import (
    MAX_FAILED_CREATE_MESSAGES,
    JobTimeline,
    failed_create_messages,
    failed_scheduling_messages,
    nearest_rank,
    per_job_fields,
)
from bench.recorder import BacklogTracker, PodRecorder
from bench.repeats import aggregate
from bench.report import markdown_table, scenario_label, write_outputs
from bench.scenarios import (
    FULL_SCENARIOS,
    LONG_WAIT_SCENARIOS,
    MIN_LONG_WAIT_SECONDS,
    QUICK_SCENARIOS,
    TOPOLOGY_KEY,
    Backlog,
    Scenario,
    backlog_pods,
    jobset_manifest,
    scenarios_named,
)
from bench.strategies import (
    WARM_UP,
    backlog_namespace,
    baseline_problems,
    build_parser,
    exempt_namespaces,
    failures,
    fresh_stack_per_strategy,
    long_wait_fields,
    low_priority_namespace,
    profiled,
    result_from_counts,
    run_namespace,
    turns,
    warm_up_contenders,
)
from devstack.controlplane.audit import Request
from placement.constants import JOB_KEY_LABEL, RESIZE_LABEL, ROLE_LABEL, STRATEGY_ANNOTATION, Strategy
from tests.bench.bench_support import START, repeated, request, window_counts
from tests.support.builders import make_job, make_pod

WEBHOOK = "exclusive-placement-webhook"
RESIZER = "exclusive-placement-resizer"
FAILED_CREATE = StoredEvent("FailedCreate", "Job", "bench-w-0")
REQUESTS = [
    *repeated(4, "job-controller", "patch", "jobs"),
    *repeated(32, "job-controller", "create", "pods", code=201),
    *repeated(7, "job-controller", "create", "pods", code=403),
    *repeated(6, "job-controller", "patch", "events", name="bench-w-0.1"),
    *repeated(3, "job-controller", "patch", "pods", namespace="ns-backlog"),
    *repeated(15, WEBHOOK, "list", "pods"),
    request(WEBHOOK, "get", "nodes", namespace=""),
    *repeated(2, WEBHOOK, "watch", "pods"),
    request(RESIZER, "watch", "jobs"),
    *repeated(9, RESIZER, "update", "leases", namespace="exclusive-placement"),
]
COUNTS = window_counts(
    REQUESTS,
    events={("ns", "bench-w-0.1"): FAILED_CREATE},
    admission=AdmissionCalls(80, 0, 0, 0, 1, {"pods.mutate.exclusive-placement.io": 80}),
    scheduler=SchedulerCounts(45, 5, 0, 0, {"PodAdd": 40}),
    apiserver_cpu_seconds=3.5,
    admission_policy_seconds={"ep-pods": 0.5, "ep-pod-followers": 0.25},
)


def test_issue_scenarios_are_covered() -> None:
    shapes = {(s.jobs, s.pods_per_job) for s in FULL_SCENARIOS if not s.contended}
    assert {(4, 8), (32, 32)} <= shapes
    # 64x64 is over make bench's budget: it runs by name
    assert [(s.jobs, s.pods_per_job) for s in scenarios_named(["64x64"])] == [(64, 64)]
    assert not any(s.name == "64x64" for s in FULL_SCENARIOS)
    assert any(s.contended and not s.long_wait for s in FULL_SCENARIOS)
    assert not any(s.long_wait for s in FULL_SCENARIOS + QUICK_SCENARIOS)  # --long-wait adds it
    for scenario in FULL_SCENARIOS + LONG_WAIT_SCENARIOS:
        assert scenario.nodes * 8 >= scenario.pools * scenario.pods_per_job  # a pool holds a whole Job


def test_the_long_wait_is_sized_for_real_minutes() -> None:
    (long_wait,) = LONG_WAIT_SCENARIOS
    assert (long_wait.jobs, long_wait.pods_per_job, long_wait.pools) == (4, 4, 2)
    assert long_wait.pod_run_seconds == 240.0  # the second wave waits ~4 minutes, past the 60 s backoff cap
    assert long_wait.long_wait
    assert long_wait.contended


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pools": 8}, "a long wait needs more Jobs than pools"),
        ({"pod_run_seconds": MIN_LONG_WAIT_SECONDS - 1}, "run at least 120 s"),
    ],
)
def test_long_wait_scenario_validation(kwargs: dict[str, Any], message: str) -> None:
    shape: dict[str, Any] = {"jobs": 8, "pods_per_job": 4, "pools": 2, "pod_run_seconds": 240.0}
    Scenario("ok", **shape, long_wait=True)
    with pytest.raises(ValueError, match=message):
        Scenario("x", **{**shape, **kwargs}, long_wait=True)


def test_large_scenarios_run_each_strategy_on_a_fresh_stack() -> None:
    by_name = {s.name: s for s in FULL_SCENARIOS + QUICK_SCENARIOS}
    assert fresh_stack_per_strategy(by_name["32x32"])  # 1,024 pods
    assert fresh_stack_per_strategy(by_name["backlog-16x16"])  # 256 pods behind 800
    assert not fresh_stack_per_strategy(by_name["contended-16x8-on-4"])  # 128 pods
    assert not fresh_stack_per_strategy(by_name["4x8"])
    assert not fresh_stack_per_strategy(Scenario("edge", jobs=25, pods_per_job=8, pools=25))  # 200
    assert fresh_stack_per_strategy(Scenario("over", jobs=67, pods_per_job=3, pools=67))  # 201


def test_repeated_runs_take_turns_so_that_run_i_of_each_contender_is_a_pair() -> None:
    order = [(turn.contender.key, turn.repetition) for turn in turns(contenders(["jobset", "elastic"]), 3)]
    assert order == [
        ("jobset", 1),
        ("elastic", 1),
        ("jobset", 2),
        ("elastic", 2),
        ("jobset", 3),
        ("elastic", 3),
    ]


def test_each_contender_warms_the_stack_once_before_its_first_run() -> None:
    batch = turns(contenders(["jobset", "elastic", "affinity"]), 3)
    assert [c.key for c in warm_up_contenders(batch)] == ["jobset", "elastic", "affinity"]
    one_run = turns(contenders(["elastic"]), 1)
    assert [c.key for c in warm_up_contenders(one_run)] == ["elastic"]
    assert (WARM_UP.jobs, WARM_UP.pods_per_job, WARM_UP.total_pods) == (1, 2, 2)  # a leader and a follower


def test_jobsets_warm_up_namespace_is_exempt_like_its_measured_ones() -> None:
    scenario = QUICK_SCENARIOS[0]
    batch = turns(contenders(["jobset", "elastic"]), 2)
    measured = ["bench-4x8-jobset-r1", "bench-4x8-jobset-r2"]
    assert exempt_namespaces(scenario, batch, warm_up=True) == [*measured, "bench-warm-up-jobset-r1"]
    assert exempt_namespaces(scenario, batch, warm_up=False) == measured
    elastic_only = turns(contenders(["elastic"]), 2)
    assert exempt_namespaces(scenario, elastic_only, warm_up=True) == []


def test_the_warm_up_is_on_unless_turned_off() -> None:
    assert build_parser().parse_args([]).warm_up
    assert not build_parser().parse_args(["--no-warm-up"]).warm_up


def test_kube_apiserver_is_profiled_only_when_asked_into_one_file_stem_per_run(tmp_path: Path) -> None:
    assert build_parser().parse_args([]).profile_apiserver is None
    assert build_parser().parse_args(["--profile-apiserver", str(tmp_path)]).profile_apiserver == tmp_path
    counters = FakeWindowCounters()
    scenario, elastic = QUICK_SCENARIOS[0], BY_KEY["elastic"]
    assert profiled(counters, None, scenario, elastic, 2) is counters
    wrapped = profiled(counters, tmp_path, scenario, elastic, 2)
    assert isinstance(wrapped, ProfiledCounters)
    assert wrapped.target == ProfileTarget(tmp_path, "4x8-elastic-2")


class FakeWindowCounters:
    async def reset(self, http: httpx.AsyncClient) -> None:
        raise AssertionError("not opened in this test")

    async def snapshot(self, http: httpx.AsyncClient, namespaces: Sequence[str]) -> WindowCounts:
        raise AssertionError("not closed in this test")


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


def test_run_namespaces_are_per_scenario_strategy_and_run_and_valid_names() -> None:
    assert run_namespace(QUICK_SCENARIOS[0], JOBSET) == "bench-4x8-jobset-r1"
    assert run_namespace(QUICK_SCENARIOS[0], BY_KEY["elastic"], 3) == "bench-4x8-elastic-r3"
    long_name = Scenario("L" * 70, jobs=2, pods_per_job=2, pools=2)
    runs = {run_namespace(long_name, BY_KEY["scheduling-gate"], r) for r in (1, 2, 12)}
    assert len(runs) == 3  # the run number survives the cut
    for namespace in runs:
        for derived in (namespace, backlog_namespace(namespace), low_priority_namespace(namespace)):
            assert len(derived) <= 63
            assert derived == derived.lower()
            assert not derived.endswith("-")


@pytest.mark.parametrize(
    ("scenario", "label"),
    [
        ({"jobs": 4, "pods_per_job": 8, "pools": 4, "contended": False}, "4x8 on 4 pools"),
        ({"jobs": 6, "pods_per_job": 4, "pools": 2, "contended": True}, "6x4 on 2 pools, contended"),
        (
            {"jobs": 16, "pods_per_job": 16, "pools": 16, "contended": False, "backlog_pods": 1200},
            "16x16 on 16 pools, behind a backlog of 1,200 pods",
        ),
        (
            {
                "jobs": 4,
                "pods_per_job": 4,
                "pools": 2,
                "contended": True,
                "long_wait": True,
                "pod_run_seconds": 240.0,
            },
            "4x4 on 2 pools, long wait (pods run 4 min)",
        ),
    ],
)
def test_scenario_label(scenario: dict[str, Any], label: str) -> None:
    assert scenario_label(scenario) == label


def test_the_backlog_scenario_is_in_the_full_bench_only() -> None:
    backlogged = [s for s in FULL_SCENARIOS if s.backlog]
    assert backlogged
    assert all(not s.contended for s in backlogged)  # leaders wait for the scheduler, not for capacity
    assert not any(s.backlog for s in QUICK_SCENARIOS)


def test_scenario_rejects_a_backlog_that_cannot_fit() -> None:
    with pytest.raises(ValueError, match="exceed the 204 pod slots"):
        Scenario("x", jobs=2, pods_per_job=8, pools=2, backlog=Backlog(jobs=3, pods_per_job=100))


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


def test_backlog_namespace_is_the_runs_with_a_suffix() -> None:
    assert backlog_namespace("bench-x-gate-r1") == "bench-x-gate-r1-backlog"


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
    result = result_from_counts(COUNTS, 1.23456, 0, namespace="ns")
    assert result == {
        "pod_creates_rejected": 7,
        "pod_creates_accepted": 32,
        "pod_creates_rejected_by_code": {"403": 7},
        "api_requests": 68,  # watches and Leases are background
        "api_writes": 52,
        "api_requests_in_namespace": 64,  # not the backlog's, not the node lookup
        "api_writes_in_namespace": 49,
        "admission_calls": 80,
        "jobset_webhook_calls": 0,
        "jobset_webhook_denied": 0,
        "jobset_object_webhook_calls": 1,
        "all_webhook_calls": 80,
        "admission_calls_by_webhook": {"pods.mutate.exclusive-placement.io": 80},
        "apiserver_cpu_seconds": 3.5,
        "admission_policy_seconds": 0.75,
        "admission_policy_seconds_by_policy": {"ep-pods": 0.5, "ep-pod-followers": 0.25},
        # 7 rejected + 6 FailedCreate event writes + min(2 x 7, 16 webhook GET/LISTs)
        "wasted_requests": 27,
        "wasted_rejected_creates": 7,
        "wasted_event_writes": 6,
        "wasted_webhook_lookups": 14,
        "webhook_lookups": 16,
        "resizer_requests": 0,  # its watches and its Lease are not requests the workload made
        "job_patches": 4,
        "job_create_attempts": 0,
        "pod_patches": 3,
        "seconds_to_all_running": 1.235,
        "exclusive_violations": 0,
        "scheduler_attempts": 45,
        "scheduler_unschedulable": 5,
        "scheduler_queue_moves_by_event": {"PodAdd": 40},
        "event_writes_by_reason": {"FailedCreate": 6},
        "api_requests_by_verb_resource": {
            "create pods": 39,
            "get nodes": 1,
            "list pods": 15,
            "patch events": 6,
            "patch jobs": 4,
            "patch pods": 3,
        },
        "api_requests_by_client": {"exclusive-placement-webhook": 16, "job-controller": 52},
        "api_requests_by_client_verb_resource_code": {
            "exclusive-placement-webhook get nodes 200": 1,
            "exclusive-placement-webhook list pods 200": 15,
            "job-controller create pods 201": 32,
            "job-controller create pods 403": 7,
            "job-controller patch events 200": 6,
            "job-controller patch jobs 200": 4,
            "job-controller patch pods 200": 3,
        },
        "background_requests": {"leases": 9, "watch": 3},
        "window_seconds": 1800.0,
    }


def counts_with(
    *,
    rejected: int = 0,
    failed_create_writes: int = 0,
    webhook: dict[str, int] | None = None,
    resizer: dict[str, int] | None = None,
    jobset: tuple[int, int] = (0, 0),
    admission_calls: int = 0,
) -> Any:
    requests: list[Request] = [
        *repeated(rejected, "job-controller", "create", "pods", code=403),
        *repeated(failed_create_writes, "job-controller", "patch", "events", name="failed"),
        *repeated(9, "job-controller", "create", "events", name="started"),
    ]
    for client, calls in ((WEBHOOK, webhook or {}), (RESIZER, resizer or {})):
        for verb_resource, n in calls.items():
            verb, resource = verb_resource.split(" ")
            requests += repeated(n, client, verb, resource)
    return window_counts(
        requests,
        events={("ns", "failed"): FAILED_CREATE, ("ns", "started"): StoredEvent("Started", "Pod", "p")},
        admission=AdmissionCalls(admission_calls, 0, jobset[0], jobset[1], 0, {}),
    )


@pytest.mark.parametrize(
    ("counts", "parts"),
    [
        # JobSet: denied by its webhook; no lookups (it reads its cache only)
        (counts_with(rejected=120, failed_create_writes=95, jobset=(300, 120)), (120, 95, 0)),
        # gate: two live lookups per rejection, plus two for a follower admitted on a lagging cache
        (counts_with(rejected=70, failed_create_writes=70, webhook={"list pods": 142}), (70, 70, 140)),
        # fewer lookups than two per rejection (some found the leader in the cache): all of them count
        (
            counts_with(rejected=10, failed_create_writes=10, webhook={"list pods": 12, "get nodes": 1}),
            (10, 10, 13),
        ),
        # lookups without any rejection (scheduling-gate's gated followers) are not waste
        (counts_with(webhook={"list pods": 40, "watch pods": 1}), (0, 0, 0)),
        # the spam filter dropped events: only the writes that happened count
        (counts_with(rejected=60, failed_create_writes=26), (60, 26, 0)),
    ],
)
def test_wasted_requests_are_attributed_by_cause(counts: Any, parts: tuple[int, int, int]) -> None:
    result = result_from_counts(counts, 1.0, 0, namespace="ns")
    got = (result["wasted_rejected_creates"], result["wasted_event_writes"], result["wasted_webhook_lookups"])
    assert got == parts
    assert result["wasted_requests"] == sum(parts)


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        (counts_with(jobset=(300, 120)), []),
        (counts_with(), ["JobSet's pod webhooks were never called: the baseline is not JobSet"]),
        (counts_with(jobset=(10, 0), admission_calls=4), ["this project's webhook was called 4 times"]),
        (counts_with(jobset=(10, 0), resizer={"watch jobs": 1}), []),
        (
            counts_with(jobset=(10, 0), resizer={"get jobs": 2, "patch jobs": 1}),
            ["the resizer made 3 requests"],
        ),
    ],
)
def test_the_baseline_is_jobset_alone(counts: Any, expected: list[str]) -> None:
    result = result_from_counts(counts, 1.0, 0, namespace="ns")
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
        "ns/j1": JobTimeline(
            leader_created=100.0,
            leader_bound=103.5,
            created={"0": 100.0, "1": 101.0},
            running={"0": 105.5, "1": 106.0},
        ),
        "ns/j2": JobTimeline(leader_created=101.0, created={"0": 101.0}),
    }


def timeline(
    created: float | None,
    bound: float | None,
    running: dict[str, float],
    followers: dict[str, float] | None = None,
) -> JobTimeline:
    return JobTimeline(leader_created=created, leader_bound=bound, created=followers or {}, running=running)


@pytest.mark.parametrize(
    ("job_timeline", "pods_per_job", "wait", "span"),
    [
        (timeline(100.0, 103.5, {"0": 105.5, "1": 106.0}), 2, 3.5, 2.5),
        (timeline(100.0, 103.5, {"0": 105.5}), 2, 3.5, None),  # a follower never ran
        (timeline(100.0, None, {}), 2, None, None),
        (timeline(None, 103.0, {"0": 104.0}), 1, None, 1.0),  # leader seen first already bound
        # a follower that ran before its leader bound (affinity) does not shorten the span
        (timeline(100.0, 103.0, {"0": 105.0, "1": 102.0}), 2, 3.0, 2.0),
    ],
)
def test_job_timeline_figures(
    job_timeline: JobTimeline, pods_per_job: int, wait: float | None, span: float | None
) -> None:
    assert job_timeline.leader_wait == wait
    assert job_timeline.bind_to_all_running(pods_per_job) == span


@pytest.mark.parametrize(
    ("created", "bound", "expected"),
    [
        ({"0": 100.0, "1": 104.5, "2": 105.0}, 103.0, 2.0),  # created after the bind (rejected, resized)
        ({"0": 100.0, "1": 100.1, "2": 100.2}, 103.0, -2.8),  # created gated, before the bind
        ({"0": 100.0, "1": 104.5}, 103.0, None),  # a follower not created yet
        ({"0": 100.0, "1": 101.0, "2": 101.0}, None, None),  # the leader never bound
    ],
)
def test_leader_bind_to_last_follower_created(
    created: dict[str, float], bound: float | None, expected: float | None
) -> None:
    value = timeline(100.0, bound, {}, created).bind_to_last_follower_created(3)
    assert value == (None if expected is None else pytest.approx(expected))


def test_a_follower_rejected_after_its_leaders_bind_and_created_late_is_the_cache_race() -> None:
    """Three Jobs whose leaders bound at 10 s (on the recorder's clock, whose 0 is the window's start):
    `raced` had a follower rejected at 11 s and its followers came at 14 s (its backoff); `prompt` had one
    rejected before the bind only, followers at 11 s; `slow` was rejected after the bind too, but its
    followers came within the first retry."""
    timelines = {
        "ns/raced": timeline(0.0, 10.0, {}, {"0": 0.0, "1": 14.0}),
        "ns/prompt": timeline(0.0, 10.0, {}, {"0": 0.0, "1": 11.0}),
        "ns/slow": timeline(0.0, 10.0, {}, {"0": 0.0, "1": 11.5}),
    }

    def failed(job: str, at: float) -> Request:
        return request("job-controller", "patch", "events", name=f"{job}.e", at=at)

    counts = window_counts(
        [failed("raced", 5.0), failed("raced", 11.0), failed("prompt", 5.0), failed("slow", 10.5)],
        events={
            ("ns", f"{job}.e"): StoredEvent("FailedCreate", "Job", job) for job in ("raced", "prompt", "slow")
        },
    )
    fields = per_job_fields(timelines, 2, counts, start=0.0)
    assert fields["jobs_delayed_by_cache_race"] == 1
    assert fields["jobs"]["ns/raced"] == {
        "leader_wait_seconds": 10.0,
        "leader_bind_to_last_follower_created_seconds": 4.0,
        "follower_creates_rejected_after_leader_bound": 1,
    }
    assert fields["jobs"]["ns/prompt"]["follower_creates_rejected_after_leader_bound"] == 0
    assert fields["jobs"]["ns/slow"]["follower_creates_rejected_after_leader_bound"] == 1
    assert START.tzinfo is not None


def result_of(counts: Any, seconds: float) -> dict[str, Any]:
    return result_from_counts(counts, seconds, 0, namespace="ns")


REPORT: dict[str, Any] = {
    "repeat": 2,
    "scenarios": [
        {
            "name": "4x8",
            "jobs": 4,
            "pods_per_job": 8,
            "pools": 4,
            "contended": False,
            "results": {
                "elastic": aggregate([result_of(COUNTS, 2.0), result_of(COUNTS, 3.0)]),
                "gate": aggregate([{"error": "timeout"}, {"error": "timeout"}]),
            },
            "elastic_vs_jobset": {
                "api_requests_in_namespace": {
                    "median": 0.5,
                    "min": 0.4,
                    "max": 0.6,
                    "pairs": 2,
                    "verdict": "lower",
                },
                "seconds_to_all_running": {
                    "median": 0.95,
                    "min": 0.9,
                    "max": 1.1,
                    "pairs": 2,
                    "verdict": "tie",
                },
            },
            "elastic_vs_gate": {},
        }
    ],
}


def test_markdown_table_and_failures() -> None:
    table = markdown_table(REPORT)
    rows = [line for line in table.splitlines() if line.startswith("| 4x8")]
    assert len(rows) == 5  # two in the main table, two in the waste table, one ratios row (gate failed)
    main_row = (
        "| `elastic` | 7 | 27 | 68 | 64 | 52 | 80 | 0 | 0 | 4 | 3 | 45 | 3.50 | 0.75 | n/a | n/a | n/a "
        "| 2.50 (2.00-3.00) | 0 |"
    )
    assert main_row in rows[0]
    assert "FAILED: run 1: timeout; run 2: timeout" in rows[1]
    assert "| `elastic` | 7 | 6 | 14 | 27 | n/a | n/a |" in rows[2]
    assert (
        rows[4]
        == "| 4x8 on 4 pools | 0.50 (0.40-0.60) lower | n/a | n/a | n/a | n/a | 0.95 (0.90-1.10) tie | n/a |"
    )
    assert "Each figure is the median of 2 runs per contender" in table
    assert "elastic / jobset" in table
    assert "elastic / gate" not in table  # no scenario has that ratio: no table of n/a
    assert failures(REPORT) == ["4x8/gate: run 1: timeout", "4x8/gate: run 2: timeout"]
    assert "Behind a backlog" not in table
    scenario = {"jobs": 2, "pods_per_job": 2, "pools": 2, "contended": False, "backlog_pods": 800}
    footer = markdown_table({"repeat": 1, "scenarios": [{**scenario, "results": {}}]})
    assert "Behind a backlog: the JobSet is created once every backlog pod exists" in footer
    assert "Each figure is one run." in footer


def test_the_long_wait_tables_list_every_job_of_every_run() -> None:
    run = {**result_of(COUNTS, 250.0), "jobs_delayed_by_cache_race": 1, "waiting_job_minutes": 8.0}
    run.update(long_wait_fields(run))
    run["jobs"] = {
        "ns/bench-w-2": {
            "leader_wait_seconds": 241.0,
            "leader_bind_to_last_follower_created_seconds": 9.5,
            "follower_creates_rejected_after_leader_bound": 1,
        }
    }
    scenario = {
        "jobs": 4,
        "pods_per_job": 4,
        "pools": 2,
        "contended": True,
        "long_wait": True,
        "pod_run_seconds": 240.0,
        "results": {"jobset": aggregate([run])},
    }
    table = markdown_table({"repeat": 1, "scenarios": [scenario]})
    assert (
        "| 4x4 on 2 pools, long wait (pods run 4 min) | `jobset` | 1 | bench-w-2 | 241.00 | 9.50 | 1 |"
        in table
    )
    assert "| 4x4 on 2 pools, long wait (pods run 4 min) | `jobset` | 8.00 | 3.38 | n/a | n/a | 1 |" in table


def test_outputs_written(tmp_path: Path) -> None:
    report = {
        **REPORT,
        "scenarios": [
            {
                **REPORT["scenarios"][0],
                "results": {
                    "jobset": aggregate([result_of(COUNTS, 1.0), result_of(COUNTS, 1.5)]),
                    "elastic": aggregate([result_of(COUNTS, 2.0), result_of(COUNTS, 3.0)]),
                },
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
    assert bench_main(["compare"]) == 2  # bench compare is gone with kubesim
    capsys.readouterr()
    assert bench_main(["strategies", "--strategies", "spread"]) == 2
    assert "unknown strategies ['spread']; valid: jobset, gate, elastic" in capsys.readouterr().err
    assert bench_main(["strategies", "--scenario", "4x8", "--scenario", "128x128"]) == 2
    assert "unknown scenarios ['128x128']; known: 4x8, contended-16x8-on-4" in capsys.readouterr().err
    assert bench_main(["strategies", "--repeat", "0"]) == 2
    assert "--repeat must be 1 to 20" in capsys.readouterr().err
    assert bench_main(["strategies", "--quick", "--scenario", "4x8"]) == 2
    assert "not with --quick, --long-wait or --kueue" in capsys.readouterr().err
    assert bench_main(["strategies", "--kueue", "--scenario", "4x8"]) == 2
    assert "not with --quick, --long-wait or --kueue" in capsys.readouterr().err
    assert bench_main(["strategies", "--kueue", "--long-wait"]) == 2
    assert "--kueue runs the Kueue scenario alone: not with --long-wait" in capsys.readouterr().err


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


def test_failed_scheduling_is_told_by_the_schedulers_message_and_its_series() -> None:
    taint = "0/4 nodes are available: 4 node(s) had untolerated taint {node.kubernetes.io/not-ready: }."
    events: list[dict[str, Any]] = [
        {"reason": "FailedScheduling", "message": taint, "count": 2},
        {"reason": "FailedScheduling", "note": taint, "series": {"count": 3}},  # events.k8s.io
        {"reason": "Scheduled", "message": "Successfully assigned ns/p to n1"},
    ]
    assert failed_scheduling_messages(events) == {taint: 5}


def test_the_resizers_workload_requests_are_its_patches_and_events_not_its_watches_or_lease() -> None:
    resizer = {"watch pods": 2, "get leases": 30, "update leases": 30, "patch jobs": 4, "create events": 4}
    assert result_of(counts_with(resizer=resizer), 1.0)["resizer_requests"] == 8
