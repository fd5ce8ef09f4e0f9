"""The kubelets of all nodes: bound pods start, run, finish; deletions are completed; nodes can fail.

A bound pod is admitted at once: its first status (Pending, containers `ContainerCreating`) is written
when the kubelet sees the bind. `kubelet_start_delay_seconds` after the bind its containers start (events
Pulled, Created, Started) and the pod becomes Running and Ready; with `pod_run_seconds` set it becomes
Succeeded (exit code 0) that long after. Each status goes out as upstream's status manager sends it: a GET
of the pod, then a PATCH of the status subresource unless nothing changed. A pod with a deletionTimestamp
has its running containers stopped (a Killing event each) and is removed (grace period 0)
`kubelet_stop_delay_seconds` later. `fail_nodes` models a node going away: NotReady with the node
lifecycle controller's unreachable taints, and its pods Failed.

Gang members (`gang.py`, a simulator workload model) run on their gang's clock instead of their own: they
succeed once their gang has been whole (every member Running) for `pod_run_seconds` in all.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.interface import KubeApi
from kubesim.stats import Stats

from .gang import GangProgress, membership
from .informer import Handlers, Informer
from .kubelet_events import NodeEventRecorders, container_start_events, container_stop_events
from .objects import Obj, is_deleting, is_terminal, new_condition, object_key, pod_phase, split_key, uid_of
from .pod_status import merge_status, pending_status, running_status, terminated_status
from .settings import ControllerSettings
from .workqueue import WorkQueue

log = logging.getLogger(__name__)

UNREACHABLE_TAINT_KEY = "node.kubernetes.io/unreachable"
_RETRY_BASE_SECONDS = 0.5
_RETRY_MAX_SECONDS = 10.0


def _pod_ip(sequence: int) -> str:
    return f"10.{64 + ((sequence >> 16) & 63)}.{(sequence >> 8) & 255}.{sequence & 255}"


def _host_ip(node: Obj | None) -> str:
    for address in ((node or {}).get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address"))
    return ""


class Kubelet:
    def __init__(
        self,
        *,
        api: KubeApi,
        settings: ControllerSettings,
        stats: Stats,
        clock: Clock,
        pods: Informer,
        nodes: Informer,
        events: NodeEventRecorders | None = None,
    ) -> None:
        self._api = api
        self._settings = settings
        self._stats = stats
        self._clock = clock
        self._pods = pods
        self._nodes = nodes
        self._events = events or NodeEventRecorders(api, enabled=False, clock=clock)
        self.queue = WorkQueue(clock, _RETRY_BASE_SECONDS, _RETRY_MAX_SECONDS)
        self._bound_at: dict[str, float] = {}
        self._admitted: set[str] = set()
        self._started_at: dict[str, float] = {}
        self._deleting_at: dict[str, float] = {}
        self._stopping: set[str] = set()
        self._ip_sequence = itertools.count(1)
        self._gangs = GangProgress()
        self.failed_nodes: set[str] = set()
        pods.add_handlers(Handlers(self._observe, lambda _old, pod: self._observe(pod), self._deleted))

    def _observe(self, pod: Obj) -> None:
        self._track_gang(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return
        key = object_key(pod)
        now = self._clock.now()
        if is_deleting(pod):
            since = self._deleting_at.setdefault(key, now)
            if key in self._stopping:
                self.queue.add_after(key, since + self._settings.kubelet_stop_delay_seconds - now)
            else:
                self.queue.add(key)
        elif is_terminal(pod) or node in self.failed_nodes:
            return
        elif pod_phase(pod) == "Pending":
            since = self._bound_at.setdefault(key, now)
            if key in self._admitted:
                self.queue.add_after(key, since + self._settings.kubelet_start_delay_seconds - now)
            else:
                self.queue.add(key)
        elif pod_phase(pod) == "Running" and self._settings.pod_run_seconds is not None:
            since = self._started_at.setdefault(key, now)
            if not self._gangs.is_member(key):
                self.queue.add_after(key, since + self._settings.pod_run_seconds - now)
            elif (left := self._gangs.remaining(key, self._settings.pod_run_seconds, now)) is not None:
                self.queue.add_after(key, left)

    def _track_gang(self, pod: Obj) -> None:
        """Feed a gang member's state to the gang clocks; when its gang just became whole, every running
        member is due when the gang's clock reaches the run time."""
        member = membership(pod)
        if member is None:
            return
        node = (pod.get("spec") or {}).get("nodeName")
        running = pod_phase(pod) == "Running" and not is_deleting(pod) and node not in self.failed_nodes
        now = self._clock.now()
        resumed = self._gangs.observe(object_key(pod), member, running, now)
        run_seconds = self._settings.pod_run_seconds
        if run_seconds is None:
            return
        for key in resumed:
            left = self._gangs.remaining(key, run_seconds, now)
            self.queue.add_after(key, left or 0.0)

    def _deleted(self, pod: Obj) -> None:
        key = object_key(pod)
        self._gangs.forget(key, self._clock.now())
        self._bound_at.pop(key, None)
        self._admitted.discard(key)
        self._started_at.pop(key, None)
        self._deleting_at.pop(key, None)
        self._stopping.discard(key)

    async def run(self, workers: int = 4) -> None:
        await asyncio.gather(self._pods.synced.wait(), self._nodes.synced.wait())
        async with asyncio.TaskGroup() as group:
            for _ in range(workers):
                group.create_task(self._worker())

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self.sync(key)
            except ApiError as error:
                if error.status != 404:
                    log.info("kubelet: pod %s: %s; retrying", key, error.message)
                    self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)

    async def sync(self, key: str) -> None:
        pod = self._pods.get(key)
        if pod is None:
            return
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if not node:
            return
        if is_deleting(pod):
            await self._stop(key, pod, node)
        elif is_terminal(pod) or node in self.failed_nodes:
            return
        elif pod_phase(pod) == "Pending":
            await self._start(key, pod, node)
        elif pod_phase(pod) == "Running" and self._settings.pod_run_seconds is not None:
            await self._finish(key, pod, self._settings.pod_run_seconds)

    async def _start(self, key: str, pod: Obj, node: str) -> None:
        """Admission (the Pending status) at once, then the containers after the start delay."""
        host_ip = _host_ip(self._nodes.get(node))
        if key not in self._admitted:
            if await self._sync_status(pod, pending_status(pod, host_ip)) is None:
                return
            self._admitted.add(key)
        now = self._clock.now()
        due = self._bound_at.setdefault(key, now) + self._settings.kubelet_start_delay_seconds
        if now < due:
            self.queue.add_after(key, due - now)
            return
        self._events.record(node, pod, container_start_events(pod))
        status = running_status(pod, _pod_ip(next(self._ip_sequence)), host_ip, Clock.wall_time())
        if await self._sync_status(pod, status) is not None:
            self._stats.pods_running += 1
            self._started_at[key] = self._clock.now()

    async def _finish(self, key: str, pod: Obj, run_seconds: float) -> None:
        now = self._clock.now()
        if self._gangs.is_member(key):
            left = self._gangs.remaining(key, run_seconds, now)
            if left is None:  # paused: requeued when the gang is whole again
                return
            due = now + left
        else:
            due = self._started_at.setdefault(key, now) + run_seconds
        if now < due:
            self.queue.add_after(key, due - now)
            return
        await self._sync_status(pod, terminated_status(pod, "Succeeded", 0, "Completed", Clock.wall_time()))

    async def _stop(self, key: str, pod: Obj, node: str) -> None:
        """Stop the running containers at once; remove the pod after the stop delay."""
        now = self._clock.now()
        since = self._deleting_at.setdefault(key, now)
        if key not in self._stopping:
            self._stopping.add(key)
            self._events.record(node, pod, container_stop_events(pod))
        due = since + self._settings.kubelet_stop_delay_seconds
        if now < due:
            self.queue.add_after(key, due - now)
            return
        namespace, name = split_key(key)
        await self._api.delete("pods", name, namespace=namespace, grace_period_seconds=0, client="kubelet")

    async def _sync_status(self, pod: Obj, status: dict[str, Any]) -> Obj | None:
        """The status manager's syncPod: GET the pod, PATCH its status if the merge changes it.
        None when the pod is gone or was replaced by another of the same name."""
        meta = pod["metadata"]
        try:
            current = await self._api.get(
                "pods", meta["name"], namespace=meta.get("namespace"), client="kubelet"
            )
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        if uid_of(current) != uid_of(pod):
            return None
        server_status = current.get("status") or {}
        merged = merge_status(server_status, status, Clock.wall_time())
        if merged == server_status:
            return current
        updated = await self._patch_status(current, merged)
        self._pods.assume(updated)
        return updated

    async def _patch_status(self, pod: Obj, status: dict[str, Any]) -> Obj:
        meta = pod["metadata"]
        return await self._api.patch(
            "pods",
            meta["name"],
            {"status": status},
            namespace=meta.get("namespace"),
            subresource="status",
            client="kubelet",
        )

    # --- node failure injection ------------------------------------------------------------------------

    async def fail_nodes(self, label_selector: str) -> dict[str, int]:
        """Nodes matching the selector become NotReady and unreachable-tainted; their pods fail."""
        nodes, _ = await self._api.list("nodes", label_selector=label_selector, client="kubelet")
        names = {str(n["metadata"]["name"]) for n in nodes}
        self.failed_nodes |= names
        for node in nodes:
            taints = [
                t
                for t in (node.get("spec") or {}).get("taints") or []
                if t.get("key") != UNREACHABLE_TAINT_KEY
            ]
            now = Clock.wall_time()
            taints += [
                {"key": UNREACHABLE_TAINT_KEY, "effect": effect, "timeAdded": now}
                for effect in ("NoSchedule", "NoExecute")
            ]
            await self._set_node(node, taints, ready=False)
        failed = 0
        for pod in list(self._pods.store.values()):
            if (pod.get("spec") or {}).get("nodeName") in names and not is_terminal(pod):
                node_name = pod["spec"]["nodeName"]
                status = terminated_status(pod, "Failed", 137, "Error", Clock.wall_time())
                status["reason"] = "NodeLost"
                status["message"] = (
                    f"Node {node_name} which was running pod {pod['metadata']['name']} is unresponsive"
                )
                status["conditions"] = [
                    *status["conditions"],
                    new_condition(
                        "DisruptionTarget",
                        "True",
                        "DeletionByTaintManager",
                        "Taint manager: deleting due to NoExecute taint",
                    ),
                ]
                try:
                    self._pods.assume(await self._patch_status(pod, status))
                    failed += 1
                except ApiError as error:
                    log.info("failing pod %s: %s", object_key(pod), error.message)
        log.info("failed %d node(s) matching %r and %d pod(s) on them", len(names), label_selector, failed)
        return {"nodes": len(names), "pods": failed}

    async def recover_nodes(self, label_selector: str) -> dict[str, int]:
        """Undo `fail_nodes`: Ready again, unreachable taints removed."""
        nodes, _ = await self._api.list("nodes", label_selector=label_selector, client="kubelet")
        for node in nodes:
            self.failed_nodes.discard(str(node["metadata"]["name"]))
            taints = [
                t
                for t in (node.get("spec") or {}).get("taints") or []
                if t.get("key") != UNREACHABLE_TAINT_KEY
            ]
            await self._set_node(node, taints, ready=True)
        return {"nodes": len(nodes), "pods": 0}

    async def _set_node(self, node: Obj, taints: list[dict[str, Any]], ready: bool) -> None:
        name = node["metadata"]["name"]
        conditions = [
            c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") != "Ready"
        ]
        if ready:
            conditions.append(
                new_condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")
            )
        else:
            conditions.append(
                new_condition("Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
            )
        self._nodes.assume(
            await self._api.patch("nodes", name, {"spec": {"taints": taints}}, client="kubelet")
        )
        self._nodes.assume(
            await self._api.patch(
                "nodes", name, {"status": {"conditions": conditions}}, subresource="status", client="kubelet"
            )
        )
