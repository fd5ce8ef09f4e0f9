"""What the Kueue tests read from outside: a workload's Workload and its conditions, a JobSet's pods, and
replays of a pod watch."""

from __future__ import annotations

from typing import Any

from devstack.controlplane import kueue
from devstack.stack import Stack
from placement.constants import JOB_NAME_LABEL, JOBSET_NAME_LABEL
from tests.kube.workloads import pods_of

Obj = dict[str, Any]


def workload_of(stack: Stack, namespace: str, owner: str) -> Obj | None:
    for workload in stack.client.list("Workload", namespace=namespace):
        if any(ref.get("name") == owner for ref in workload["metadata"].get("ownerReferences", [])):
            return workload
    return None


def condition(workload: Obj | None, kind: str) -> str | None:
    for entry in (workload or {}).get("status", {}).get("conditions", []):
        if entry["type"] == kind:
            return str(entry["status"])
    return None


def pods_of_jobset(stack: Stack, namespace: str, name: str) -> list[Obj]:
    return [p for p in pods_of(stack, namespace) if p["metadata"]["labels"].get(JOBSET_NAME_LABEL) == name]


def running(pods: list[Obj]) -> int:
    return sum(1 for pod in pods if pod.get("status", {}).get("phase") == "Running")


def pools_ever_shared(events: list[tuple[str, Obj]], pools: dict[str, str]) -> dict[str, set[str]]:
    """Replaying a pod watch in order: pool -> the Jobs whose bound pods were in it at one moment, for every
    pool that ever held two Jobs' pods at once (empty: never). A terminating pod still counts."""
    bound: dict[str, tuple[str, str]] = {}  # pod -> (its Job, its pool), from binding until it is gone
    shared: dict[str, set[str]] = {}
    for kind, pod in events:
        name = pod["metadata"]["name"]
        node = pod["spec"].get("nodeName")
        if kind != "DELETED" and node and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
            bound[name] = (pod["metadata"]["labels"][JOB_NAME_LABEL], pools[node])
        else:
            bound.pop(name, None)
        for pool in {where for _, where in bound.values()}:
            jobs = {job for job, where in bound.values() if where == pool}
            if len(jobs) > 1:
                shared.setdefault(pool, set()).update(jobs)
    return shared


def bound_pods_of(events: list[tuple[str, Obj]], jobset: str) -> set[str]:
    return {
        pod["metadata"]["name"]
        for _, pod in events
        if pod["spec"].get("nodeName") and pod["metadata"]["labels"].get(JOBSET_NAME_LABEL) == jobset
    }


def create_local_queue(
    stack: Stack, namespace: str, name: str = kueue.LOCAL_QUEUE, cluster_queue: str = kueue.CLUSTER_QUEUE
) -> str:
    """A LocalQueue `name` of `cluster_queue` in `namespace`; its name."""
    stack.client.create(
        {
            "apiVersion": kueue.API_VERSION,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue},
        }
    )
    return name
