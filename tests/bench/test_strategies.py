"""`python -m bench strategies --quick` end to end: invariants every strategy must hold (never timings)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.strategies import main
from placement.constants import STRATEGIES

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench")
    code = main(["--quick", "--out", str(out)])
    report: dict[str, Any] = json.loads((out / "strategies.json").read_text())
    report["exit_code"] = code
    report["outputs"] = sorted(p.name for p in out.iterdir())
    return report


def results(report: dict[str, Any]) -> list[tuple[dict[str, Any], str, dict[str, Any]]]:
    return [
        (sc, strategy, result) for sc in report["scenarios"] for strategy, result in sc["results"].items()
    ]


def test_every_strategy_ran_in_every_scenario(quick_report: dict[str, Any]) -> None:
    assert quick_report["exit_code"] == 0
    assert quick_report["outputs"] == [
        "api_requests_vs_gate.png",
        "api_writes.png",
        "rejected_creates.png",
        "strategies.json",
        "strategies.md",
        "time_to_running.png",
    ]
    assert {sc["contended"] for sc in quick_report["scenarios"]} == {False, True}
    for scenario in quick_report["scenarios"]:
        assert list(scenario["results"]) == list(STRATEGIES)
        for strategy, result in scenario["results"].items():
            assert "error" not in result, f"{scenario['name']}/{strategy}: {result['error']}"
            assert "problems" not in result, f"{scenario['name']}/{strategy}: {result['problems']}"


def test_every_pod_ran_each_job_whole_in_its_own_pool(quick_report: dict[str, Any]) -> None:
    for scenario, strategy, result in results(quick_report):
        pods = scenario["jobs"] * scenario["pods_per_job"]
        assert result["exclusive_violations"] == 0, (scenario["name"], strategy)
        # seconds_to_all_running is recorded only once every (Job, index) has been seen Running.
        assert result["seconds_to_all_running"] > 0
        assert result["pod_creates_accepted"] >= pods, (scenario["name"], strategy)


@pytest.mark.parametrize("strategy", ["elastic", "scheduling-gate"])
def test_no_rejected_pod_creations(quick_report: dict[str, Any], strategy: str) -> None:
    for scenario in quick_report["scenarios"]:
        assert scenario["results"][strategy]["pod_creates_rejected"] == 0, scenario["name"]


def test_gate_rejects_followers_when_leaders_wait_for_capacity(quick_report: dict[str, Any]) -> None:
    contended = [sc for sc in quick_report["scenarios"] if sc["contended"]]
    assert contended
    for scenario in contended:
        assert scenario["results"]["gate"]["pod_creates_rejected"] > 0


def test_elastic_pays_exactly_one_job_patch_per_job(quick_report: dict[str, Any]) -> None:
    for scenario in quick_report["scenarios"]:
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
