"""Follows a namespace's pods over ONE watch stream: exclusivity replay, time to all running, and each
Job's timeline (leader created, leader bound, each index first seen and first Running).

One long request instead of polling keeps the measurement itself out of the API counters (the watch is
opened before the counters are reset, so it is not counted at all).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import httpx

from bench.gang import PodEvent, PodStage, jobset_of, stage_of
from bench.measures import JobTimeline
from devstack.exclusivity import ExclusivityReplay, pod_state
from placement.constants import JOB_COMPLETION_INDEX_ANNOTATION, LEADER_COMPLETION_INDEX

log = logging.getLogger(__name__)
STARTED_PHASES = frozenset({"Running", "Succeeded"})


class PodRecorder:
    def __init__(
        self, node_domain: Mapping[str, str], expected_pods: int, clock: Callable[[], float] = time.monotonic
    ):
        self._clock = clock
        self.replay = ExclusivityReplay(node_domain)
        self.expected_pods = expected_pods
        self.started: set[tuple[str, str]] = set()
        """(job, completion index) of every pod seen Running (or already Succeeded)."""
        self.all_running_at: float | None = None
        self.all_running = asyncio.Event()
        self.connected = asyncio.Event()
        self.events = 0
        self.timelines: dict[str, JobTimeline] = {}
        """Job key → its leader's creation and bind, each index's first sighting and first Running, as seen
        on the watch."""

    def observe(self, event_type: str, pod: dict[str, Any]) -> None:
        self.events += 1
        state = pod_state(pod, deleted=event_type == "DELETED")
        self.replay.observe(state)
        if event_type == "DELETED" or not state.job:
            return
        now = self._clock()
        timeline = self.timelines.setdefault(state.job, JobTimeline())
        index = (pod["metadata"].get("annotations") or {}).get(JOB_COMPLETION_INDEX_ANNOTATION, "")
        timeline.created.setdefault(index, now)
        if index == LEADER_COMPLETION_INDEX:
            if timeline.leader_created is None:
                timeline.leader_created = now
            if state.node and timeline.leader_bound is None:
                timeline.leader_bound = now
        if (pod.get("status") or {}).get("phase") in STARTED_PHASES:
            timeline.running.setdefault(index, now)
            self.started.add((state.job, index))
            if len(self.started) >= self.expected_pods and self.all_running_at is None:
                self.all_running_at = now
                self.all_running.set()

    async def follow(self, http: httpx.AsyncClient, namespace: str) -> None:
        """Watch pods in `namespace` until cancelled."""
        await watch_pods(http, namespace, self.connected, self.observe)


WATCH_RESUMES = 100
"""How many times a pod watch the API server ended is resumed before the recorder gives up."""


async def watch_pods(
    http: httpx.AsyncClient,
    namespace: str,
    connected: asyncio.Event,
    observe: Callable[[str, dict[str, Any]], None],
) -> None:
    """Feed every pod event of `namespace` to `observe` until cancelled (`watch_objects`)."""
    await watch_objects(http, f"/api/v1/namespaces/{namespace}/pods", connected, observe)


async def watch_objects(
    http: httpx.AsyncClient,
    path: str,
    connected: asyncio.Event,
    observe: Callable[[str, dict[str, Any]], None],
) -> None:
    """Feed every event of the collection at `path` (a namespace's pods, its JobSets) to `observe` until
    cancelled. kube-apiserver ends a watch whose client falls behind its events (a burst of a thousand pods
    on a busy machine) and every watch at its timeout; the watch is then resumed from the last
    resourceVersion it delivered, so no event is missed. An ERROR event (e.g. 410 Expired: that version is
    no longer served) ends it with the error."""
    version: str | None = None
    for attempt in range(WATCH_RESUMES + 1):
        if attempt:
            log.info("the API server ended the watch of %s: resumed from resourceVersion %s", path, version)
        version = await _watch_from(http, path, version, connected, observe)
    raise RuntimeError(f"the API server ended the watch of {path} {WATCH_RESUMES + 1} times")


async def _watch_from(
    http: httpx.AsyncClient,
    path: str,
    version: str | None,
    connected: asyncio.Event,
    observe: Callable[[str, dict[str, Any]], None],
) -> str | None:
    """One watch request, from `version` if given; returns the last resourceVersion it delivered."""
    params = {"watch": "true", "timeoutSeconds": "86400", "allowWatchBookmarks": "true"}
    if version is not None:
        params["resourceVersion"] = version
    async with http.stream("GET", path, params=params) as response:
        response.raise_for_status()
        connected.set()
        async for line in response.aiter_lines():
            if not line.strip():
                continue
            event = json.loads(line)
            kind = event.get("type")
            if kind == "ERROR":
                raise RuntimeError(f"watch of {path} failed: {event.get('object')}")
            version = (event.get("object") or {}).get("metadata", {}).get("resourceVersion") or version
            if kind in {"ADDED", "MODIFIED", "DELETED"}:
                observe(kind, event["object"])
    return version


async def stop(task: asyncio.Task[None]) -> str:
    """Cancel the watch; returns why it had already ended on its own ("" if it was still running)."""
    if task.done():
        error = None if task.cancelled() else task.exception()
        return f"the pod watch ended: {error!r}" if error else "the pod watch ended"
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return ""


class BacklogTracker:
    """Counts a backlog namespace's pods as they are created and bound (on its own watch, opened before
    the counters are reset): when all exist, and how many the scheduler had not bound yet."""

    def __init__(self, expected_pods: int):
        self.expected_pods = expected_pods
        self.created: set[str] = set()
        self.bound: set[str] = set()
        self.connected = asyncio.Event()
        self.all_created = asyncio.Event()

    @property
    def pending(self) -> int:
        """Backlog pods created but not bound yet: the scheduler work queued ahead of a new pod."""
        return len(self.created - self.bound)

    def observe(self, event_type: str, pod: dict[str, Any]) -> None:
        if event_type == "DELETED":
            return
        key = pod["metadata"]["name"]
        self.created.add(key)
        if (pod.get("spec") or {}).get("nodeName"):
            self.bound.add(key)
        if len(self.created) >= self.expected_pods:
            self.all_created.set()

    async def follow(self, http: httpx.AsyncClient, namespace: str) -> None:
        """Watch pods in `namespace` until cancelled."""
        await watch_pods(http, namespace, self.connected, self.observe)


class GangRecorder(PodRecorder):
    """A PodRecorder that also records every pod's stage changes as `PodEvent`s (a gang scenario's
    timeline) and signals when every JobSet of `sizes` (JobSet name → its pods) has completed."""

    def __init__(
        self,
        node_domain: Mapping[str, str],
        sizes: Mapping[str, int],
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__(node_domain, sum(sizes.values()), clock)
        self._node_domain = node_domain
        self.sizes = dict(sizes)
        self.pod_events: list[PodEvent] = []
        """`at` on the recorder's clock until `relative_to` shifts them."""
        self._last: dict[str, tuple[str, PodStage]] = {}
        self._succeeded: dict[str, set[str]] = {name: set() for name in sizes}
        self.all_complete = asyncio.Event()

    def observe(self, event_type: str, pod: dict[str, Any]) -> None:
        super().observe(event_type, pod)
        jobset = jobset_of(pod)
        if jobset not in self.sizes:
            return
        meta = pod["metadata"]
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        stage = stage_of(pod, deleted=event_type == "DELETED")
        domain = self._node_domain.get((pod.get("spec") or {}).get("nodeName") or "", "")
        if self._last.get(key) == (domain, stage):
            return
        self._last[key] = (domain, stage)
        self.pod_events.append(PodEvent(self._clock(), key, jobset, domain, stage))
        if stage is PodStage.SUCCEEDED:
            self._succeeded[jobset].add(key)
            if all(len(self._succeeded[name]) >= size for name, size in self.sizes.items()):
                self.all_complete.set()

    def relative_to(self, start: float) -> list[PodEvent]:
        return [replace(event, at=event.at - start) for event in self.pod_events]
