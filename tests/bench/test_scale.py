"""The scale benchmark: its statistics, and a quick run end to end (figures reported, not asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.scale import admission_quantile, linear_fit, main, per_thousand


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


def test_admission_quantile_sums_every_endpoint() -> None:
    name = "exclusive_placement_admission_duration_seconds_bucket"
    text = "\n".join(
        [
            f'{name}{{endpoint="mutate-jobs",le="0.001"}} 10.0',
            f'{name}{{endpoint="mutate-jobs",le="0.01"}} 10.0',
            f'{name}{{endpoint="mutate-jobs",le="+Inf"}} 10.0',
            f'{name}{{endpoint="mutate-pods",le="0.001"}} 0.0',
            f'{name}{{endpoint="mutate-pods",le="0.01"}} 10.0',
            f'{name}{{endpoint="mutate-pods",le="+Inf"}} 10.0',
        ]
    )
    assert admission_quantile(text, 0.5) == pytest.approx(0.001)
    assert admission_quantile(text, 1.0) == pytest.approx(0.01)


def test_quick_run_writes_every_figure(tmp_path: Path) -> None:
    """The whole benchmark at a small size: every process as devstack starts it (webhook over TLS)."""
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "scale.json").read_text())
    for key in (
        "nodes",
        "jobs",
        "webhook_rss_mb_max",
        "resizer_rss_mb_max",
        "admission_p99_ms",
        "bind_to_resize_p99_ms",
        "jobs_per_second",
    ):
        assert result[key] is not None, key
    assert result["jobs_resized"] == result["jobs"] == 30
    assert result["phases"]["load"]["webhook_rss_mb"]["leaders_cached"] == 30
    assert [point["caught_up"] for point in result["memory_per_thousand"]["job_points"]] == [True, True]
    assert result["phases"]["footprint"]["jobs_resized"] == 80
