"""An in-process cluster for controller tests: the real kubesim ApiServer, generated nodes, and the
controllers on the test's own event loop. `AdmissionGate` stands in front of the API server as a denying
admission webhook would (a fake, not a mock): it records every pod create attempt and denies the ones its
`deny` rule names; with `hold_bindings` set, pod bindings wait until that event is set."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Collection, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from kubesim.apiserver.server import ApiServer
from kubesim.clock import Clock
from kubesim.cluster import make_nodes
from kubesim.controllers import COMPONENTS, Controllers
from kubesim.controllers.events import EventRecorder
from kubesim.controllers.informer import Informer
from kubesim.controllers.job import JobController
from kubesim.controllers.settings import ControllerSettings
from kubesim.errors import ApiError
from kubesim.interface import WatchEvent
from kubesim.stats import Stats
from placement.constants import GKE_NODEPOOL_LABEL, JOB_COMPLETION_INDEX_ANNOTATION, JOB_KEY_LABEL
from tests.support.waiting import eventually_async

Obj = dict[str, Any]


T = TypeVar("T")


class Run(Protocol):
    """The `run` fixture: runs one coroutine on a fresh event loop and returns its result."""

    def __call__(self, main: Coroutine[Any, Any, T], /) -> T: ...


@dataclass
class Attempt:
    at: float
    """Real monotonic seconds."""
    index: str | None
    allowed: bool


@dataclass
class AdmissionGate:
    inner: ApiServer
    deny: Callable[[Obj], str | None] = lambda _pod: None
    attempts: list[Attempt] = field(default_factory=list)
    hold_bindings: asyncio.Event | None = None
    bindings_started: int = 0
    bound_at: dict[str, float] = field(default_factory=dict)
    """Pod name -> when the API server accepted its binding, on `now` (the cluster's simulated clock)."""
    now: Callable[[], float] = time.monotonic

    async def create(
        self,
        resource: str,
        obj: Obj,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
        client: str = "controller",
    ) -> Obj:
        if resource == "pods" and subresource is None:
            reason = self.deny(obj)
            index = ((obj.get("metadata") or {}).get("annotations") or {}).get(
                JOB_COMPLETION_INDEX_ANNOTATION
            )
            self.attempts.append(Attempt(time.monotonic(), index, reason is None))
            if reason is not None:
                raise ApiError(
                    400, "BadRequest", f'admission webhook "deny.test.io" denied the request: {reason}'
                )
        if resource == "pods" and subresource == "binding":
            self.bindings_started += 1
            if self.hold_bindings is not None:
                await self.hold_bindings.wait()
        created = await self.inner.create(
            resource, obj, namespace=namespace, subresource=subresource, dry_run=dry_run, client=client
        )
        if resource == "pods" and subresource == "binding":
            self.bound_at[str((obj.get("metadata") or {}).get("name"))] = self.now()
        return created

    async def get(self, resource: str, name: str, *, namespace: str | None = None, client: str = "c") -> Obj:
        return await self.inner.get(resource, name, namespace=namespace, client=client)

    async def list(
        self,
        resource: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        client: str = "controller",
    ) -> tuple[list[Obj], str]:
        return await self.inner.list(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            client=client,
        )

    async def update(
        self,
        resource: str,
        obj: Obj,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        client: str = "controller",
    ) -> Obj:
        return await self.inner.update(
            resource, obj, namespace=namespace, subresource=subresource, client=client
        )

    async def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        *,
        patch_type: Any = "merge",
        namespace: str | None = None,
        subresource: str | None = None,
        client: str = "controller",
    ) -> Obj:
        return await self.inner.patch(
            resource,
            name,
            patch,
            patch_type=patch_type,
            namespace=namespace,
            subresource=subresource,
            client=client,
        )

    async def delete(
        self,
        resource: str,
        name: str,
        *,
        namespace: str | None = None,
        grace_period_seconds: int | None = None,
        client: str = "controller",
    ) -> Obj:
        return await self.inner.delete(
            resource, name, namespace=namespace, grace_period_seconds=grace_period_seconds, client=client
        )

    def watch(
        self,
        resource: str,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> AsyncIterator[WatchEvent]:
        return self.inner.watch(
            resource,
            namespace=namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
        )


@dataclass
class Cluster:
    api: AdmissionGate
    server: ApiServer
    controllers: Controllers
    stats: Stats
    settings: ControllerSettings

    def simulated(self, real_seconds: float) -> float:
        return real_seconds / self.settings.time_scale

    async def pods(self, namespace: str = "default", label_selector: str | None = None) -> list[Obj]:
        items, _ = await self.server.list("pods", namespace=namespace, label_selector=label_selector)
        return items

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
        """`eventually_async` with the controller tests' defaults; `what` falls back to the predicate."""
        return await eventually_async(predicate, what or repr(predicate), timeout)


@contextlib.asynccontextmanager
async def cluster(
    *,
    nodes: int = 8,
    pools: int = 2,
    gpus_per_node: int = 8,
    components: Collection[str] = COMPONENTS,
    virtual_time: bool = False,
    **settings: Any,
) -> AsyncIterator[Cluster]:
    """`virtual_time`: simulated time is the event loop's (`Clock.virtual`; run the test with
    `run_virtual`): durations come out exact, and `time_scale` does not matter."""
    stats = Stats()
    server = ApiServer(stats, seed=0)
    for node in make_nodes(nodes, pools, gpus_per_node=gpus_per_node):
        await server.create("nodes", node, client="bootstrap")
    gate = AdmissionGate(server)
    config = ControllerSettings(**{"time_scale": 0.01, **settings})
    clock = Clock.virtual() if virtual_time else None
    controllers = Controllers(gate, config, stats, admission=server.admission, clock=clock)
    gate.now = controllers.clock.now
    task = asyncio.create_task(controllers.run(components))
    try:
        await asyncio.wait_for(controllers.wait_synced(), 30)
        yield Cluster(gate, server, controllers, stats, config)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await server.aclose()


def pod_spec(gpus: int = 8, cpu: str = "4", **extra: Any) -> Obj:
    requests = {"cpu": cpu, "memory": "16Gi"}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    return {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox:1.36", "resources": {"requests": requests}}],
        **extra,
    }


def indexed_job(
    name: str,
    size: int,
    *,
    parallelism: int | None = None,
    spec: Obj | None = None,
    labels: dict[str, str] | None = None,
    backoff_limit: int = 6,
    namespace: str = "default",
) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "completionMode": "Indexed",
            "completions": size,
            "parallelism": size if parallelism is None else parallelism,
            "backoffLimit": backoff_limit,
            "template": {"metadata": {"labels": dict(labels or {})}, "spec": spec or pod_spec()},
        },
    }


