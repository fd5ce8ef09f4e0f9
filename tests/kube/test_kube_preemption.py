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
from devstack.manifests import exclusive_jobset, priority_class
from devstack.stack import Stack
from placement.constants import Strategy
from tests.e2e.jobset_e2e_support import (
    assert_each_job_whole_in_its_own_pool,
    exclusive_violations,
    running_pods,
)
from tests.kube.kube_support import audit_log, empty_namespace, preemptions
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-preemption"), pytest.mark.timeout(600)]

JOBS, PODS, GPUS = 4, 2, 8
"""4 Jobs of 2 full-node pods: one Job fills one of the 4 pools of 2 eight-GPU nodes."""


def create_namespace(stack: Stack, name: str) -> None:
    stack.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    eventually(
        lambda: stack.client.get("ServiceAccount", "default", namespace=name),
        f"the default ServiceAccount of {name}",
        30,
        ignoring=(KubeError,),
    )


def run_preemption(stack: Stack, strategy: str) -> dict[str, Any]:
    low_ns, high_ns = f"low-{strategy}", f"high-{strategy}"
    for namespace in (low_ns, high_ns):
        create_namespace(stack, namespace)
    shape: dict[str, Any] = {"jobs": JOBS, "pods_per_job": PODS, "gpus_per_pod": GPUS, "strategy": strategy}
    stack.client.create(
        exclusive_jobset("low", namespace=low_ns, priority_class_name="low", max_restarts=100, **shape)
    )
    eventually(
        lambda: running_pods(stack, low_ns) == JOBS * PODS,
        f"low {strategy} pods running",
        120,
        ignoring=(KubeError,),
    )
    since = audit_log(stack).mark()
    stack.client.create(exclusive_jobset("high", namespace=high_ns, priority_class_name="high", **shape))
    violations = 0

    def high_running() -> bool:
        nonlocal violations
        violations = max(violations, exclusive_violations(stack, [low_ns, high_ns]))
        return bool(running_pods(stack, high_ns) == JOBS * PODS)

    eventually(high_running, f"high {strategy} pods running", 180, ignoring=(KubeError,))
    stack.check_alive()
    assert_each_job_whole_in_its_own_pool(stack, high_ns, JOBS)
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
