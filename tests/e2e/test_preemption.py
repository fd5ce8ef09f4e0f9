"""A high-priority JobSet preempts its way into domains a low-priority JobSet fills, under every strategy
that pins followers (elastic, scheduling-gate, gate), on the whole stack (kubesim + webhook + resizer).

Exclusivity is scoped to a priority level (the leader's anti-affinity selects `exclusive-placement.io/
priority` In [own]): the high leaders are blocked by resources only, so the scheduler preempts a node of a
domain for each; their followers, pinned there, preempt the rest; the low Jobs fail (backoffLimit 0) and
their JobSet restarts them, to wait for free domains. Within each level, no domain ever holds two Jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from devstack.manifests import priority_class
from devstack.scenario import ensure_namespace
from devstack.stack import Stack
from placement.constants import Strategy
from tests.e2e.jobset_e2e_support import pods_of
from tests.e2e.preemption_support import (
    JOBS,
    PODS,
    high_jobset_preempts_its_way_in,
    low_jobset_running,
    namespaces,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(600)


def run_preemption(stack: Stack, strategy: str) -> dict[str, Any]:
    low_ns, high_ns = namespaces(strategy)
    for namespace in (low_ns, high_ns):
        ensure_namespace(stack.client, namespace)
    low_jobset_running(stack, strategy, ignoring=(httpx.HTTPError,))
    stack.client.reset_stats()
    violations = high_jobset_preempts_its_way_in(stack, strategy, ignoring=(httpx.HTTPError,))
    low = stack.client.get("JobSet", "low", namespace=low_ns)
    stats = stack.client.stats()
    for namespace, name in ((high_ns, "high"), (low_ns, "low")):
        stack.client.delete("JobSet", name, namespace=namespace)
        eventually(_pods_gone(stack, namespace), f"{namespace} pods gone", 120, ignoring=(httpx.HTTPError,))
    return {"violations": violations, "low": low, "stats": stats}


def _pods_gone(stack: Stack, namespace: str) -> Callable[[], bool]:
    return lambda: not pods_of(stack, namespace)


def test_a_high_priority_jobset_preempts_its_way_in_under_every_pinning_strategy(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    stack.client.create(priority_class("low", 10))
    stack.client.create(priority_class("high", 1000))
    for strategy in (Strategy.ELASTIC, Strategy.SCHEDULING_GATE, Strategy.GATE):
        run = run_preemption(stack, strategy)
        assert run["violations"] == 0, strategy
        assert run["stats"]["scheduler"]["preemption_victims"] >= JOBS * PODS // 2, strategy
        assert run["low"]["status"].get("restarts", 0) >= 1, strategy
