"""How the strategy comparison uses the real control plane (bench.kube, the command line, the report),
without starting it: the end-to-end contract is tests/kube/test_kube_bench_strategies.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.kube import (
    ClusterConfigError,
    component_metrics_url,
    pod_annotations,
    stack_options,
    unsettled_nodes,
)
from bench.repeats import aggregate
from bench.report import markdown_table
from bench.scenarios import Scenario, jobset_manifest, scenarios_named
from bench.strategies import main, result_from_counts
from devstack.controlplane.kwok import RUN_TIME_ANNOTATION, RUN_TIME_JITTER_ANNOTATION, START_TIME_ANNOTATION
from devstack.controlplane.versions import CACHE_ENV
from placement.constants import STRATEGY_ANNOTATION, Strategy
from tests.bench.bench_support import repeated, window_counts


def scenario(name: str) -> Scenario:
    (found,) = scenarios_named([name])
    return found


def test_a_stack_is_the_real_control_plane_shaped_for_the_scenario() -> None:
    options = stack_options(scenario("contended-16x8-on-4"), ["bench-x-jobset-r1"])
    assert (options.cluster.nodes, options.cluster.pools, options.cluster.gpus_per_node) == (4, 4, 8)
    assert options.exempt_namespaces == ("bench-x-jobset-r1",)


def test_pods_run_the_scenarios_seconds_in_real_time_unless_a_rendezvous_starts_them() -> None:
    assert pod_annotations(scenario("contended-16x8-on-4")) == {
        RUN_TIME_ANNOTATION: "30000ms",
        RUN_TIME_JITTER_ANNOTATION: "30000ms",
    }
    assert pod_annotations(scenario("long-wait-4x4-on-2"))[RUN_TIME_ANNOTATION] == "240000ms"
    assert pod_annotations(scenario("4x8")) == {}  # run until deleted
    assert pod_annotations(scenario("gang-4x3")) == {}
    assert pod_annotations(scenario("32x32-slow-start")) == {START_TIME_ANNOTATION: "2000ms"}


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
    with pytest.raises(ClusterConfigError, match="no metrics endpoint for kwok"):
        component_metrics_url(config, "kwok")


def test_missing_binaries_and_a_retired_control_plane_are_clear_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["--control-plane", "kubesim"])
    assert "invalid choice: 'kubesim'" in capsys.readouterr().err
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert main(["--quick", "--out", str(tmp_path / "out")]) == 2
    assert "run `make kube` first" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_report_says_which_components_counted_and_how() -> None:
    counts = window_counts(repeated(32, "job-controller", "create", "pods", code=201))
    result = aggregate([result_from_counts(counts, 2.5, 0, namespace="ns")])
    report = {
        "control_plane": "kube",
        "versions": {"kube-apiserver": "v1.36.3", "etcd": "v3.6.16", "jobset": "v0.12.0", "kwok": "v0.8.0"},
        "repeat": 1,
        "scenarios": [{**scenario("4x8").fields(), "results": {"elastic": result}}],
    }
    table = markdown_table(report)
    assert "kube-scheduler v1.36.3, etcd v3.6.16, JobSet v0.12.0" in table
    assert "the API server's audit log by client, verb, resource and code" in table
    assert "process_cpu_seconds_total" in table
    assert "both TLS servers" in table


def node(name: str, *, ready: str = "True", taints: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"taints": [{"key": key, "effect": "NoSchedule"} for key in taints]},
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }


def test_a_run_waits_for_nodes_that_are_ready_and_no_longer_tainted_by_the_node_lifecycle() -> None:
    nodes = [
        node("settled"),
        node("tainted", taints=("node.kubernetes.io/not-ready",)),
        node("unreachable", taints=("node.kubernetes.io/unreachable",)),
        node("not-ready", ready="False"),
        node("unknown", ready="Unknown"),
        node("theirs", taints=("example.com/full",)),  # a user's taint is the scenario's business
        {"metadata": {"name": "no-status"}},
    ]
    assert unsettled_nodes(nodes) == ["no-status", "not-ready", "tainted", "unknown", "unreachable"]
    assert unsettled_nodes([node("a"), node("b")]) == []
