"""A high-priority JobSet preempting its way into the domains a low-priority one fills, as both e2e tiers
(kubesim, kube) run it: the two JobSets and the watch over exclusivity while the high one takes over. Each
tier says only how it makes the namespaces and the PriorityClasses, counts the preemption victims (kubesim's
counters, or kube-scheduler's deletions in the audit log), reads the low JobSet's restarts, cleans up, and
which errors of its client mean "not yet".
"""

from __future__ import annotations

from typing import Any

from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from tests.e2e.jobset_e2e_support import (
    assert_each_job_whole_in_its_own_pool,
    exclusive_violations,
    running_pods,
)
from tests.support.waiting import Ignored, eventually

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


def low_jobset_running(stack: Stack, strategy: str, *, ignoring: Ignored) -> None:
    """The low JobSet "low" (priority class `low`, up to 100 restarts) filling every pool, all its pods
    running."""
    low_ns, _ = namespaces(strategy)
    stack.client.create(preemption_jobset("low", low_ns, strategy, "low", max_restarts=100))
    eventually(
        lambda: running_pods(stack, low_ns) == JOBS * PODS,
        f"low {strategy} pods running",
        120,
        ignoring=ignoring,
    )


def high_jobset_preempts_its_way_in(stack: Stack, strategy: str, *, ignoring: Ignored) -> int:
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

    eventually(high_running, f"high {strategy} pods running", 180, ignoring=ignoring)
    stack.check_alive()
    assert_each_job_whole_in_its_own_pool(stack, high_ns, JOBS)
    return violations