def index_of(pod: Obj) -> int:
    return int(pod["metadata"]["annotations"][JOB_COMPLETION_INDEX_ANNOTATION])


@dataclass
class Standalone:
    """A JobController on informers that do not run: the test fills their caches (`assume`) and calls
    `controller.sync` itself, so a sync sees exactly the state the test sets up (a stale cache included)."""

    controller: JobController
    jobs: Informer
    pods: Informer


def standalone_job_controller(server: ApiServer, **settings: Any) -> Standalone:
    config = ControllerSettings(**{"time_scale": 0.01, **settings})
    jobs, pods = Informer(server, "jobs"), Informer(server, "pods")
    controller = JobController(
        api=server,
        settings=config,
        clock=Clock(config.time_scale),
        jobs=jobs,
        pods=pods,
        recorder=EventRecorder(server, "job-controller", enabled=False),
    )
    return Standalone(controller, jobs, pods)


def exclusive_job(name: str, size: int, gpus: int = 1) -> Obj:
    """A Job whose pods all carry JobSet's original exclusive terms (the `affinity` strategy)."""
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [{"key": JOB_KEY_LABEL, "operator": "In", "values": [name]}]
                    },
                    "topologyKey": GKE_NODEPOOL_LABEL,
                    "namespaceSelector": {},
                }
            ]
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": JOB_KEY_LABEL, "operator": "Exists"},
                            {"key": JOB_KEY_LABEL, "operator": "NotIn", "values": [name]},
                        ]
                    },
                    "topologyKey": GKE_NODEPOOL_LABEL,
                    "namespaceSelector": {},
                }
            ]
        },
    }
    return indexed_job(name, size, spec=pod_spec(gpus=gpus, affinity=affinity), labels={JOB_KEY_LABEL: name})
