"""Every strategy on the real control plane, next to JobSet's real controller and webhooks.

With the takeover of JobSet's annotation (the default), JobSet's pod webhooks are still called for every
JobSet pod (their objectSelector matches all of them) but deny none and add no affinity; elastic and
scheduling-gate create every pod exactly once (the audit log counts the creations). Without the takeover,
both projects act on every exclusive pod: JobSet's validating webhook denies scheduling-gate's gated
followers until their leader is scheduled, and leaders carry both projects' affinity terms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from devstack.stack import Stack
from placement.constants import (
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_KEY_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_JOB_KEY_LABEL,
    STRATEGIES,
    TOPOLOGY_ANNOTATION,
    Strategy,
)
from tests.kube.conftest import KubeStackFactory
from tests.kube.kube_support import (
    audit_log,
    create_namespace,
    jobset_webhook_calls,
    pod_creates,
    webhook_admissions,
)
from tests.kube.workloads import (
    JOBS,
    PODS,
    affinity_keys,
    jobset_deleted,
    placed_jobset,
    pods_of,
)

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-strategies")]

Obj = dict[str, Any]


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


def run_jobset(
    stack: Stack, namespace: str, strategy: str, *, hold_leaders_until: Callable[[], bool] | None = None
) -> dict[str, Any]:
    """Place a JobSet of JOBS x PODS (`placed_jobset`); return the pods, the pod creations by response code
    and JobSet's webhook calls and denials of exactly this run."""
    since, admissions = audit_log(stack).mark(), webhook_admissions(stack)
    pods = placed_jobset(stack, namespace, strategy, hold_leaders_until=hold_leaders_until)
    calls, denied = jobset_webhook_calls(admissions, webhook_admissions(stack))
    creates = pod_creates(stack, namespace, since=since)
    jobset_deleted(stack, namespace, strategy)
    return {"pods": pods, "creates": creates, "jobset_calls": calls, "jobset_denied": denied}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_places_a_jobset_next_to_jobsets_own_webhooks(
    kube_stack: Stack, namespace: str, strategy: str
) -> None:
    def every_follower_created() -> bool:
        return len(pods_of(kube_stack, namespace)) == JOBS * PODS

    hold = every_follower_created if strategy == Strategy.SCHEDULING_GATE else None
    run = run_jobset(kube_stack, namespace, strategy, hold_leaders_until=hold)
    # JobSet's webhooks were called for every JobSet pod (mutating and validating), and denied none
    assert run["jobset_calls"] >= 2 * JOBS * PODS
    assert run["jobset_denied"] == 0
    assert_jobset_injected_nothing(run["pods"], strategy)
    if strategy in (Strategy.ELASTIC, Strategy.SCHEDULING_GATE, Strategy.AFFINITY):
        assert run["creates"][403] == 0
    if strategy in (Strategy.ELASTIC, Strategy.SCHEDULING_GATE):
        assert run["creates"] == {201: JOBS * PODS}  # every pod created exactly once
    if strategy == Strategy.SCHEDULING_GATE:
        assert_no_gate_left(run["pods"])


def test_without_the_takeover_both_projects_act_on_every_pod(kube_stack_factory: KubeStackFactory) -> None:
    stack = kube_stack_factory(jobset_takeover=False)
    namespace = "no-takeover"
    create_namespace(stack, namespace)
    before = webhook_admissions(stack)

    def jobset_denied_followers() -> bool:
        return jobset_webhook_calls(before, webhook_admissions(stack))[1] >= JOBS

    gated = run_jobset(stack, namespace, Strategy.SCHEDULING_GATE, hold_leaders_until=jobset_denied_followers)
    # JobSet's vpod.kb.io denies the gated followers ("follower pod node selector not set") until their
    # leader is scheduled: scheduling-gate degrades to JobSet's own rejection loop
    assert gated["jobset_denied"] > 0
    assert gated["creates"][403] >= gated["jobset_denied"]
    assert gated["creates"][201] == JOBS * PODS
    assert_both_projects_acted(gated["pods"])

    elastic = run_jobset(stack, namespace, Strategy.ELASTIC)
    # elastic creates each follower after its leader is bound: JobSet's webhook pins it where ours does
    assert elastic["jobset_calls"] >= 2 * JOBS * PODS
    assert elastic["creates"][403] == elastic["jobset_denied"]
