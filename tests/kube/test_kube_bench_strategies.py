"""`python -m bench strategies --control-plane kube --quick --out DIR`: the contract of the strategy
comparison on the real control plane (issue 21) — `DIR/strategies.json` says which control plane and which
component versions, and JobSet and each strategy have the per-result fields of the kubesim comparison —
and the invariants any run must hold (never timings).

One quick run (4x8, every contender on one stack: about a minute and a half here) in the module's fixture.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.contenders import CONTENDERS, for_scenario
from bench.strategies import main
from devstack.controlplane.versions import pinned_versions

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-bench"), pytest.mark.timeout(420)]

CONTRACT_FIELDS = (
    "pod_creates_rejected",
    "api_requests",
    "api_writes",
    "admission_calls",
    "wasted_requests",
    "seconds_to_all_running",
    "leader_bind_to_all_running_seconds_p50",
    "exclusive_violations",
    "jobset_webhook_calls",
    "jobset_webhook_denied",
)
PROJECT_POD_WEBHOOK_CALLS_PER_POD = 3
"""Mutating (twice: reinvoked after JobSet's mutating webhook) and validating."""


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out: Path = tmp_path_factory.mktemp("bench-kube")
    code = main(["--control-plane", "kube", "--quick", "--out", str(out), "--no-plots"])
    report: dict[str, Any] = json.loads((out / "strategies.json").read_text())
    report["exit_code"] = code
    report["outputs"] = sorted(p.name for p in out.iterdir())
    return report


def test_the_report_names_the_real_control_plane_and_its_versions(quick_report: dict[str, Any]) -> None:
    assert quick_report["exit_code"] == 0
    assert quick_report["outputs"] == ["strategies.json", "strategies.md"]
    assert quick_report["control_plane"] == "kube"
    assert quick_report["versions"] == pinned_versions().as_dict()
    assert {"kube-apiserver", "jobset", "kwok", "etcd"} <= quick_report["versions"].keys()


def test_jobset_and_every_strategy_have_the_per_result_fields(quick_report: dict[str, Any]) -> None:
    expected = [c.key for c in for_scenario(CONTENDERS, gang=False)]
    for scenario in quick_report["scenarios"]:
        assert list(scenario["results"]) == expected
        for key, result in scenario["results"].items():
            missing = [field for field in CONTRACT_FIELDS if result.get(field) is None]
            assert not missing, f"{scenario['name']}/{key} lacks {missing}: {result}"


def test_the_counters_are_the_real_components(quick_report: dict[str, Any]) -> None:
    for scenario in quick_report["scenarios"]:
        pods = scenario["jobs"] * scenario["pods_per_job"]
        for key, result in scenario["results"].items():
            assert result["exclusive_violations"] == 0, key
            assert result["pod_creates_accepted"] == pods, key
            assert result["api_requests_by_client"]["kwok"] == pods, key  # one status patch per pod
            assert result["api_requests_by_verb_resource"]["create pods/binding"] == pods, key
            assert result["api_writes"] <= result["api_requests"], key
            assert "watch" not in " ".join(result["api_requests_by_verb_resource"]), key
            # JobSet's pod webhooks see every pod creation (their objectSelector matches all of them)
            assert result["jobset_webhook_calls"] == 2 * (pods + result["pod_creates_rejected"]), key


def test_jobset_alone_places_its_namespace_and_the_strategies_never_reject(
    quick_report: dict[str, Any],
) -> None:
    for scenario in quick_report["scenarios"]:
        pods = scenario["jobs"] * scenario["pods_per_job"]
        jobset = scenario["results"]["jobset"]
        assert (jobset["admission_calls"], jobset["resizer_requests"]) == (0, 0)
        assert jobset["pod_creates_rejected"] == jobset["jobset_webhook_denied"]
        assert jobset["wasted_rejected_creates"] == jobset["pod_creates_rejected"]
        for key, result in scenario["results"].items():
            if key == "jobset":
                continue
            assert result["pod_creates_rejected"] == 0, key
            assert result["jobset_webhook_denied"] == 0, key  # the takeover: JobSet's webhooks pass them
            pod_calls = PROJECT_POD_WEBHOOK_CALLS_PER_POD * pods
            # one Job mutation per Job, one JobSet validation per JobSet
            assert result["admission_calls"] == pod_calls + scenario["jobs"] + scenario["jobsets"], key
        assert scenario["results"]["elastic"]["job_patches"] == scenario["jobs"]  # one resize patch per Job
