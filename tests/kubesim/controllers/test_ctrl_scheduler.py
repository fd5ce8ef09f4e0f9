"""Scheduler behaviour on the in-process cluster: exclusive placement by affinity, unschedulable pods,
selectors, taints, gates, and the work counters."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from kubesim.controllers.preemption import NO_VICTIMS
from placement.constants import GKE_NODEPOOL_LABEL, JOB_KEY_LABEL
from tests.kubesim.controllers.ctrl_harness import Cluster, Run, cluster, exclusive_job, indexed_job, pod_spec

pytestmark = pytest.mark.timeout(120)


async def _pool_of(c: Cluster) -> dict[str, str]:
    items, _ = await c.server.list("nodes")
    return {n["metadata"]["name"]: n["metadata"]["labels"][GKE_NODEPOOL_LABEL] for n in items}


async def _bound(c: Cluster, n: int) -> list[dict[str, Any]] | None:
    pods = [p for p in await c.pods() if p["spec"].get("nodeName")]
    return pods if len(pods) >= n else None


def test_affinity_and_anti_affinity_place_one_job_per_pool(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=8, pools=4) as c:
            for number in range(4):
                await c.server.create("jobs", exclusive_job(f"job-{number}", 2), namespace="default")
            pods = await c.wait_for(lambda: _bound(c, 8), 30, "eight bound pods")
            pools = await _pool_of(c)
            by_job: dict[str, set[str]] = defaultdict(set)
            for pod in pods:
                by_job[pod["metadata"]["labels"][JOB_KEY_LABEL]].add(pools[pod["spec"]["nodeName"]])
            assert all(len(p) == 1 for p in by_job.values()), by_job
            assert len({next(iter(p)) for p in by_job.values()}) == 4
            assert c.stats.scheduler_affinity_evaluations > 0

            # a fifth exclusive Job finds no free pool: it stays Pending, marked Unschedulable
            await c.server.create("jobs", exclusive_job("job-4", 2), namespace="default")
            waiting = await c.wait_for(lambda: _unschedulable(c, "job-4"), 30, "Unschedulable condition")
            # InterPodAffinity's Filter checks the pod's own anti-affinity before existing pods' (symmetry)
            assert waiting == (
                "0/8 nodes are available: 8 node(s) didn't match pod anti-affinity rules. "
                f"preemption: 0/8 nodes are available: 8 {NO_VICTIMS}."
            )

            # freeing a pool (the Job is deleted, its pods garbage-collected) lets it in
            await c.server.delete("jobs", "job-0", namespace="default")
            await c.wait_for(lambda: _job_bound(c, "job-4", 2), 60, "job-4 placed in the freed pool")
            placed = {pools[p["spec"]["nodeName"]] for p in await c.pods() if _key(p) == "job-4"}
            assert placed == by_job["job-0"]

    run(scenario())


def test_unschedulable_pods_stay_pending_with_the_reason(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2) as c:
            await c.server.create("jobs", indexed_job("huge", 1, spec=pod_spec(gpus=16)), namespace="default")
            message = await c.wait_for(lambda: _unschedulable(c, "huge"), 30, "Unschedulable condition")
            assert message == (
                "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. "
                f"preemption: 0/4 nodes are available: 4 {NO_VICTIMS}."
            )
            assert c.stats.scheduler_unschedulable >= 1
            (pod,) = await c.pods()
            assert not pod["spec"].get("nodeName")
            assert pod["status"].get("phase", "Pending") == "Pending"

    run(scenario())


def test_node_selector_and_taints_and_tolerations(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2) as c:
            nodes, _ = await c.server.list("nodes")
            tainted = [n for n in nodes if n["metadata"]["labels"][GKE_NODEPOOL_LABEL] == "pool-01"]
            for node in tainted:
                await c.server.patch(
                    "nodes",
                    node["metadata"]["name"],
                    {"spec": {"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]}},
                )
            selector = {GKE_NODEPOOL_LABEL: "pool-01"}
            await c.server.create(
                "jobs",
                indexed_job("blocked", 1, spec=pod_spec(gpus=1, nodeSelector=selector)),
                namespace="default",
            )
            message = await c.wait_for(lambda: _unschedulable(c, "blocked"), 30, "blocked by the taint")
            assert "2 node(s) had untolerated taint {dedicated: ml}" in message
            assert "2 node(s) didn't match Pod's node affinity/selector" in message
            tolerations = [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]
            await c.server.create(
                "jobs",
                indexed_job(
                    "tolerant", 2, spec=pod_spec(gpus=1, nodeSelector=selector, tolerations=tolerations)
                ),
                namespace="default",
            )
            await c.wait_for(lambda: _job_bound(c, "tolerant", 2), 30, "tolerant pods bound")
            pools = await _pool_of(c)
            assert {pools[p["spec"]["nodeName"]] for p in await c.pods() if _job_name(p) == "tolerant"} == {
                "pool-01"
            }

    run(scenario())


def test_gated_pods_wait_until_their_gates_are_removed(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=2, pools=1, components=("scheduler",)) as c:
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "gated", "namespace": "default"},
                "spec": {**pod_spec(gpus=1), "schedulingGates": [{"name": "example.com/wait"}]},
            }
            await c.server.create("pods", pod, namespace="default")
            other = {**pod, "metadata": {"name": "free", "namespace": "default"}, "spec": pod_spec(gpus=1)}
            await c.server.create("pods", other, namespace="default")
            await c.wait_for(lambda: _bound(c, 1), 30, "the ungated pod bound")
            assert not (await c.server.get("pods", "gated", namespace="default"))["spec"].get("nodeName")
            await c.server.patch("pods", "gated", {"spec": {"schedulingGates": None}}, namespace="default")
            await c.wait_for(lambda: _bound(c, 2), 30, "the gated pod bound after the gate went")

    run(scenario())


def test_required_node_affinity_and_resource_packing(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2, components=("scheduler",)) as c:
            affinity = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": GKE_NODEPOOL_LABEL, "operator": "NotIn", "values": ["pool-00"]}
                                ]
                            }
                        ]
                    }
                }
            }
            for number in range(5):
                await c.server.create(
                    "pods",
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"name": f"p{number}", "namespace": "default"},
                        "spec": pod_spec(gpus=4, affinity=affinity),
                    },
                    namespace="default",
                )
            pods = await c.wait_for(lambda: _bound(c, 4), 30, "four pods bound")
            pools = await _pool_of(c)
            assert {pools[p["spec"]["nodeName"]] for p in pods} == {"pool-01"}
            # pool-01 has 2 nodes x 8 GPUs: the fifth 4-GPU pod cannot fit
            message = await c.wait_for(lambda: _unschedulable_pod(c), 30, "the fifth pod unschedulable")
            assert "2 Insufficient nvidia.com/gpu" in message
            assert "2 node(s) didn't match Pod's node affinity/selector" in message

    run(scenario())


def _label(pod: dict[str, Any], key: str) -> str | None:
    value: str | None = pod["metadata"].get("labels", {}).get(key)
    return value


def _key(pod: dict[str, Any]) -> str | None:
    return _label(pod, JOB_KEY_LABEL)


def _job_name(pod: dict[str, Any]) -> str | None:
    return _label(pod, "batch.kubernetes.io/job-name")


async def _job_bound(c: Cluster, job: str, n: int) -> bool:
    return sum(1 for p in await c.pods() if _job_name(p) == job and p["spec"].get("nodeName")) >= n


async def _unschedulable(c: Cluster, job: str) -> str | None:
    for pod in await c.pods():
        if _job_name(pod) != job:
            continue
        for item in pod.get("status", {}).get("conditions", []):
            if item["type"] == "PodScheduled" and item.get("reason") == "Unschedulable":
                return str(item["message"])
    return None


async def _unschedulable_pod(c: Cluster) -> str | None:
    for pod in await c.pods():
        for item in pod.get("status", {}).get("conditions", []):
            if item["type"] == "PodScheduled" and item.get("reason") == "Unschedulable":
                return str(item["message"])
    return None
