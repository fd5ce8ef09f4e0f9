"""`python -m bench strategies --control-plane kube --kueue --quick --out DIR`: the comparison next to Kueue
end to end (issue 31, item 4) — JobSets queued at once through each run's LocalQueue, admitted by Kueue one
at a time, Kueue's requests and webhook calls counted apart — and the invariants any run must hold (never
timings).

One quick run in the module's fixture (2 JobSets of 2 Jobs x 4 pods, pods running 10 s; jobset, gate and
elastic once each on one stack with Kueue).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.audit import KUEUE_CLIENT
from bench.queued import KUEUE_HEADLINE_METRICS
from bench.strategies import main
from tests.support.once import once_per_session

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-bench-kueue"), pytest.mark.timeout(900)]


def run_kueue_bench(out: Path) -> dict[str, Any]:
    code = main(["--control-plane", "kube", "--kueue", "--quick", "--out", str(out), "--no-plots"])
    report: dict[str, Any] = json.loads((out / "strategies.json").read_text())
    report["exit_code"] = code
    report["markdown"] = (out / "strategies.md").read_text()
    return report


@pytest.fixture(scope="module")
def kueue_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return once_per_session(tmp_path_factory, "bench-kueue", run_kueue_bench)


def runs(report: dict[str, Any]) -> list[tuple[dict[str, Any], str, dict[str, Any]]]:
    return [
        (scenario, key, run)
        for scenario in report["scenarios"]
        for key, result in scenario["results"].items()
        for run in result["runs"]
    ]


def test_every_contender_ran_the_kueue_scenario_without_a_problem(kueue_report: dict[str, Any]) -> None:
    assert kueue_report["exit_code"] == 0
    assert "kueue" in kueue_report["versions"]
    [scenario] = kueue_report["scenarios"]
    assert scenario["kueue"]
    assert list(scenario["results"]) == ["jobset", "gate", "elastic"]
    for key, result in scenario["results"].items():
        assert (result["succeeded_runs"], result.get("errors"), result.get("problems")) == (1, None, None), (
            key
        )
    assert set(scenario["elastic_vs_jobset"]) == {key for key, _ in KUEUE_HEADLINE_METRICS}
    assert "Under Kueue `elastic` is elastic" in kueue_report["markdown"]


def test_kueue_admitted_the_jobsets_one_at_a_time_and_each_completed(kueue_report: dict[str, Any]) -> None:
    for scenario, key, run in runs(kueue_report):
        jobsets = scenario["jobsets"]
        assert (run["jobsets_admitted"], run["jobsets_completed"]) == (jobsets, jobsets), key
        assert run["max_jobsets_admitted_at_once"] == 1, key
        assert run["kueue_evictions"] == 0, key
        assert run["seconds_to_all_complete"] > scenario["pod_run_seconds"] * jobsets, key
        assert run["exclusive_violations"] == 0, key
        pods = jobsets * scenario["jobs"] * scenario["pods_per_job"]
        assert run["pod_creates_accepted"] == pods, key
        assert run["api_requests_by_verb_resource"]["create pods/binding"] == pods, key


def test_kueues_requests_and_webhook_calls_are_counted_apart(kueue_report: dict[str, Any]) -> None:
    for scenario, key, run in runs(kueue_report):
        jobsets = scenario["jobsets"]
        # Kueue's manager makes one Workload per JobSet, as its ServiceAccount in the audit log; a create it
        # retries because its cache had not seen its own Workload yet is answered 409 and makes none
        created = run["api_requests_by_client_verb_resource_code"].get(f"{KUEUE_CLIENT} create workloads 201")
        assert created == jobsets, key
        assert run["api_requests_by_client"][KUEUE_CLIENT] == run["kueue_requests"], key
        assert run["api_requests_without_kueue"] + run["kueue_requests"] == run["api_requests"], key
        in_namespace = run["api_requests_in_namespace_without_kueue"] + run["kueue_requests_in_namespace"]
        assert in_namespace == run["api_requests_in_namespace"], key
        # each JobSet creation goes through Kueue's JobSet webhooks (defaulting and validation), each child
        # Job's through its Job webhooks; none of them counts as either project's
        assert run["kueue_webhook_calls"] >= 2 * (jobsets + jobsets * scenario["jobs"]), key
        by_webhook = run["admission_calls_by_webhook"]
        kueue_calls = sum(n for name, n in by_webhook.items() if name.startswith("kueue-"))
        assert kueue_calls == run["kueue_webhook_calls"], key
        # Kueue's JobSet webhooks and JobSet's own, apart (upstream names both mjobset.kb.io)
        assert min(by_webhook["kueue-mjobset.kb.io"], by_webhook["mjobset.kb.io"]) >= jobsets, key


def test_elastic_is_resized_under_kueue_and_jobset_stays_alone(kueue_report: dict[str, Any]) -> None:
    for scenario, key, run in runs(kueue_report):
        jobs = scenario["jobsets"] * scenario["jobs"]
        assert run["elastic_fallback_jobs"] == 0, key
        calls = run["api_requests_by_client_verb_resource_code"]
        job_patches = sum(
            n for call, n in calls.items() if call.startswith("exclusive-placement-resizer patch jobs ")
        )
        # elastic: each child Job resized once its leader bound (Kueue never checks child Jobs), and on the
        # policy path its pin-followers label retired once it finished; no other contender's Jobs are patched
        if key == "elastic":
            assert jobs <= job_patches <= 2 * jobs, key
        else:
            assert job_patches == 0, key
        if key == "jobset":
            assert (run["admission_calls"], run["resizer_requests"]) == (0, 0)
