"""Every strategy next to JobSet's own pod webhooks, as both e2e tiers run it (README "Running next to
JobSet"): a JobSet of JOBS x PODS placed and torn down, and what each tier asserts of its pods with the
takeover of JobSet's annotation on and off. Each tier says only how it counts the pod creations and JobSet's
webhook calls (kubesim's counters, or the audit log and kube-apiserver's metrics), which errors of its
client mean "not yet", and how long it waits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from placement.constants import (
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_KEY_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_JOB_KEY_LABEL,
    TOPOLOGY_ANNOTATION,
)
from tests.e2e.jobset_e2e_support import (
    affinity_keys,
    assert_each_job_whole_in_its_own_pool,
    pods_of,
    running_pods,
    set_taint,
)
from tests.support.waiting import Ignored, eventually

Obj = dict[str, Any]
JOBS, PODS = 4, 4
HOLD = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


def placed_jobset(
    stack: Stack,
    namespace: str,
    strategy: str,
    *,
    hold_leaders_until: Callable[[], bool] | None,
    ignoring: Ignored,
    timeout: float,
) -> list[Obj]:
    """Create a JobSet of JOBS x PODS named after `strategy`, wait until every pod runs (the stack's processes
    still alive) and each Job is whole in a pool of its own, and return the pods. `hold_leaders_until`:
    every node is tainted until it is true, so no leader is scheduled before then."""
    nodes = [node["metadata"]["name"] for node in stack.client.list("Node")]
    if hold_leaders_until is not None:
        set_taint(stack, nodes, HOLD)
    stack.client.create(
        exclusive_jobset(strategy, jobs=JOBS, pods_per_job=PODS, strategy=strategy, namespace=namespace)
    )
    if hold_leaders_until is not None:
        eventually(hold_leaders_until, "the leaders' hold to be over", 90, ignoring=ignoring)
        set_taint(stack, nodes, None)
    eventually(
        lambda: running_pods(stack, namespace) == JOBS * PODS,
        f"{JOBS * PODS} {strategy} pods running",
        timeout,
        ignoring=ignoring,
    )
    stack.check_alive()
    assert_each_job_whole_in_its_own_pool(stack, namespace, JOBS)
    return pods_of(stack, namespace)


def jobset_deleted(stack: Stack, namespace: str, strategy: str, *, ignoring: Ignored) -> None:
    """Delete `placed_jobset`'s JobSet and wait until its pods are gone (its pools are free again)."""
    stack.client.delete("JobSet", strategy, namespace=namespace)
    eventually(lambda: not pods_of(stack, namespace), f"{strategy} pods gone", 90, ignoring=ignoring)


def assert_jobset_injected_nothing(pods: list[Obj], strategy: str) -> None:
    """With the takeover: the pods carry this project's topology annotation, not JobSet's, and no JobSet
    affinity."""
    for pod in pods:
        annotations = pod["metadata"]["annotations"]
        assert JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION not in annotations, strategy
        assert TOPOLOGY_ANNOTATION in annotations, strategy
        assert JOBSET_JOB_KEY_LABEL not in affinity_keys(pod), strategy  # no JobSet affinity injected


def assert_no_gate_left(pods: list[Obj]) -> None:
    assert all(not pod["spec"].get("schedulingGates") for pod in pods)


def assert_both_projects_acted(pods: list[Obj]) -> None:
    """Without the takeover: every pod carries JobSet's topology annotation, and each Job's leader both
    projects' affinity terms."""
    leaders = [p for p in pods if p["metadata"]["annotations"][JOB_COMPLETION_INDEX_ANNOTATION] == "0"]
    assert len(leaders) == JOBS
    for pod in pods:
        assert pod["metadata"]["annotations"][JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION]
    for leader in leaders:
        assert {JOBSET_JOB_KEY_LABEL, JOB_KEY_LABEL} <= affinity_keys(leader)  # JobSet's terms next to ours
