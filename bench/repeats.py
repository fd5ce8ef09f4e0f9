"""Figures decided by repetition (`python -m bench strategies --repeat N`; pure functions, no I/O).

Each contender of a scenario runs N times; run i of every contender shares a stack and follows run i-1 of
the last one, so run i of `elastic` and run i of `jobset` are a *pair*: measured minutes apart on the same
cluster, under the same load from the rest of the machine.

- A contender's result is its runs (`runs`, each one run's result) and, for every figure they measured,
  `{"median", "min", "max"}` over the runs that succeeded (`aggregate`); a breakdown (requests by client,
  say) gets that for each of its entries.
- A ratio (elastic / jobset) is taken per pair of successful runs; it reports the median and the min-max
  over the pairs (`paired_ratio`), and a verdict: `lower` or `higher` only when the whole range is on one
  side of 1.0, `tie` when the range crosses or touches 1.0, `one run` when a single pair decides nothing.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

FIGURE_KEYS = frozenset({"median", "min", "max"})
NOT_AGGREGATED = frozenset({"problems", "error", "domain_timeline", "jobs"})
"""Per-run details kept in `runs` only: lists and per-Job tables do not add up across runs."""


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def figure(values: Sequence[float]) -> dict[str, float]:
    """A figure over runs: its median, min and max."""
    if not values:
        raise ValueError("a figure needs at least one value")
    median: float = statistics.median(values)
    if all(isinstance(v, int) for v in values) and median == int(median):
        median = int(median)  # counts stay counts where the middle two agree
    return {
        "median": round(median, 3),
        "min": min(values),
        "max": max(values),
    }


def is_figure(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == FIGURE_KEYS


def median_of(value: Any) -> Any:
    """A figure's median; anything else as it is."""
    return value["median"] if is_figure(value) else value


def _combine(values: Sequence[Any]) -> Any:
    """The runs' values of one key: a figure of numbers (None where no run measured it), a mapping key by
    key, one value if every run agrees, else the runs' values in order."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    if all(is_number(v) for v in present):
        return figure(present)
    if all(isinstance(v, Mapping) for v in present):
        keys = sorted({key for v in present for key in v})
        return {key: _combine([v.get(key, 0) for v in present]) for key in keys}
    if all(v == present[0] for v in present):
        return present[0]
    return list(values)


def aggregate(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One contender's result over its `runs` (module docstring): every figure of the runs that succeeded
    as median/min/max, the errors and problems of every run, and the runs themselves."""
    succeeded = [run for run in runs if "error" not in run]
    keys = list(dict.fromkeys(key for run in succeeded for key in run if key not in NOT_AGGREGATED))
    result: dict[str, Any] = {key: _combine([run.get(key) for run in succeeded]) for key in keys}
    result["repeats"] = len(runs)
    result["succeeded_runs"] = len(succeeded)
    errors = [f"run {i + 1}: {run['error']}" for i, run in enumerate(runs) if "error" in run]
    problems = [f"run {i + 1}: {p}" for i, run in enumerate(runs) for p in run.get("problems", [])]
    if errors:
        result["errors"] = errors
    if problems:
        result["problems"] = problems
    result["runs"] = list(runs)
    return result


class Verdict(StrEnum):
    LOWER = "lower"
    """Below 1.0 in every pair."""
    HIGHER = "higher"
    """Above 1.0 in every pair."""
    TIE = "tie"
    """The range over the pairs crosses or touches 1.0: neither is decided."""
    ONE_RUN = "one run"
    """A single pair: the run-to-run spread is unknown, so it decides nothing."""


def verdict(low: float, high: float, pairs: int) -> Verdict:
    if pairs < 2:
        return Verdict.ONE_RUN
    if high < 1.0:
        return Verdict.LOWER
    if low > 1.0:
        return Verdict.HIGHER
    return Verdict.TIE


@dataclass(frozen=True)
class Ratio:
    median: float
    low: float
    high: float
    pairs: int

    @property
    def verdict(self) -> Verdict:
        return verdict(self.low, self.high, self.pairs)

    def as_dict(self) -> dict[str, Any]:
        return {
            "median": self.median,
            "min": self.low,
            "max": self.high,
            "pairs": self.pairs,
            "verdict": str(self.verdict),
        }


def paired_ratio(
    mine: Sequence[Mapping[str, Any]], theirs: Sequence[Mapping[str, Any]], key: str
) -> Ratio | None:
    """`key` of run i of `mine` over run i of `theirs`, for every i where both succeeded and measured it
    (the reference not 0); None without such a pair."""
    ratios = []
    for run, reference in zip(mine, theirs, strict=False):
        if "error" in run or "error" in reference:
            continue
        value, base = run.get(key), reference.get(key)
        if is_number(value) and is_number(base) and base:
            ratios.append(value / base)
    if not ratios:
        return None
    return Ratio(
        round(statistics.median(ratios), 3), round(min(ratios), 3), round(max(ratios), 3), len(ratios)
    )


def paired_ratios(
    results: Mapping[str, Mapping[str, Any]], keys: Sequence[str], *, baseline: str, strategy: str = "elastic"
) -> dict[str, Any]:
    """`strategy` / `baseline` for each of `keys` over their paired runs; {} when either did not run."""
    mine, theirs = results.get(strategy), results.get(baseline)
    if not mine or not theirs:
        return {}
    ratios = {key: paired_ratio(mine["runs"], theirs["runs"], key) for key in keys}
    return {key: None if r is None else r.as_dict() for key, r in ratios.items()}
