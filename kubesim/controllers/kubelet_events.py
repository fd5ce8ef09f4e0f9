"""The kubelets' events: one legacy recorder per node, and the container events a pod start or stop writes.

Each kubelet runs its own client-go broadcaster (source `kubelet`, host = node name), so each node has its
own correlator caches, queue and writer. Container events are about the pod with fieldPath
`spec.containers{<name>}` (kubecontainer.GenerateContainerRef). Reasons are pkg/kubelet/events constants;
messages are those of current upstream (pkg/kubelet/images/image_manager.go EnsureImageExists,
pkg/kubelet/kuberuntime/kuberuntime_container.go startContainer / killContainer).

Image pulls: kubesim has no registry and treats every image as present on every node, so `IfNotPresent`
and `Never` (the API server defaults a tagged image to IfNotPresent) record one `Pulled` "already present"
event, while `Always` records `Pulling` then `Pulled` for an instant pull.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from kubesim.clock import Clock
from kubesim.interface import KubeApi

from .events import EventRecorder
from .objects import Obj

KUBELET_COMPONENT = "kubelet"
REASON_PULLING = "Pulling"
REASON_PULLED = "Pulled"
REASON_CREATED = "Created"
REASON_STARTED = "Started"
REASON_KILLING = "Killing"


def container_field_path(name: str) -> str:
    return f"spec.containers{{{name}}}"


def image_events(container: Obj) -> list[tuple[str, str]]:
    """(reason, message) of EnsureImageExists for an image already on the node."""
    image = str(container.get("image") or "")
    if container.get("imagePullPolicy") == "Always":
        return [
            (REASON_PULLING, f'Pulling image "{image}"'),
            (
                REASON_PULLED,
                f'Successfully pulled image "{image}" in 0s (0s including waiting). Image size: 0 bytes.',
            ),
        ]
    return [
        (
            REASON_PULLED,
            f'Container image "{image}" already present on machine and can be accessed by the pod',
        )
    ]


def container_start_events(pod: Obj) -> Iterator[tuple[str, str, str]]:
    """(fieldPath, reason, message) per container, in the order SyncPod starts them."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        path = container_field_path(str(container.get("name")))
        for reason, message in image_events(container):
            yield path, reason, message
        yield path, REASON_CREATED, "Container created"
        yield path, REASON_STARTED, "Container started"


def container_stop_events(pod: Obj) -> Iterator[tuple[str, str, str]]:
    """killContainer's event for each running container of a pod being deleted."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if "running" in (status.get("state") or {}):
            name = str(status.get("name"))
            yield container_field_path(name), REASON_KILLING, f"Stopping container {name}"


class NodeEventRecorders:
    """The per-node recorders, created on a node's first event; `run` drives their writers."""

    def __init__(self, api: KubeApi, enabled: bool = True, *, clock: Clock | None = None) -> None:
        self._api = api
        self._enabled = enabled
        self._clock = clock or Clock()
        self._recorders: dict[str, EventRecorder] = {}
        self._unstarted: asyncio.Queue[EventRecorder] = asyncio.Queue()

    def for_node(self, node: str) -> EventRecorder:
        recorder = self._recorders.get(node)
        if recorder is None:
            recorder = EventRecorder(
                self._api,
                KUBELET_COMPONENT,
                self._enabled,
                host=node,
                client=KUBELET_COMPONENT,
                clock=self._clock,
            )
            self._recorders[node] = recorder
            self._unstarted.put_nowait(recorder)
        return recorder

    def record(self, node: str, pod: Obj, events: Iterator[tuple[str, str, str]]) -> None:
        if not self._enabled:
            return
        recorder = self.for_node(node)
        for field_path, reason, message in events:
            recorder.record(pod, "Normal", reason, message, field_path=field_path)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            while True:
                recorder = await self._unstarted.get()
                group.create_task(recorder.run())
