"""With JobSet installed (kubesim runs JobSet's own pod webhooks and pod reconciler, as a JobSet install
does): every strategy on a real stack, with the takeover of JobSet's annotation on (the default) and off.

With the takeover, JobSet's webhooks still see every JobSet pod (their objectSelector matches all of them)
but deny none and inject nothing; elastic and scheduling-gate create every pod exactly once. Without it,
both projects act on every exclusive pod: JobSet's validating webhook denies the gated followers of
scheduling-gate until their leader is scheduled (scheduling-gate degrades to gate), and leaders carry both
projects' affinity terms — the behaviour README "Running next to JobSet" documents.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from devstack.scenario import ensure_namespace
from devstack.stack import Stack
from placement.constants import STRATEGIES, Strategy
from tests.e2e.coexistence_support import (
    JOBS,
    PODS,
    assert_both_projects_acted,
    assert_jobset_injected_nothing,
    assert_no_gate_left,
    jobset_deleted,
    placed_jobset,
)
from tests.e2e.jobset_e2e_support import pods_of

pytestmark = pytest.mark.e2e


def run_jobset(
    stack: Stack, strategy: str, *, hold_leaders_until: Callable[[str], bool] | None = None
) -> dict[str, Any]:
    """Place a JobSet of JOBS x PODS in a namespace of its own (`placed_jobset`), and return kubesim's
    counters for exactly that run and the pods. `hold_leaders_until(namespace)`: no leader is scheduled
    before it is true."""
    namespace = f"coexist-{strategy}"
    ensure_namespace(stack.client, namespace)
    stack.client.reset_stats()
    hold = None if hold_leaders_until is None else functools.partial(hold_leaders_until, namespace)
    pods = placed_jobset(
        stack, namespace, strategy, hold_leaders_until=hold, ignoring=(httpx.HTTPError,), timeout=90
    )
    stats = stack.client.stats()
    jobset_deleted(stack, namespace, strategy, ignoring=(httpx.HTTPError,))
    return {"stats": stats, "pods": pods}


def test_every_strategy_runs_with_jobsets_own_webhooks_on(stack_factory: Callable[..., Stack]) -> None:
    stack = stack_factory()

    def every_follower_created(namespace: str) -> bool:
        return len(pods_of(stack, namespace)) == JOBS * PODS

    for strategy in STRATEGIES:
        hold = every_follower_created if strategy == Strategy.SCHEDULING_GATE else None
        run = run_jobset(stack, strategy, hold_leaders_until=hold)
        stats, pods = run["stats"], run["pods"]
        # JobSet's webhooks were called for every JobSet pod, and acted on none
        assert stats["jobset_webhooks"]["calls"] >= JOBS * PODS, strategy
        assert stats["jobset_webhooks"]["denied"] == 0, strategy
        assert_jobset_injected_nothing(pods, strategy)
        if strategy in (Strategy.ELASTIC, Strategy.SCHEDULING_GATE, Strategy.AFFINITY):
            assert stats["pods"]["create_rejected"] == 0, strategy
        if strategy in (Strategy.ELASTIC, Strategy.SCHEDULING_GATE):
            assert stats["pods"]["create_accepted"] == JOBS * PODS, strategy  # every pod created once
        if strategy == Strategy.SCHEDULING_GATE:
            assert_no_gate_left(pods)


def test_without_the_takeover_both_projects_act_on_every_pod(stack_factory: Callable[..., Stack]) -> None:
    stack = stack_factory(jobset_takeover=False)

    def jobset_denied_followers(_namespace: str) -> bool:
        return int(stack.client.stats()["jobset_webhooks"]["denied"]) >= JOBS

    gated = run_jobset(stack, Strategy.SCHEDULING_GATE, hold_leaders_until=jobset_denied_followers)
    stats = gated["stats"]
    # JobSet's vpod.kb.io denies the gated followers ("follower pod node selector not set") until their
    # leader is scheduled: scheduling-gate degrades to JobSet's own rejection loop
    assert stats["jobset_webhooks"]["denied"] > 0
    assert stats["pods"]["create_rejected"] >= stats["jobset_webhooks"]["denied"]
    assert stats["pods"]["create_accepted"] == JOBS * PODS
    assert_both_projects_acted(gated["pods"])

    elastic = run_jobset(stack, Strategy.ELASTIC)
    # elastic still creates each follower after its leader is bound, so JobSet's webhook pins it to the
    # same domain ours does; it runs whole, but every pod passed both projects' webhooks
    assert elastic["stats"]["jobset_webhooks"]["calls"] >= JOBS * PODS
