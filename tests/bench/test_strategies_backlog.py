"""A small backlog scenario end to end (slow: ~40 s): leaders queued behind non-exclusive pods make `gate`
reject followers, and no other strategy. Invariants only, never timings."""

from __future__ import annotations

from typing import Any

import pytest

from bench.contenders import contenders
from bench.scenarios import ANTI_AFFINITY_PODS_PER_SECOND, Backlog, Scenario
from bench.strategies import RunSettings, run_scenario
from placement.constants import STRATEGIES, Strategy

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SMALL_BACKLOG = Scenario(
    "backlog-4x8",
    jobs=4,
    pods_per_job=8,
    pools=4,
    scheduler_pods_per_second=ANTI_AFFINITY_PODS_PER_SECOND,
    time_scale=1.0,
    backlog=Backlog(jobs=3, pods_per_job=100),
)

STRATEGY_CONTENDERS = contenders(STRATEGIES)
"""Every strategy of this project (JobSet's own webhooks alone are not part of this check)."""


@pytest.fixture(scope="module")
def backlog_run() -> dict[str, Any]:
    return run_scenario(SMALL_BACKLOG, STRATEGY_CONTENDERS, RunSettings(time_scale=1.0, run_timeout=120))


def test_every_strategy_placed_every_job_behind_the_backlog(backlog_run: dict[str, Any]) -> None:
    assert backlog_run["backlog_pods"] == 300
    assert list(backlog_run["results"]) == [c.key for c in STRATEGY_CONTENDERS]
    for strategy, result in backlog_run["results"].items():
        assert "error" not in result, (strategy, result)
        assert "problems" not in result, (strategy, result)
        assert result["exclusive_violations"] == 0, strategy
        assert result["pod_creates_accepted"] >= SMALL_BACKLOG.total_pods, strategy
        # The leaders really queued: backlog pods were still pending when the JobSet went in.
        assert result["backlog_pods_pending_at_submit"] > 0, strategy
        assert result["backlog_pods_bound_in_window"] > 0, strategy


def test_only_gate_rejects_followers_while_leaders_queue(backlog_run: dict[str, Any]) -> None:
    rejected = {s: r["pod_creates_rejected"] for s, r in backlog_run["results"].items()}
    assert rejected[Strategy.GATE] >= SMALL_BACKLOG.jobs  # at least one rejected batch per Job
    assert all(n == 0 for s, n in rejected.items() if s != Strategy.GATE), rejected
