"""End to end on kubesim with the real webhook registered (devstack: every component a real process), and
JobSet's own pod webhooks and pod reconciler on, as in a cluster with JobSet installed.

A JobSet of 4 Jobs x 8 pods, exclusive on the node-pool label: each Job must end at 8/8 with all its pods
Running in one pool of its own, every pod created exactly once, and no pod creation rejected by either
project's webhooks.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest

from devstack.commands import KubesimFlags
from devstack.manifests import exclusive_jobset
from devstack.stack import Stack, StackOptions
from placement.constants import GKE_NODEPOOL_LABEL, JOBSET_NAME_LABEL, RESIZE_LABEL
from tests.support.metrics import resizer_metric
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

CLUSTER = KubesimFlags(nodes=8, pools=4, gpus_per_node=8, time_scale=0.05)
JOBS, PODS = 4, 8
MAINTENANCE = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


def placement(stack: Stack) -> tuple[list[dict[str, Any]], dict[str, set[str]], int]:
    """(child Jobs, pools used per Job, Running pods)."""
    pools_of_node = {
        n["metadata"]["name"]: n["metadata"]["labels"][GKE_NODEPOOL_LABEL] for n in stack.client.list("Node")
    }
    jobs = [
        j
        for j in stack.client.list("Job", namespace="default")
        if JOBSET_NAME_LABEL in j["metadata"].get("labels", {})
    ]
    pools: dict[str, set[str]] = defaultdict(set)
    running = 0
    for pod in stack.client.list("Pod", namespace="default"):
        owner = next(
            (ref["name"] for ref in pod["metadata"].get("ownerReferences", []) if ref["kind"] == "Job"), None
        )
        node = pod["spec"].get("nodeName")
        if owner and node:
            pools[owner].add(pools_of_node[node])
        running += pod.get("status", {}).get("phase") == "Running"
    return jobs, pools, running


def all_running(stack: Stack) -> bool:
    stack.check_alive()
    jobs, _, running = placement(stack)
    return len(jobs) == JOBS and running == JOBS * PODS


def set_maintenance_taint(stack: Stack, on: bool) -> None:
    """Taint (or untaint) every node so leaders cannot bind until we say so."""
    for node in stack.client.list("Node"):
        taints = [t for t in node["spec"].get("taints") or [] if t["key"] != MAINTENANCE["key"]]
        if on:
            taints.append(MAINTENANCE)
        response = httpx.patch(
            f"{stack.server}/api/v1/nodes/{node['metadata']['name']}",
            json={"spec": {"taints": taints}},
            headers={"Content-Type": "application/merge-patch+json"},
            timeout=10,
        )
        response.raise_for_status()


def gated_pods(stack: Stack) -> int:
    return sum(
        1 for pod in stack.client.list("Pod", namespace="default") if pod["spec"].get("schedulingGates")
    )


def test_elastic_jobset_lands_one_job_per_pool_without_rejected_creations(tmp_path: Path) -> None:
    options = StackOptions(
        cluster=CLUSTER, default_strategy="elastic", workdir=tmp_path / "stack", startup_timeout=90
    )
    with Stack(options) as stack:
        stack.client.reset_stats()
        stack.client.create(exclusive_jobset("train", jobs=JOBS, pods_per_job=PODS))
        eventually(
            lambda: all_running(stack),
            f"{JOBS * PODS} pods Running",
            120,
            interval=0.25,
            ignoring=(httpx.HTTPError,),
        )
        assert_exclusive_and_complete(stack)
        jobs, _, _ = placement(stack)
        assert all(job["metadata"]["labels"][RESIZE_LABEL] == "done" for job in jobs)
        assert resizer_metric(stack, "resizes_total") == JOBS


def test_scheduling_gate_followers_are_released_into_their_leaders_pool(tmp_path: Path) -> None:
    options = StackOptions(
        cluster=CLUSTER, default_strategy="scheduling-gate", workdir=tmp_path / "stack", startup_timeout=90
    )
    with Stack(options) as stack:
        set_maintenance_taint(stack, on=True)  # leaders wait, so every follower is created gated
        stack.client.reset_stats()
        stack.client.create(exclusive_jobset("train", jobs=JOBS, pods_per_job=PODS))
        eventually(
            lambda: gated_pods(stack) == JOBS * (PODS - 1),
            "every follower created gated",
            60,
            ignoring=(httpx.HTTPError,),
        )
        set_maintenance_taint(stack, on=False)
        eventually(
            lambda: all_running(stack),
            f"{JOBS * PODS} pods Running",
            120,
            interval=0.25,
            ignoring=(httpx.HTTPError,),
        )
        assert_exclusive_and_complete(stack)
        assert gated_pods(stack) == 0
        assert resizer_metric(stack, "gate_releases_total") == JOBS * (PODS - 1)


def assert_exclusive_and_complete(stack: Stack) -> None:
    jobs, pools, running = placement(stack)
    assert running == JOBS * PODS
    for job in jobs:
        assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (PODS, PODS)
    assert all(len(used) == 1 for used in pools.values()), pools
    assert len({next(iter(used)) for used in pools.values()}) == JOBS, pools
    stats = stack.client.stats()
    assert stats["pods"]["create_rejected"] == 0
    assert stats["pods"]["create_accepted"] == JOBS * PODS  # every pod created exactly once
    assert stats["jobset_webhooks"]["calls"] >= JOBS * PODS  # JobSet's webhooks saw every pod...
    assert stats["jobset_webhooks"]["denied"] == 0  # ...and left them to this project
