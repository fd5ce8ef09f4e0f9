"""Kueue's queues as the webhook reads them for a queued exclusive workload's CREATE (docs/kueue.md,
"Topology Aware Scheduling").

A JobSet or plain Job that Kueue queues (`kueue.x-k8s.io/queue-name`) and that has exclusive Jobs is denied
when Kueue would place it with Topology Aware Scheduling unasked: its LocalQueue feeds a ClusterQueue whose
flavors are all TAS flavors (`placement.kueue_tas`). Nothing on the workload says so, so the webhook reads the
LocalQueue, its ClusterQueue and the ClusterQueue's ResourceFlavors: live GETs, no informer and no memory
(a ClusterQueue's flavors can change at any time, and such creations are rare), the whole read bounded by
`budget` seconds. No Kueue or no such LocalQueue: nothing to check; a LocalQueue whose ClusterQueue does
not exist has no flavors (Kueue admits nothing from it, and says so on the workload). Any other failure
admits the workload with a warning that says what was not checked.

A plain exclusive Job that names no LocalQueue has the namespace's `default` one read instead (`defaulted`):
Kueue's LocalQueue defaulting labels such a Job for it in Kueue's own webhook, which kube-apiserver calls
after this one, and a Job Kueue queues is not shrunk (`placement.kueue`). Without Kueue that read is one
GET answered 404.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from kubekit.client import CustomResource, Kube, KubeError
from placement.kueue import KUEUE_GROUP, KUEUE_VERSION
from placement.kueue_tas import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    KueueQueue,
    QueueFlavors,
    QueueUnread,
    flavor_names,
    queue_flavors,
)
from placement.objects import Obj, section
from webhook.metrics import Metrics

LOCAL_QUEUE_OBJECTS = CustomResource(KUEUE_GROUP, KUEUE_VERSION, LOCAL_QUEUES)
CLUSTER_QUEUE_OBJECTS = CustomResource(KUEUE_GROUP, KUEUE_VERSION, CLUSTER_QUEUES)
RESOURCE_FLAVOR_OBJECTS = CustomResource(KUEUE_GROUP, KUEUE_VERSION, RESOURCE_FLAVORS)


class KueueQueueApi(Protocol):
    def get_local_queue(self, namespace: str, name: str) -> Obj: ...
    def get_cluster_queue(self, name: str) -> Obj: ...
    def get_resource_flavor(self, name: str) -> Obj: ...


class KubeKueueQueueApi:
    def __init__(self, kube: Kube, timeout: float) -> None:
        self._kube = kube
        self._timeout = timeout

    def get_local_queue(self, namespace: str, name: str) -> Obj:
        return self._kube.get_custom_object(LOCAL_QUEUE_OBJECTS, namespace, name, timeout=self._timeout)

    def get_cluster_queue(self, name: str) -> Obj:
        return self._kube.get_cluster_custom_object(CLUSTER_QUEUE_OBJECTS, name, timeout=self._timeout)

    def get_resource_flavor(self, name: str) -> Obj:
        return self._kube.get_cluster_custom_object(RESOURCE_FLAVOR_OBJECTS, name, timeout=self._timeout)


class KueueQueueSource(Protocol):
    async def read(self, namespace: str, name: str, defaulted: bool = False) -> KueueQueue: ...


class _NotFound(Exception):
    """The LocalQueue or its ClusterQueue does not exist: nothing to check."""


class KueueQueues:
    """`read(namespace, name, defaulted)`: the LocalQueue, its ClusterQueue and their flavors, live;
    `defaulted`: the LocalQueue is read as the one Kueue's LocalQueue defaulting gives a plain Job that names
    none (`placement.kueue_tas.job_queue_to_read`), and the answer says so."""

    def __init__(self, api: KueueQueueApi, metrics: Metrics, budget: float) -> None:
        self._api = api
        self._metrics = metrics
        self._budget = budget

    async def read(self, namespace: str, name: str, defaulted: bool = False) -> KueueQueue:
        key = f"{namespace}/{name}"
        try:
            read = asyncio.to_thread(self._read, namespace, name, defaulted)
            queue = await asyncio.wait_for(read, self._budget)
        except TimeoutError:
            queue = QueueUnread(key, f"no answer within {self._budget:g} s", defaulted)
        except _NotFound:
            self._metrics.kueue_queue_lookups.labels("not_found").inc()
            return None
        except KubeError as error:
            queue = QueueUnread(key, str(error), defaulted)
        self._metrics.kueue_queue_lookups.labels("error" if isinstance(queue, QueueUnread) else "read").inc()
        return queue

    def _read(self, namespace: str, name: str, defaulted: bool) -> KueueQueue:
        local_queue = _found(lambda: self._api.get_local_queue(namespace, name))
        key = f"{namespace}/{name}"
        cluster_queue_name = str(section(local_queue, "spec").get("clusterQueue") or "")
        if not cluster_queue_name:
            return QueueFlavors(key, "", (), defaulted)
        try:
            cluster_queue = _found(lambda: self._api.get_cluster_queue(cluster_queue_name))
        except _NotFound:
            # The LocalQueue exists, so Kueue queues what names it (or is defaulted to it): it waits there.
            return QueueFlavors(key, cluster_queue_name, (), defaulted)
        flavors = {flavor: _flavor(self._api, flavor) for flavor in flavor_names(cluster_queue)}
        return replace(queue_flavors(key, cluster_queue_name, flavors), defaulted=defaulted)


def _found(get: Callable[[], Obj]) -> Obj:
    try:
        return get()
    except KubeError as error:
        if error.not_found:
            raise _NotFound from error
        raise


def _flavor(api: KueueQueueApi, name: str) -> Obj | None:
    try:
        return api.get_resource_flavor(name)
    except KubeError as error:
        if error.not_found:
            return None  # Kueue counts an absent flavor as no TAS flavor
        raise
