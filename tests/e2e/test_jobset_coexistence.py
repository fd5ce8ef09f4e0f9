"""With JobSet installed (kubesim runs JobSet's own pod webhooks and pod reconciler, as a JobSet install
does): every strategy on a real stack, with the takeover of JobSet's annotation on (the default) and off.

With the takeover, JobSet's webhooks still see every JobSet pod (their objectSelector matches all of them)
but deny none and inject nothing; elastic and scheduling-gate create every pod exactly once. Without it,
both projects act on every exclusive pod: JobSet's validating webhook denies the gated followers of
scheduling-gate until their leader is scheduled (scheduling-gate degrades to gate), and leaders carry both
projects' affinity terms — the behaviour README "Running next to JobSet" documents.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from devstack.manifests import exclusive_jobset
from devstack.scenario import ensure_namespace
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
from tests.e2e.jobset_e2e_support import (
    affinity_keys,
    assert_each_job_whole_in_its_own_pool,
    pods_of,
    running_pods,
    set_taint,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

JOBS, PODS = 4, 4
HOLD = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


def run_jobset(
    stack: Stack, strategy: str, *, hold_leaders_until: Callable[[str], bool] | None = None
) -> dict[str, Any]:
    """Create a JobSet of JOBS x PODS in a namespace of its own, wait until every pod runs, and return
    kubesim's counters for exactly that run and the pods. `hold_leaders_until(namespace)`: every node is
    tainted until it is true, so no leader is scheduled before then."""
    namespace = f"coexist-{strategy}"
    ensure_namespace(stack.client, namespace)
    nodes = [node["metadata"]["name"] for node in stack.client.list("Node")]
    stack.client.reset_stats()
    if hold_leaders_until is not None:
        set_taint(stack, nodes, HOLD)
    stack.client.create(
        exclusive_jobset(strategy, jobs=JOBS, pods_per_job=PODS, strategy=strategy, namespace=namespace)
    )
    if hold_leaders_until is not None:
        eventually(
            lambda: hold_leaders_until(namespace),
            "the leaders' hold to be over",
            90,
            ignoring=(httpx.HTTPError,),
        )
        set_taint(stack, nodes, None)
    eventually(
        lambda: running_pods(stack, namespace) == JOBS * PODS,
        f"{JOBS * PODS} {strategy} pods running",
        90,
        ignoring=(httpx.HTTPError,),
    )
    stack.check_alive()
    assert_each_job_whole_in_its_own_pool(stack, namespace, JOBS)
    stats = stack.client.stats()
    pods = pods_of(stack, namespace)
    stack.client.delete("JobSet", strategy, namespace=namespace)
    eventually(
        lambda: not pods_of(stack, namespace), f"{strategy} pods gone", 90, ignoring=(httpx.HTTPError,)
    )
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
        for pod in pods:
            annotations = pod["metadata"]["annotations"]
            assert JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION not in annotations, strategy
            assert TOPOLOGY_ANNOTATION in annotations, strategy
            assert JOBSET_JOB_KEY_LABEL not in affinity_keys(pod), strategy  # no JobSet affinity injected
        if strategy in (Strategy.ELASTIC, Strategy.SCHEDULING_GATE, Strategy.AFFINITY):
            assert stats["pods"]["create_rejected"] == 0, strategy
        if strategy in (Strategy.ELASTIC, Strategy.SCHEDULING_GATE):
            assert stats["pods"]["create_accepted"] == JOBS * PODS, strategy  # every pod created once
        if strategy == Strategy.SCHEDULING_GATE:
            assert all(not pod["spec"].get("schedulingGates") for pod in pods)


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
    leaders = [
        p for p in gated["pods"] if p["metadata"]["annotations"][JOB_COMPLETION_INDEX_ANNOTATION] == "0"
    ]
    assert len(leaders) == JOBS
    for pod in gated["pods"]:
        assert pod["metadata"]["annotations"][JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION]
    for leader in leaders:
        assert {JOBSET_JOB_KEY_LABEL, JOB_KEY_LABEL} <= affinity_keys(leader)  # JobSet's terms next to ours

    elastic = run_jobset(stack, Strategy.ELASTIC)
    # elastic still creates each follower after its leader is bound, so JobSet's webhook pins it to the
    # same domain ours does; it runs whole, but every pod passed both projects' webhooks
    assert elastic["stats"]["jobset_webhooks"]["calls"] >= JOBS * PODS
