"""A high-priority JobSet preempts its way into domains a low-priority JobSet fills, with real
PriorityClasses, kube-scheduler's real preemption and JobSet's real restart, under every strategy that
pins followers (elastic, scheduling-gate, gate).

Exclusivity is scoped to a priority level (the leader's anti-affinity selects `exclusive-placement.io/
priority` In [own]; the Priority admission plugin fills `spec.priority` before the webhook runs): the high
leaders are blocked by resources only, so the scheduler preempts a node of a domain for each; their
followers, pinned there, preempt the rest; the low Jobs fail (backoffLimit 0) and JobSet restarts them to
wait for free domains. Within each level, no domain ever holds two Jobs.
"""

from __future__ import annotations

from typing import Any

import pytest

from devstack.kube import KubeError
from devstack.manifests import priority_class
from devstack.stack import Stack
from placement.constants import Strategy
from tests.e2e.preemption_support import (
    JOBS,
    PODS,
    high_jobset_preempts_its_way_in,
    low_jobset_running,
    namespaces,
)
from tests.kube.kube_support import audit_log, create_namespace, empty_namespace, preemptions
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-preemption"), pytest.mark.timeout(600)]


def run_preemption(stack: Stack, strategy: str) -> dict[str, Any]:
    low_ns, high_ns = namespaces(strategy)
    for namespace in (low_ns, high_ns):
        create_namespace(stack, namespace)
    low_jobset_running(stack, strategy, ignoring=(KubeError,))
    since = audit_log(stack).mark()
    violations = high_jobset_preempts_its_way_in(stack, strategy, ignoring=(KubeError,))
    low = eventually(  # each preempted low Job failed (backoffLimit 0): JobSet restarts the JobSet
        lambda: (
            (jobset := stack.client.get("JobSet", "low", namespace=low_ns))["status"].get("restarts")
            and jobset
        ),
        "the low JobSet restarted by JobSet",
        60,
        ignoring=(KubeError,),
    )
    victims = preemptions(audit_log(stack).requests(since=since), low_ns)
    for namespace in (high_ns, low_ns):
        empty_namespace(stack, namespace, timeout=120)
    return {"violations": violations, "low": low, "victims": victims}


@pytest.mark.parametrize("strategy", [Strategy.ELASTIC, Strategy.SCHEDULING_GATE, Strategy.GATE])
def test_a_high_priority_jobset_preempts_its_way_in(kube_stack: Stack, strategy: str) -> None:
    for name, value in (("low", 10), ("high", 1000)):
        try:
            kube_stack.client.create(priority_class(name, value))
        except KubeError as err:
            if err.status != 409:  # created by the previous strategy's run
                raise
    run = run_preemption(kube_stack, strategy)
    assert run["violations"] == 0
    assert run["victims"] >= JOBS * PODS // 2
    assert run["low"]["status"]["restarts"] >= 1
