"""What the JobSet end-to-end tests read off a running stack: where each Job's pods run, kubesim's counters,
and the writes to Jobs and pods in the order the API server made them (a watch: one global resourceVersion
orders every write, so "what did the workers look like when the driver was created" has an exact answer).
"""

from __future__ import annotations

import contextlib
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx

from devstack.exclusivity import node_domains
from devstack.kube import KubeError
from devstack.stack import Stack
from placement.constants import GKE_NODEPOOL_LABEL, JOB_NAME_LABEL

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


def resizer_metric(stack: Stack, name: str) -> float:
    text = httpx.get(stack.resizer_readyz(0).replace("/readyz", "/metrics"), timeout=5).text
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith(f"exclusive_placement_resizer_{name} ")
    )


@dataclass
class Watch:
    """A watch on one kind in one namespace, from now, in a background thread: every event in order."""

    stack: Stack
    kind: str
    namespace: str
    events: list[tuple[str, Obj]] = field(default_factory=list)
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Watch:
        _, version = self.stack.client.list_with_version(self.kind, namespace=self.namespace)
        self._thread = threading.Thread(target=self._follow, args=(version,), daemon=True)
        self._thread.start()
        return self

    def _follow(self, version: str) -> None:
        with contextlib.suppress(httpx.HTTPError, KubeError):
            for kind, obj in self.stack.client.watch(
                self.kind, namespace=self.namespace, resource_version=version
            ):
                if self._stop.is_set():
                    return
                self.events.append((kind, obj))

    def __exit__(self, *_: object) -> None:
        self._stop.set()
