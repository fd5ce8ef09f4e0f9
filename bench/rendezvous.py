"""The gang scenario's workload: a rendezvous the benchmark plays.

A distributed training program computes only while all of its pods run, so a partially placed JobSet holds
its domains and never finishes. kwok has no such model: its pods finish `pod-complete` seconds after they
started, each on its own. The benchmark therefore plays the program's rendezvous itself. It watches the
gang's pods (the `bench.exclusive-placement.io/gang` and `gang-size` annotations of
`bench.scenarios.gang_jobset_manifest`) and, the moment all members of a gang are Running, gives each of
them kwok's run-time annotations (`devstack.controlplane.kwok.run_time_annotations`): kwok completes them
that many seconds later. A gang that is never whole is never started, holds its domains and never
completes.

The clock does not pause when a member stops after the start (no gang scenario stops one). The patches
carry the user agent `bench-rendezvous`, which `bench.audit` sets aside as the benchmark's own
instrumentation: a training program's progress costs the API server no request either.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.recorder import watch_pods
from bench.scenarios import GANG_ANNOTATION, GANG_SIZE_ANNOTATION
from devstack.controlplane.kwok import run_time_annotations
from kubekit.client import is_not_found

RENDEZVOUS_AGENT = "bench-rendezvous"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class Membership:
    gang: str
    """namespace/name of the gang."""
    size: int


def membership(pod: dict[str, Any]) -> Membership | None:
    """The pod's gang from its annotations; None when it names none or its size is not a positive integer."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    name = annotations.get(GANG_ANNOTATION)
    if not name:
        return None
    try:
        size = int(str(annotations.get(GANG_SIZE_ANNOTATION, "")))
    except ValueError:
        return None
    if size < 1:
        return None
    return Membership(f"{meta.get('namespace') or ''}/{name}", size)


@dataclass
class _Gang:
    size: int
    running: set[str] = field(default_factory=set)
    started: bool = False


@dataclass
class Rendezvous:
    """Which gang members to start, from the pod watch (pure bookkeeping)."""

    gangs: dict[str, _Gang] = field(default_factory=dict)

    def observe(self, event_type: str, pod: dict[str, Any]) -> list[str]:
        """The pods (`namespace/name`) to start now: every Running member of a gang that just became
        whole, or a member that started running after its gang had."""
        member = membership(pod)
        if member is None:
            return []
        meta = pod["metadata"]
        key = f"{meta.get('namespace', '')}/{meta['name']}"
        gang = self.gangs.setdefault(member.gang, _Gang(member.size))
        running = event_type != "DELETED" and (pod.get("status") or {}).get("phase") == "Running"
        if not running or meta.get("deletionTimestamp"):
            gang.running.discard(key)
            return []
        if key in gang.running:
            return []
        gang.running.add(key)
        if gang.started:
            return [key]
        if len(gang.running) >= gang.size:
            gang.started = True
            return sorted(gang.running)
        return []


async def _start(http: httpx.AsyncClient, pods: list[str], annotations: dict[str, str]) -> None:
    body = {"metadata": {"annotations": annotations}}
    headers = {"User-Agent": RENDEZVOUS_AGENT, "Content-Type": MERGE_PATCH}

    async def patch(key: str) -> None:
        namespace, name = key.split("/", 1)
        response = await http.patch(f"/api/v1/namespaces/{namespace}/pods/{name}", json=body, headers=headers)
        if not is_not_found(response.status_code):  # a member deleted meanwhile has nothing left to run
            response.raise_for_status()

    await asyncio.gather(*(patch(key) for key in pods))


async def play_rendezvous(
    http: httpx.AsyncClient, namespace: str, run_seconds: float, connected: asyncio.Event
) -> None:
    """Start the gangs of `namespace` as they become whole (each member runs `run_seconds` from then),
    until cancelled; `connected` is set once the pod watch is open. A failed start ends it with the error."""
    rendezvous = Rendezvous()
    annotations = run_time_annotations(run_seconds)
    to_start: asyncio.Queue[list[str]] = asyncio.Queue()

    def observe(event_type: str, pod: dict[str, Any]) -> None:
        pods = rendezvous.observe(event_type, pod)
        if pods:
            to_start.put_nowait(pods)

    async def starter() -> None:
        while True:
            await _start(http, await to_start.get(), annotations)

    async with asyncio.TaskGroup() as group:  # a failed start cancels the watch too
        group.create_task(watch_pods(http, namespace, connected, observe))
        group.create_task(starter())
