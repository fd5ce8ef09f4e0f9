"""What changes when the strategy comparison runs on the real control plane (bench.kube, the command line,
the report), without starting it: the end-to-end contract is tests/kube/test_kube_bench_strategies.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.kube import (
    KUBE_FULL_SCENARIOS,
    KUBE_QUICK_SCENARIOS,
    KubeScenarioError,
    check_supported,
    component_metrics_url,
    pod_annotations,
    scenario_fields,
)
from bench.report import markdown_table
from bench.scenarios import FULL_SCENARIOS, Scenario, jobset_manifest, scenarios_named
from bench.strategies import main, result_from_stats
from devstack.controlplane.kwok import RUN_TIME_ANNOTATION, RUN_TIME_JITTER_ANNOTATION
from devstack.controlplane.versions import CACHE_ENV
from placement.constants import STRATEGY_ANNOTATION, Strategy


def scenario(name: str) -> Scenario:
    (found,) = scenarios_named([name])
    return found


def test_every_kubesim_scenario_runs_on_kube_but_the_hour_long_wait() -> None:
    assert set(KUBE_FULL_SCENARIOS) == {s.name for s in FULL_SCENARIOS if not s.long_wait}
    assert KUBE_QUICK_SCENARIOS == ("4x8",)


def test_kubesims_throttle_and_time_scale_are_recorded_as_not_applied() -> None:
    throttled = scenario_fields(scenario("throttled-32x32"))
    assert throttled["scheduler_pods_per_second"] is None
    assert throttled["time_scale"] == 1.0
    assert throttled["kubesim_only"] == ["scheduler_pods_per_second=60"]
    assert scenario_fields(scenario("long-wait-4x4-on-2"))["kubesim_only"] == ["time_scale=0.01"]
    assert scenario_fields(scenario("gang-4x3"))["kubesim_only"] == [
        "gang model (played by the benchmark as a rendezvous)"
    ]
    assert scenario_fields(scenario("4x8"))["kubesim_only"] == []


def test_pods_run_the_scenarios_seconds_in_real_time_unless_a_rendezvous_starts_them() -> None:
    assert pod_annotations(scenario("contended-16x8-on-4")) == {
        RUN_TIME_ANNOTATION: "30000ms",
        RUN_TIME_JITTER_ANNOTATION: "30000ms",
    }
    assert pod_annotations(scenario("4x8")) == {}  # run until deleted
    assert pod_annotations(scenario("gang-4x3")) == {}


def test_run_time_annotations_join_the_strategy_on_the_pod_template() -> None:
    manifest = jobset_manifest(
        scenario("contended-16x8-on-4"),
        Strategy.ELASTIC,
        name="bench",
        namespace="ns",
        pod_annotations=pod_annotations(scenario("contended-16x8-on-4")),
    )
    template = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert template["metadata"]["annotations"] == {
        STRATEGY_ANNOTATION: "elastic",
        RUN_TIME_ANNOTATION: "30000ms",
        RUN_TIME_JITTER_ANNOTATION: "30000ms",
    }


def test_a_scenario_without_jobsets_webhooks_stays_on_kubesim() -> None:
    with pytest.raises(KubeScenarioError, match="always has them"):
        check_supported(Scenario("bare", jobs=2, pods_per_job=2, pools=2, jobset_webhooks=False))
    check_supported(scenario("4x8"))


def test_the_schedulers_metrics_are_where_kwokctl_scrapes_them() -> None:
    config: list[dict[str, Any]] = [
        {"kind": "Stage"},
        {
            "components": [
                {"name": "etcd", "metric": {"scheme": "http", "host": "127.0.0.1:1", "path": "/metrics"}},
                {
                    "name": "kube-scheduler",
                    "metric": {"scheme": "https", "host": "127.0.0.1:2", "path": "/m"},
                },
            ]
        },
    ]
    assert component_metrics_url(config, "kube-scheduler") == "https://127.0.0.1:2/m"
    with pytest.raises(KubeScenarioError, match="no metrics endpoint for kwok"):
        component_metrics_url(config, "kwok")


def test_kube_only_flags_and_missing_binaries_are_clear_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--control-plane", "kube", "--time-scale", "0.1"]) == 2
    assert "--time-scale applies to kubesim only" in capsys.readouterr().err
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert main(["--control-plane", "kube", "--quick", "--out", str(tmp_path / "out")]) == 2
    assert "run `make kube` first" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


KUBESIM_STATS: dict[str, Any] = {
    "requests": {"total": 221, "writes": 221, "by_namespace": {"ns": {"total": 221, "writes": 221}}},
    "pods": {"create_accepted": 32, "create_rejected": 7, "patched": 0},
    "jobs": {"patched": 0},
    "events": {"writes_by_reason": {"FailedCreate": 7}},
    "admission": {"calls": 0},
    "jobset_webhooks": {"calls": 80, "denied": 8},
    "scheduler": {"attempts": 32, "filter_evaluations": 500, "affinity_evaluations": 60},
}
KUBE_STATS: dict[str, Any] = {
    **KUBESIM_STATS,
    "pods": {**KUBESIM_STATS["pods"], "create_rejected_by_code": {"403": 7}},
    "jobset_webhooks": {"calls": 80, "denied": 8, "jobset_object_calls": 2},
    "scheduler": {
        "attempts": 32,
        "filter_evaluations": None,
        "affinity_evaluations": None,
        "queue_moves_by_event": {"PodAdd": 32},
    },
    "background_requests": {"leases": 4},
    "admission_calls_by_webhook": {"mpod.kb.io": 40, "vpod.kb.io": 40},
    "window_seconds": 2.5,
}


def test_a_real_control_plane_result_carries_its_own_counters_beside_kubesims_fields() -> None:
    result = result_from_stats(KUBE_STATS, 2.5, 0, namespace="ns")
    assert result["scheduler_filter_evaluations"] is None
    assert result["background_requests"] == {"leases": 4}
    assert result["pod_creates_rejected_by_code"] == {"403": 7}
    assert result["jobset_object_webhook_calls"] == 2
    assert "background_requests" not in result_from_stats(KUBESIM_STATS, 2.5, 0, namespace="ns")


def test_the_report_says_which_control_plane_counted_and_how() -> None:
    result = result_from_stats(KUBE_STATS, 2.5, 0, namespace="ns")
    scenario_record = {
        **scenario_fields(scenario("4x8")),
        "jobset_webhooks": True,
        "results": {"elastic": result},
    }
    report = {
        "control_plane": "kube",
        "versions": {"kube-apiserver": "v1.36.3", "etcd": "v3.6.16", "jobset": "v0.12.0", "kwok": "v0.8.0"},
        "time_scale": 1.0,
        "scenarios": [scenario_record],
    }
    table = markdown_table(report)
    assert "kube-scheduler v1.36.3, etcd v3.6.16, JobSet v0.12.0" in table
    assert "the API server's audit log" in table
    assert "/debug/stats" not in table
    assert "both TLS servers" in table
    assert "/debug/stats" in markdown_table({**report, "control_plane": "kubesim"})
