"""What the kube tier submits and reads off a running stack: the Jobs and JobSets it creates, where each
Job's pods run, and the writes to Jobs and pods in the order the API server made them (a watch: one global
resourceVersion orders every write, so "what did the workers look like when the driver was created" has an
exact answer).
"""

from __future__ import annotations

import copy
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from devstack.exclusivity import node_domains
from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from kubekit.client import KubeError
from placement.constants import GKE_NODEPOOL_LABEL, JOB_NAME_LABEL, PRIORITY_LABEL, TOPOLOGY_ANNOTATION
from tests.support.waiting import eventually

Obj = dict[str, Any]


def pods_of(stack: Stack, namespace: str) -> list[Obj]:
    return stack.client.list("Pod", namespace=namespace)


def domains_by_job(stack: Stack, namespace: str, *, running_only: bool = True) -> dict[str, set[str]]:
    """Job name -> the node-pool domains its (running) pods are in."""
    pools = node_domains(stack.client.list("Node"), GKE_NODEPOOL_LABEL)
    result: dict[str, set[str]] = defaultdict(set)
    for pod in pods_of(stack, namespace):
        node = pod["spec"].get("nodeName")
        if node and (not running_only or pod.get("status", {}).get("phase") == "Running"):
            result[pod["metadata"]["labels"][JOB_NAME_LABEL]].add(pools[node])
    return dict(result)


def running_pods(stack: Stack, namespace: str) -> int:
    return sum(1 for pod in pods_of(stack, namespace) if pod.get("status", {}).get("phase") == "Running")


def assert_each_job_whole_in_its_own_pool(stack: Stack, namespace: str, jobs: int) -> None:
    domains = domains_by_job(stack, namespace)
    assert len(domains) == jobs, domains
    assert all(len(used) == 1 for used in domains.values()), domains
    assert len({next(iter(used)) for used in domains.values()}) == jobs, domains


def set_taint(stack: Stack, nodes: list[str], taint: Obj | None) -> None:
    """Replace the taints of `nodes` by `taint` (None: no taint)."""
    for name in nodes:
        stack.client.patch("Node", name, {"spec": {"taints": [taint] if taint else []}})


@dataclass
class Watch:
    """A watch on one kind in one namespace, from now, in a background thread: every event in order.

    The watch stays open after the block (a stack stopped later breaks it then: that is no failure); one
    that broke inside the block fails it, since events may be missing."""

    stack: Stack
    kind: str
    namespace: str
    events: list[tuple[str, Obj]] = field(default_factory=list)
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _broken: BaseException | None = None

    def __enter__(self) -> Watch:
        _, version = self.stack.client.list_with_version(self.kind, namespace=self.namespace)
        self._thread = threading.Thread(target=self._follow, args=(version,), daemon=True)
        self._thread.start()
        return self

    def _follow(self, version: str) -> None:
        try:
            for kind, obj in self.stack.client.watch(
                self.kind, namespace=self.namespace, resource_version=version
            ):
                if self._stop.is_set():
                    return
                self.events.append((kind, obj))
        except Exception as error:  # the connection broke: the block's end says whether it matters
            if not self._stop.is_set():
                self._broken = error

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self._stop.set()
        if self._broken is not None and kind is None:
            raise AssertionError(f"the {self.kind} watch in {self.namespace} broke: {self._broken!r}")


REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def affinity_keys(pod: dict[str, Any]) -> set[str]:
    """The label keys every required pod (anti-)affinity term of `pod` selects on."""
    affinity = pod["spec"].get("affinity") or {}
    return {
        expression["key"]
        for kind in ("podAffinity", "podAntiAffinity")
        for term in (affinity.get(kind) or {}).get(REQUIRED) or []
        for expression in term["labelSelector"]["matchExpressions"]
    }


def exclusive_violations(stack: Stack, namespaces: list[str]) -> int:
    """Domains holding bound pods of two Jobs of the same priority (counted once per extra Job)."""
    pools = node_domains(stack.client.list("Node"), GKE_NODEPOOL_LABEL)
    jobs: dict[tuple[str, str], set[str]] = defaultdict(set)
    for namespace in namespaces:
        for pod in pods_of(stack, namespace):
            node = pod["spec"].get("nodeName")
            if node and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                labels = pod["metadata"]["labels"]
                jobs[(labels[PRIORITY_LABEL], pools[node])].add(f"{namespace}/{labels[JOB_NAME_LABEL]}")
    return sum(len(names) - 1 for names in jobs.values())


def with_job_spec(jobset: Obj, **fields: Any) -> Obj:
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"].update(fields)
    return jobset


def plain_job(name: str, namespace: str, pods: int) -> Obj:
    gpus = {"nvidia.com/gpu": "1"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL},
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            # the deleted leader and the repaired followers count as failed pods
            "backoffLimit": 6,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "w",
                            "image": "registry.example/worker:1",
                            "resources": {"requests": {"cpu": "1", **gpus}, "limits": gpus},
                        }
                    ],
                }
            },
        },
    }


def ordered_jobset(name: str, namespace: str, order: str) -> Obj:
    """workers (2 Jobs x 4) then driver (1 Job x 2), by `startupPolicy: InOrder` or `dependsOn` Ready."""
    jobset = exclusive_jobset(name, jobs=2, pods_per_job=4, namespace=namespace)
    workers = jobset["spec"]["replicatedJobs"][0]
    workers["name"] = "workers"
    driver = copy.deepcopy(workers)
    driver["name"], driver["replicas"] = "driver", 1
    driver["template"]["spec"]["completions"] = driver["template"]["spec"]["parallelism"] = 2
    jobset["spec"]["replicatedJobs"].append(driver)
    if order == "InOrder":
        jobset["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    else:
        driver["dependsOn"] = [{"name": "workers", "status": "Ready"}]
    return jobset


JOBS, PODS = 4, 4
"""The size of `placed_jobset`'s JobSet: 4 Jobs of 4 pods."""
HOLD = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


def placed_jobset(
    stack: Stack,
    namespace: str,
    strategy: str,
    *,
    hold_leaders_until: Callable[[], bool] | None,
    timeout: float = 120,
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
        eventually(hold_leaders_until, "the leaders' hold to be over", 90, ignoring=(KubeError,))
        set_taint(stack, nodes, None)
    eventually(
        lambda: running_pods(stack, namespace) == JOBS * PODS,
        f"{JOBS * PODS} {strategy} pods running",
        timeout,
        ignoring=(KubeError,),
    )
    stack.check_alive()
    assert_each_job_whole_in_its_own_pool(stack, namespace, JOBS)
    return pods_of(stack, namespace)


def jobset_deleted(stack: Stack, namespace: str, strategy: str) -> None:
    """Delete `placed_jobset`'s JobSet and wait until its pods are gone (its pools are free again)."""
    stack.client.delete("JobSet", strategy, namespace=namespace)
    eventually(lambda: not pods_of(stack, namespace), f"{strategy} pods gone", 90, ignoring=(KubeError,))
