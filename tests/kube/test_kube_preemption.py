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

from devstack.manifests import exclusive_jobset, priority_class
from devstack.stack import Stack
from kubekit.client import KubeError
from placement.constants import Strategy
from tests.kube.kube_support import audit_log, create_namespace, empty_namespace, preemptions
from tests.kube.workloads import assert_each_job_whole_in_its_own_pool, exclusive_violations, running_pods
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-preemption"), pytest.mark.timeout(600)]

Obj = dict[str, Any]
JOBS, PODS, GPUS = 4, 2, 8
"""4 Jobs of 2 full-node pods: one Job fills one of the 4 pools of 2 eight-GPU nodes."""


def namespaces(strategy: str) -> tuple[str, str]:
    """The low and the high JobSet's namespaces of one strategy's run."""
    return f"low-{strategy}", f"high-{strategy}"


def preemption_jobset(
    name: str, namespace: str, strategy: str, priority_class_name: str, max_restarts: int | None = None
) -> Obj:
    """An exclusive JobSet of JOBS x PODS full-node pods under `strategy`, of the given PriorityClass."""
    return exclusive_jobset(
        name,
        jobs=JOBS,
        pods_per_job=PODS,
        gpus_per_pod=GPUS,
        strategy=strategy,
        namespace=namespace,
        priority_class_name=priority_class_name,
        max_restarts=max_restarts,
    )


def low_jobset_running(stack: Stack, strategy: str) -> None:
    """The low JobSet "low" (priority class `low`, up to 100 restarts) filling every pool, all its pods
    running."""
    low_ns, _ = namespaces(strategy)
    stack.client.create(preemption_jobset("low", low_ns, strategy, "low", max_restarts=100))
    eventually(
        lambda: running_pods(stack, low_ns) == JOBS * PODS,
        f"low {strategy} pods running",
        120,
        ignoring=(KubeError,),
    )


def high_jobset_preempts_its_way_in(stack: Stack, strategy: str) -> int:
    """The high JobSet "high" (priority class `high`) created over the running low one, until all its pods
    run, each Job whole in a pool of its own (the stack's processes still alive). Returns the most
    exclusivity violations (`exclusive_violations`, within each priority level) seen meanwhile."""
    low_ns, high_ns = namespaces(strategy)
    stack.client.create(preemption_jobset("high", high_ns, strategy, "high"))
    violations = 0

    def high_running() -> bool:
        nonlocal violations
        violations = max(violations, exclusive_violations(stack, [low_ns, high_ns]))
        return bool(running_pods(stack, high_ns) == JOBS * PODS)

    eventually(high_running, f"high {strategy} pods running", 180, ignoring=(KubeError,))
    stack.check_alive()
    assert_each_job_whole_in_its_own_pool(stack, high_ns, JOBS)
    return violations


def run_preemption(stack: Stack, strategy: str) -> dict[str, Any]:
    low_ns, high_ns = namespaces(strategy)
    for namespace in (low_ns, high_ns):
        create_namespace(stack, namespace)
    low_jobset_running(stack, strategy)
    since = audit_log(stack).mark()
    violations = high_jobset_preempts_its_way_in(stack, strategy)
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
