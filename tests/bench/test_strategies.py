"""`python -m bench strategies --quick` end to end: invariants every strategy must hold and the fields the
report must carry (never timings)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from bench.contenders import CONTENDERS, GANG_CONTENDER_KEYS, for_scenario
from bench.strategies import main

# The quick benchmark (~3 minutes by design, longer on a busy machine) runs in the first test's fixture.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

ISSUE_FIELDS = (
    "pod_creates_rejected",
    "api_requests",
    "api_writes",
    "admission_calls",
    "wasted_requests",
    "leader_bind_to_all_running_seconds_p50",
    "leader_bind_to_all_running_seconds_p99",
    "jobset_webhook_calls",
    "jobset_webhook_denied",
    "seconds_to_all_running",
    "exclusive_violations",
)


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench")
    code = main(["--quick", "--out", str(out)])
    report: dict[str, Any] = json.loads((out / "strategies.json").read_text())
    report["exit_code"] = code
    report["outputs"] = sorted(p.name for p in out.iterdir())
    return report


def results(report: dict[str, Any]) -> list[tuple[dict[str, Any], str, dict[str, Any]]]:
    """Every strategy's result in the scenarios where every pod runs (not the gang one: a deadlock)."""
    return [
        (sc, strategy, result)
        for sc in report["scenarios"]
        if not sc["gang"]
        for strategy, result in sc["results"].items()
    ]


