"""Figures decided by repetition (bench.repeats): median, min and max of every figure, ratios over paired
runs, and a verdict that never calls a range crossing 1.0 a win."""

from __future__ import annotations

from typing import Any

import pytest

from bench.repeats import (
    Verdict,
    aggregate,
    figure,
    is_figure,
    median_of,
    paired_ratio,
    paired_ratios,
    verdict,
)


def test_a_figure_is_the_median_min_and_max_of_its_runs() -> None:
    assert figure([3, 1, 2]) == {"median": 2, "min": 1, "max": 3}
    assert figure([4, 1]) == {"median": 2.5, "min": 1, "max": 4}
    assert figure([2, 2]) == {"median": 2, "min": 2, "max": 2}  # counts stay counts
    assert isinstance(figure([2, 2])["median"], int)
    assert figure([0.1234567]) == {"median": 0.123, "min": 0.1234567, "max": 0.1234567}
    with pytest.raises(ValueError, match="at least one value"):
        figure([])


def test_every_figure_of_the_runs_is_aggregated_breakdowns_entry_by_entry() -> None:
    runs: list[dict[str, Any]] = [
        {"api_requests": 100, "p50": 1.5, "by_client": {"kwok": 32, "bench": 1}, "state": "running"},
        {"api_requests": 120, "p50": None, "by_client": {"kwok": 32}, "state": "running"},
        {"api_requests": 110, "p50": 2.5, "by_client": {"kwok": 32, "bench": 3}, "state": "failed"},
    ]
    result = aggregate(runs)
    assert result["api_requests"] == {"median": 110, "min": 100, "max": 120}
    assert result["p50"] == {"median": 2.0, "min": 1.5, "max": 2.5}  # over the runs that measured it
    assert result["by_client"] == {
        "bench": {"median": 1, "min": 0, "max": 3},  # a client absent from a run sent it nothing
        "kwok": {"median": 32, "min": 32, "max": 32},
    }
    assert result["state"] == ["running", "running", "failed"]
    assert (result["repeats"], result["succeeded_runs"]) == (3, 3)
    assert result["runs"] == runs
    assert "errors" not in result
    assert "problems" not in result


def test_failed_runs_count_in_no_figure_and_are_reported_with_their_number() -> None:
    runs: list[dict[str, Any]] = [
        {"api_requests": 100, "problems": ["a pod unpinned"], "jobs": {"ns/a": {}}},
        {"error": "BenchError: timeout"},
    ]
    result = aggregate(runs)
    assert result["api_requests"] == {"median": 100, "min": 100, "max": 100}
    assert result["errors"] == ["run 2: BenchError: timeout"]
    assert result["problems"] == ["run 1: a pod unpinned"]
    assert "jobs" not in result  # per-run detail stays in the runs
    assert result["succeeded_runs"] == 1
    assert aggregate([{"error": "x"}])["succeeded_runs"] == 0


def test_median_of_reads_a_figure_and_passes_anything_else() -> None:
    assert median_of({"median": 2, "min": 1, "max": 3}) == 2
    assert median_of(7) == 7
    assert median_of(None) is None
    assert is_figure({"median": 2, "min": 1, "max": 3})
    assert not is_figure({"median": 2})


@pytest.mark.parametrize(
    ("low", "high", "pairs", "expected"),
    [
        (0.8, 0.95, 3, Verdict.LOWER),
        (1.02, 1.3, 3, Verdict.HIGHER),
        (0.9, 1.1, 3, Verdict.TIE),  # the range crosses 1.0: no win
        (0.9, 1.0, 3, Verdict.TIE),  # touching 1.0 is no win either
        (1.0, 1.0, 3, Verdict.TIE),
        (0.5, 0.5, 1, Verdict.ONE_RUN),  # one pair: the spread is unknown
    ],
)
def test_only_a_range_wholly_on_one_side_of_one_decides(
    low: float, high: float, pairs: int, expected: Verdict
) -> None:
    assert verdict(low, high, pairs) is expected


def test_a_ratio_is_taken_per_pair_of_runs() -> None:
    mine: list[dict[str, Any]] = [{"x": 90}, {"x": 100}, {"error": "boom"}, {"x": 50}]
    theirs = [{"x": 100}, {"x": 80}, {"x": 100}, {"x": 0}]
    ratio = paired_ratio(mine, theirs, "x")
    assert ratio is not None
    # pairs 1 and 2 (pair 3 failed, pair 4 divides by 0): 0.9 and 1.25
    assert (ratio.median, ratio.low, ratio.high, ratio.pairs) == (1.075, 0.9, 1.25, 2)
    assert ratio.as_dict() == {"median": 1.075, "min": 0.9, "max": 1.25, "pairs": 2, "verdict": "tie"}
    assert paired_ratio([{"x": None}], [{"x": 1}], "x") is None


def test_paired_ratios_compare_a_strategy_with_a_baseline() -> None:
    results = {
        "jobset": aggregate([{"requests": 200, "waste": 40}, {"requests": 220, "waste": 44}]),
        "elastic": aggregate([{"requests": 150, "waste": 0}, {"requests": 176, "waste": 0}]),
    }
    ratios = paired_ratios(results, ["requests", "waste"], baseline="jobset")
    assert ratios["requests"] == {"median": 0.775, "min": 0.75, "max": 0.8, "pairs": 2, "verdict": "lower"}
    assert ratios["waste"] == {"median": 0.0, "min": 0.0, "max": 0.0, "pairs": 2, "verdict": "lower"}
    assert paired_ratios(results, ["requests"], baseline="gate") == {}
