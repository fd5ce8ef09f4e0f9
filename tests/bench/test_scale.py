"""The scale benchmark: the statistics it reads (bench.measures), its command line, and a quick run end to
end on the real control plane (figures reported, not asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.measures import histogram_buckets, histogram_quantile, linear_fit, metric_value, per_thousand
from bench.scale import SCALE_HEARTBEAT, main, options_from
from devstack.controlplane.components import COMPONENTS


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ([(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)], (2.0, 1.0)),
        ([(1000.0, 100.0), (3000.0, 104.0), (5000.0, 108.0)], (0.002, 98.0)),
        ([(1.0, 2.0), (1.0, 3.0)], None),
        ([(1.0, 2.0)], None),
    ],
)
def test_linear_fit_is_least_squares(
    points: list[tuple[float, float]], expected: tuple[float, float] | None
) -> None:
    fit = linear_fit(points)
    if expected is None:
        assert fit is None
    else:
        assert fit == pytest.approx(expected)


def test_per_thousand_is_the_slope_per_1000_objects() -> None:
    assert per_thousand([(5000.0, 110.0), (10000.0, 118.0), (15000.0, 126.0)]) == pytest.approx(1.6)


def test_a_histogram_over_several_endpoints_is_summed_by_bound() -> None:
    name = "exclusive_placement_admission_duration_seconds"
    text = "\n".join(
        [
            f'{name}_bucket{{endpoint="mutate-jobs",le="0.001"}} 10.0',
            f'{name}_bucket{{endpoint="mutate-jobs",le="0.01"}} 10.0',
            f'{name}_bucket{{endpoint="mutate-jobs",le="+Inf"}} 10.0',
            f'{name}_bucket{{endpoint="mutate-pods",le="0.001"}} 0.0',
            f'{name}_bucket{{endpoint="mutate-pods",le="0.01"}} 10.0',
            f'{name}_bucket{{endpoint="mutate-pods",le="+Inf"}} 10.0',
            f'{name}_count{{endpoint="mutate-jobs"}} 10.0',
            f'{name}_count{{endpoint="mutate-pods"}} 10.0',
        ]
    )
    buckets = histogram_buckets(text, name)
    assert histogram_quantile(buckets, 0.5) == pytest.approx(0.001)
    assert histogram_quantile(buckets, 1.0) == pytest.approx(0.01)
    assert metric_value(text, f"{name}_count") == 20.0
    assert metric_value(text, f"{name}_count", {"endpoint": "mutate-pods"}) == 10.0
    assert metric_value(text, f"{name}_count", {"endpoint": "validate-pods"}) == 0.0


def test_the_command_line_takes_the_load(capsys: pytest.CaptureFixture[str]) -> None:
    options = options_from(["--quick", "--nodes", "300", "--jobs", "20"])
    assert (options.nodes, options.pools, options.jobs) == (300, 50, 20)
    with pytest.raises(SystemExit):
        options_from(["--nodes", "100", "--pools", "50", "--jobs", "60"])
    assert "--jobs (60) cannot exceed --pools (50)" in capsys.readouterr().err


def test_the_heartbeats_at_scale_keep_two_renewals_inside_the_grace_period() -> None:
    assert SCALE_HEARTBEAT.monitor_grace_seconds >= 2 * SCALE_HEARTBEAT.renew_seconds
    assert 15_000 / SCALE_HEARTBEAT.renew_seconds <= 100  # Lease writes per second at 15,000 nodes


@pytest.mark.kube
@pytest.mark.xdist_group("kube-scale")
@pytest.mark.timeout(600)
def test_quick_run_writes_every_figure(tmp_path: Path) -> None:
    """The whole benchmark at a small size on the real control plane (webhook over TLS, kwok nodes)."""
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "scale.json").read_text())
    assert (result["control_plane"], result["nodes"], result["domains"]) == ("kube", 200, 50)
    assert result["jobs_resized"] == result["jobs"] == 30
    load = result["load"]
    # Each figure is one that was measured: a process's memory, latencies of the run's own requests.
    assert min(load["webhook_rss_mb"]["idle"], load["resizer_rss_mb"]["idle"]) > 0
    assert min(result["webhook_rss_mb_max"], result["resizer_rss_mb_max"]) > 0
    # Every Job reaches the webhook; its leader and follower too unless the chart's pod policies admit them.
    calls_per_job = {"policy": 1, "webhook": 3}[result["pod_admission"]]
    assert load["admission_ms"]["count"] >= calls_per_job * result["jobs"]
    assert 0 < result["admission_p99_ms"] <= 1000 * load["elapsed_seconds"]
    assert load["bind_to_resize_ms"]["count"] == result["jobs"]
    assert 0 < result["bind_to_resize_p99_ms"] <= 1000 * load["elapsed_seconds"]
    assert result["jobs_per_second"] > 0
    assert load["webhook_rss_mb"]["leaders_cached"] >= 30
    assert set(load["cpu_share"]) == {*COMPONENTS, "webhook", "resizer"}
    assert result["node_heartbeat"]["lease_seconds"] == SCALE_HEARTBEAT.lease_seconds