def without_preemption(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The scenarios whose counters cover one JobSet whose pods all run (the preemption one's also count a
    restarted low JobSet's pods and Job patches; the gang one's several JobSets that may deadlock)."""
    return [sc for sc in report["scenarios"] if not sc["preemption"] and not sc["gang"]]


def gang(report: dict[str, Any]) -> dict[str, Any]:
    scenarios: list[dict[str, Any]] = [sc for sc in report["scenarios"] if sc["gang"]]
    (scenario,) = scenarios
    return scenario


def preemption(report: dict[str, Any]) -> dict[str, Any]:
    scenarios: list[dict[str, Any]] = [sc for sc in report["scenarios"] if sc["preemption"]]
    (scenario,) = scenarios
    return scenario


def long_wait(report: dict[str, Any]) -> dict[str, Any]:
    long_waits: list[dict[str, Any]] = [sc for sc in report["scenarios"] if sc["long_wait"]]
    (scenario,) = long_waits
    return scenario


def test_every_strategy_ran_in_every_scenario_with_every_field(quick_report: dict[str, Any]) -> None:
    assert quick_report["exit_code"] == 0
    assert quick_report["outputs"] == [
        "api_requests_vs_jobset.png",
        "api_writes.png",
        "gang_domains_gang-3x3-quick.png",
        "leader_bind_to_running.png",
        "rejected_creates.png",
        "strategies.json",
        "strategies.md",
        "time_to_running.png",
        "wasted_requests.png",
    ]
    assert {sc["contended"] for sc in quick_report["scenarios"]} == {False, True}
    for scenario in quick_report["scenarios"]:
        expected = [c.key for c in for_scenario(CONTENDERS, gang=scenario["gang"])]
        assert list(scenario["results"]) == expected
        assert isinstance(scenario["jobset_webhooks"], bool)
        for strategy, result in scenario["results"].items():
            assert "error" not in result, f"{scenario['name']}/{strategy}: {result['error']}"
            assert "problems" not in result, f"{scenario['name']}/{strategy}: {result['problems']}"
        if scenario["gang"]:
            continue  # its own test below: a deadlock leaves pods that never run
        for strategy, result in scenario["results"].items():
            missing = [key for key in ISSUE_FIELDS if result.get(key) is None]
            assert not missing, (scenario["name"], strategy, missing)
            assert result["jobs_timed"] == scenario["jobs"], (scenario["name"], strategy)
            p50 = result["leader_bind_to_all_running_seconds_p50"]
            assert p50 <= result["leader_bind_to_all_running_seconds_p99"]
        for baseline in ("elastic_vs_jobset", "elastic_vs_gate"):
            assert set(scenario[baseline]) >= {"api_requests_in_namespace", "wasted_requests"}
        for result in scenario["results"].values():
            assert 0 < result["api_requests_in_namespace"] <= result["api_requests"]


def test_every_pod_ran_each_job_whole_in_its_own_pool(quick_report: dict[str, Any]) -> None:
    for scenario, strategy, result in results(quick_report):
        pods = scenario["jobs"] * scenario["pods_per_job"]
        assert result["exclusive_violations"] == 0, (scenario["name"], strategy)
        # seconds_to_all_running is recorded only once every (Job, index) has been seen Running.
        assert result["seconds_to_all_running"] > 0
        assert result["pod_creates_accepted"] >= pods, (scenario["name"], strategy)


@pytest.mark.parametrize("strategy", ["elastic", "scheduling-gate"])
def test_no_rejected_pod_creations_and_no_waste(quick_report: dict[str, Any], strategy: str) -> None:
    for scenario in without_preemption(quick_report):
        result = scenario["results"][strategy]
        assert (result["pod_creates_rejected"], result["wasted_requests"]) == (0, 0), scenario["name"]


def test_the_jobset_baseline_is_jobset_alone(quick_report: dict[str, Any]) -> None:
    for scenario in quick_report["scenarios"]:
        if scenario["gang"]:
            continue
        baseline = scenario["results"]["jobset"]
        assert baseline["jobset_webhooks"] is True
        # JobSet's webhooks admitted every pod; this project's webhook saw no request from that namespace
        # and the resizer made none.
        assert baseline["jobset_webhook_calls"] >= 2 * scenario["jobs"] * (scenario["pods_per_job"] - 1)
        assert (baseline["admission_calls"], baseline["webhook_lookups"], baseline["resizer_requests"]) == (
            0,
            0,
            0,
        )


def test_rejecting_strategies_waste_requests_while_leaders_wait(quick_report: dict[str, Any]) -> None:
    scenario = long_wait(quick_report)
    jobset, gate = scenario["results"]["jobset"], scenario["results"]["gate"]
    assert jobset["jobset_webhook_denied"] > 0
    assert jobset["pod_creates_rejected"] == jobset["jobset_webhook_denied"]  # JobSet's vpod denied them all
    assert jobset["wasted_requests"] == jobset["pod_creates_rejected"] + jobset["wasted_event_writes"]
    assert jobset["wasted_webhook_lookups"] == 0  # JobSet reads its cache only
    assert gate["pod_creates_rejected"] > 0
    # gate's webhook looked the leader up live in both calls of (nearly) every rejected creation
    assert gate["pod_creates_rejected"] < gate["wasted_webhook_lookups"] <= 2 * gate["pod_creates_rejected"]
    for result in (jobset, gate):
        assert result["wasted_event_writes"] > 0
        assert result["wasted_requests_per_waiting_job_minute"] > 0
    assert scenario["results"]["elastic"]["wasted_requests_per_waiting_job_minute"] == 0


def test_long_wait_jobs_wait_about_a_pod_run_per_wave(quick_report: dict[str, Any]) -> None:
    scenario = long_wait(quick_report)
    waiting_jobs = scenario["jobs"] - scenario["pools"]
    floor = 0.8 * waiting_jobs * scenario["pod_run_seconds"] / 60
    for strategy, result in scenario["results"].items():
        assert result["waiting_job_minutes"] >= floor, strategy
    assert scenario["waiting_job_minutes"] >= floor


def test_elastic_pays_exactly_one_job_patch_per_job(quick_report: dict[str, Any]) -> None:
    for scenario in without_preemption(quick_report):
        patches = {strategy: result["job_patches"] for strategy, result in scenario["results"].items()}
        others = dict.fromkeys(set(patches) - {"elastic"}, 0)
        assert patches == {"elastic": scenario["jobs"], **others}, scenario["name"]


def test_throttled_scenario_ran_at_time_scale_one(quick_report: dict[str, Any]) -> None:
    throttled = [sc for sc in quick_report["scenarios"] if sc["scheduler_pods_per_second"]]
    assert [(sc["scheduler_pods_per_second"], sc["time_scale"]) for sc in throttled] == [(60.0, 1.0)]
    for strategy, result in throttled[0]["results"].items():
        pods = throttled[0]["jobs"] * throttled[0]["pods_per_job"]
        assert result["scheduler_attempts"] >= pods, strategy
        assert result["leader_wait_max_seconds"] is not None, strategy


def test_a_high_priority_jobset_preempts_its_way_in_under_every_strategy(
    quick_report: dict[str, Any],
) -> None:
    scenario = preemption(quick_report)
    assert list(scenario["results"]) == [c.key for c in for_scenario(CONTENDERS, gang=False)]
    pods = scenario["jobs"] * scenario["pods_per_job"]
    for strategy, result in scenario["results"].items():
        assert result["high_priority_all_running"] is True, (strategy, result)
        assert result["high_priority_pods_running"] == pods, strategy
        assert result["exclusive_violations"] == 0, strategy
        # Every pool was full: at least one low-priority pod per high-priority Job had to go.
        assert result["pods_preempted"] >= scenario["jobs"], strategy
        assert result["low_priority_restarts"] >= 1, strategy
        assert result["low_priority_state"] in ("restarted-waiting", "failed"), strategy


GANG_FIELDS = (
    "jobsets_completed",
    "max_partially_placed_jobsets",
    "partial_domain_seconds",
    "seconds_to_all_complete",
    "exclusive_violations",
    "domain_timeline",
)


def test_gang_jobsets_race_for_pools_and_the_run_ends_by_the_deadline(quick_report: dict[str, Any]) -> None:
    scenario = gang(quick_report)
    assert list(scenario["results"]) == [c.key for c in CONTENDERS if c.key in GANG_CONTENDER_KEYS]
    pools = {f"pool-{i:02d}" for i in range(scenario["pools"])}
    all_or_nothing = {c.key for c in CONTENDERS if c.all_or_nothing}
    for strategy, result in scenario["results"].items():
        assert set(GANG_FIELDS) <= set(result), strategy
        assert result["exclusive_violations"] == 0, strategy
        completed = result["jobsets_completed"]
        assert completed <= scenario["jobsets"], strategy
        if strategy in all_or_nothing:
            # Never two JobSets partly placed, so the head of the queue always gets all its pools and runs
            # to completion; how many follow it by the (simulated) deadline depends on the machine's load.
            assert result["max_partially_placed_jobsets"] == 1, strategy
            assert completed >= 1, strategy
        assert (result["seconds_to_all_complete"] is None) == (completed < scenario["jobsets"]), strategy
        if result["seconds_to_all_complete"] is not None:
            assert result["seconds_to_all_complete"] <= result["deadline_seconds"], strategy
        # The JobSets hold pools before all of their pods run: every run passes through partial placement.
        assert 1 <= result["max_partially_placed_jobsets"] <= scenario["jobsets"], strategy
        assert result["partial_domain_seconds"] > 0, strategy
        timeline = result["domain_timeline"]
        assert {h["domain"] for h in timeline} <= pools, strategy
        # Exclusive: one JobSet at a time per pool.
        for first, second in itertools.pairwise(timeline):
            if first["domain"] == second["domain"] and first["jobset"] != second["jobset"]:
                assert first["to"] <= second["from"], (strategy, first, second)
