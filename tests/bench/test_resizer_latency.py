"""The resizer benchmark: the statistics it reads (bench.measures), its command line, and a quick run end to
end on the real control plane (figures reported, not asserted)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.measures import histogram_buckets, histogram_quantile, nearest_rank
from bench.resizer_latency import main, options_from


@pytest.mark.parametrize(
    ("values", "fraction", "expected"),
    [
        ([3.0], 0.99, 3.0),
        ([1.0, 2.0, 3.0, 4.0], 0.5, 2.0),
        ([float(v) for v in range(1, 101)], 0.99, 99.0),
        ([5.0, 1.0, 3.0], 1.0, 5.0),
    ],
)
def test_percentile_nearest_rank(values: list[float], fraction: float, expected: float) -> None:
    assert nearest_rank(values, fraction) == expected


def test_percentile_of_nothing_is_none_and_a_nonsense_quantile_is_refused() -> None:
    assert nearest_rank([], 0.5) is None
    with pytest.raises(ValueError, match="quantile"):
        nearest_rank([1.0], 0.0)


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    buckets = [(0.01, 50.0), (0.1, 90.0), (1.0, 100.0), (math.inf, 100.0)]
    assert histogram_quantile(buckets, 0.5) == pytest.approx(0.01)
    assert histogram_quantile(buckets, 0.7) == pytest.approx(0.055)
    assert histogram_quantile(buckets, 0.95) == pytest.approx(0.55)
    assert histogram_quantile([(1.0, 0.0), (math.inf, 0.0)], 0.5) is None


def test_histogram_buckets_reads_cumulative_buckets() -> None:
    text = "\n".join(
        [
            "# TYPE x histogram",
            'x_bucket{le="0.1"} 3.0',
            'x_bucket{le="+Inf"} 4.0',
            'x_bucket{le="0.05"} 1.0',
            "x_count 4.0",
        ]
    )
    assert histogram_buckets(text, "x") == [(0.05, 1.0), (0.1, 3.0), (math.inf, 4.0)]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--jobs", "0"], "must be positive"),
        (["--rate", "-1"], "must be positive"),
        (["--nodes", "4", "--pools", "8"], "cannot exceed --nodes"),
        (["--pools", "10", "--jobs", "20"], "cannot exceed --pools"),
    ],
)
def test_bad_arguments_exit_2_with_one_line_saying_which(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        options_from(argv)
    assert exit_info.value.code == 2
    assert error in capsys.readouterr().err


def test_quick_defaults_and_explicit_values() -> None:
    quick = options_from(["--quick"])
    assert (quick.jobs, quick.rate, quick.pools) == (40, 20.0, 40)
    chosen = options_from(["--quick", "--jobs", "7"])
    assert (chosen.jobs, chosen.rate) == (7, 20.0)
    assert (options_from([]).jobs, options_from([]).pools) == (1000, 1000)


@pytest.mark.kube
@pytest.mark.xdist_group("kube-resizer-bench")
@pytest.mark.timeout(600)
def test_quick_run_resizes_every_job_and_writes_results(tmp_path: Path) -> None:
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "resizer.json").read_text())
    assert result["control_plane"] == "kube"
    assert result["jobs_resized"] == result["jobs_created"] == 40
    assert result["bind_to_resize_ms"]["count"] == 40
    assert result["bind_to_resize_ms"]["max"] < 1000 * result["elapsed_seconds"]
    assert result["resizer_rss_mb"]["max"] > 0
    assert result["met"]["all_resized"] is True
