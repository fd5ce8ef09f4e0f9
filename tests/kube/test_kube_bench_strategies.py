"""`python -m bench strategies --control-plane kube --quick --repeat 3 --out DIR`: the contract of the
strategy comparison (issues 21 and 28) — `DIR/strategies.json` says which control plane and which
component versions, every figure of JobSet and each strategy has its median, min and max over the three
runs, every ratio its median and range over the paired runs — and the invariants any run must hold (never
timings).

One quick run in the module's fixture (4x8, every contender three times on one stack: 6 min 14 s and 8 min
56 s in two runs on a loaded 2-core machine, docs/results.md).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench.contenders import CONTENDERS, for_scenario
from bench.measures import HEADLINE_METRICS
from bench.repeats import Verdict, is_figure
from bench.strategies import main
from devstack.controlplane.versions import pinned_versions
from tests.support.once import once_per_session

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-bench"), pytest.mark.timeout(1200)]

REPEAT = 3
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
    "apiserver_cpu_seconds",
)
PROJECT_POD_WEBHOOK_CALLS_PER_POD = {"elastic": 0, "affinity": 0, "gate": 1, "scheduling-gate": 1}
"""On devstack's default path the chart's pod policies admit elastic and affinity pods inside kube-apiserver;
gate and scheduling-gate followers need a lookup: one mutating call (never re-invoked, validation in it)."""


def run_quick_bench(out: Path) -> dict[str, Any]:
    profiles = out.with_name("profiles")
    code = main(
        [
            *("--control-plane", "kube", "--quick", "--repeat", str(REPEAT)),
            *("--out", str(out), "--no-plots", "--profile-apiserver", str(profiles)),
        ]
    )
    report: dict[str, Any] = json.loads((out / "strategies.json").read_text())
    report["exit_code"] = code
    report["outputs"] = sorted(p.name for p in out.iterdir())
    report["profile_dir"] = str(profiles)
    return report


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return once_per_session(tmp_path_factory, "bench-kube", run_quick_bench)


def runs(report: dict[str, Any]) -> list[tuple[dict[str, Any], str, dict[str, Any]]]:
    """Every run of every contender: (scenario, contender key, the run's result)."""
    return [
        (scenario, key, run)
        for scenario in report["scenarios"]
        for key, result in scenario["results"].items()
        for run in result["runs"]
    ]


def test_the_report_names_the_real_control_plane_and_its_versions(quick_report: dict[str, Any]) -> None:
    assert quick_report["exit_code"] == 0
    assert quick_report["outputs"] == ["strategies.json", "strategies.md"]
    assert quick_report["control_plane"] == "kube"
    assert quick_report["repeat"] == REPEAT
    assert quick_report["versions"] == pinned_versions().as_dict()
    assert {"kube-apiserver", "jobset", "kwok", "etcd"} <= quick_report["versions"].keys()


def test_every_figure_has_its_median_min_and_max_over_the_runs(quick_report: dict[str, Any]) -> None:
    expected = [c.key for c in for_scenario(CONTENDERS, gang=False)]
    for scenario in quick_report["scenarios"]:
        assert list(scenario["results"]) == expected
        for key, result in scenario["results"].items():
            assert (result["repeats"], result["succeeded_runs"], len(result["runs"])) == (REPEAT,) * 3, key
            for name in CONTRACT_FIELDS:
                figure = result[name]
                assert is_figure(figure), f"{scenario['name']}/{key}: {name} is {figure!r}"
                values = [run[name] for run in result["runs"]]
                assert (figure["min"], figure["max"]) == (min(values), max(values)), name
                assert figure["min"] <= figure["median"] <= figure["max"], name


def test_every_ratio_has_its_median_and_range_over_the_paired_runs(quick_report: dict[str, Any]) -> None:
    for scenario in quick_report["scenarios"]:
        ratios = scenario["elastic_vs_jobset"]
        assert set(ratios) == {key for key, _ in HEADLINE_METRICS}
        for name, ratio in ratios.items():
            if ratio is None:  # the baseline's figure was 0 (no waste)
                assert name == "wasted_requests"
                continue
            # a pair whose baseline figure is 0 has no ratio (JobSet wasting nothing in one run)
            baselines = [run[name] for run in scenario["results"]["jobset"]["runs"]]
            assert ratio["pairs"] == sum(1 for value in baselines if value), name
            assert ratio["min"] <= ratio["median"] <= ratio["max"], name
            if ratio["pairs"] < 2:
                assert ratio["verdict"] == str(Verdict.ONE_RUN), (name, ratio)
                continue
            crosses = ratio["min"] <= 1.0 <= ratio["max"]
            assert (ratio["verdict"] == "tie") is crosses, (name, ratio)


def test_every_measured_window_has_kube_apiservers_cpu_profile(quick_report: dict[str, Any]) -> None:
    profiles = Path(quick_report["profile_dir"])
    expected = {
        f"{scenario['name']}-{key}-{repetition}.pb.gz"
        for scenario in quick_report["scenarios"]
        for key in scenario["results"]
        for repetition in range(1, REPEAT + 1)
    }
    merged = {p.name for p in profiles.glob("*.pb.gz") if p.name.count(".") == 2}
    assert merged == expected
    for name in sorted(expected):
        # -raw prints every sample's whole stack: `-top` lists nodes by their own time and cut the admission
        # chain's frames (none of their own) from a window's 400 listed nodes in one CI run
        samples = subprocess.run(
            ["go", "tool", "pprof", "-raw", str(profiles / name)],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        assert "kube-apiserver" in samples, name  # the profiled binary
        assert "k8s.io/apiserver/pkg/admission" in samples, name  # its admission chain ran in the window


def test_the_counters_are_the_real_components(quick_report: dict[str, Any]) -> None:
    for scenario, key, run in runs(quick_report):
        pods = scenario["jobs"] * scenario["pods_per_job"]
        assert run["exclusive_violations"] == 0, key
        assert run["pod_creates_accepted"] == pods, key
        assert run["api_requests_by_client"]["kwok"] == pods, key  # one status patch per pod
        assert run["api_requests_by_verb_resource"]["create pods/binding"] == pods, key
        assert run["api_requests_by_client_verb_resource_code"]["scheduler create pods/binding 201"] == pods
        assert run["api_writes"] <= run["api_requests"], key
        assert "watch" not in " ".join(run["api_requests_by_verb_resource"]), key
        assert run["apiserver_cpu_seconds"] > 0, key
        # JobSet's pod webhooks see every pod creation (their objectSelector matches all of them)
        calls, rejected = run["jobset_webhook_calls"], run["pod_creates_rejected"]
        # (a pod this project's webhook denies may never reach JobSet's: ours is the first mutating webhook)
        assert 2 * pods <= calls <= 2 * (pods + rejected), key


def test_jobset_alone_places_its_namespace_and_the_strategies_never_reject(
    quick_report: dict[str, Any],
) -> None:
    for scenario, key, run in runs(quick_report):
        pods = scenario["jobs"] * scenario["pods_per_job"]
        if key == "jobset":
            assert (run["admission_calls"], run["resizer_requests"]) == (0, 0)
            assert run["pod_creates_rejected"] == run["jobset_webhook_denied"]
            assert run["wasted_rejected_creates"] == run["pod_creates_rejected"]
            continue
        if key != "gate":  # JobSet's way: a follower is denied until its leader is scheduled
            assert run["pod_creates_rejected"] == 0, key
        assert run["jobset_webhook_denied"] == 0, key  # the takeover: JobSet's webhooks pass them
        # (every creation attempt is a call: a gate follower denied is created again)
        pod_calls = PROJECT_POD_WEBHOOK_CALLS_PER_POD[key] * (pods + run["pod_creates_rejected"])
        # one Job mutation per Job creation asked for (JobSet's controller, behind its cache, sometimes asks
        # twice: the second gets 409 after admission), one JobSet validation per JobSet
        assert scenario["jobs"] <= run["job_create_attempts"], key
        job_calls = run["job_create_attempts"]
        assert run["admission_calls"] == pod_calls + job_calls + scenario["jobsets"], key
        if key == "elastic":
            assert run["job_patches"] == scenario["jobs"]  # one resize patch per Job
