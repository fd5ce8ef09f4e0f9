"""Informer-style caches of leader pods and nodes, and the leader lookup served from them.

`Informer` runs in a daemon thread: list, then watch from the list's resourceVersion (bookmarks on), keep
watching from the last seen resourceVersion when a watch ends, re-list on 410 Gone or any error (with
backoff). Every call carries a client-side timeout so a dead connection cannot hang the thread.

`LeaderDirectory.leader_state(plan)` answers from the caches; on a miss it makes one live lookup (in a
worker thread, never on the event loop) before concluding.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from placement.admission import LeaderState, PodPlan, leader_state, pick_leader
from placement.objects import Obj, job_ref_of_pod, metadata, namespace_of, node_name
from webhook.metrics import Metrics

log = logging.getLogger(__name__)

HTTP_GONE = 410
MAX_BACKOFF_SECONDS = 30.0


def object_key(obj: Obj) -> str:
    meta = metadata(obj)
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class Store:
    """Thread-safe objects by key, with one optional secondary index."""

    def __init__(self, index_of: Callable[[Obj], str | None] | None = None) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, Obj] = {}
        self._index_of = index_of
        self._index: dict[str, set[str]] = {}

    def _unindex(self, key: str) -> None:
        old = self._objects.get(key)
        if old is None or self._index_of is None:
            return
        value = self._index_of(old)
        if value is not None:
            keys = self._index.get(value)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._index[value]

    def _put_locked(self, obj: Obj) -> None:
        key = object_key(obj)
        self._unindex(key)
        self._objects[key] = obj
        if self._index_of is not None:
            value = self._index_of(obj)
            if value is not None:
                self._index.setdefault(value, set()).add(key)

    def put(self, obj: Obj) -> None:
        with self._lock:
            self._put_locked(obj)

    def delete(self, obj: Obj) -> None:
        key = object_key(obj)
        with self._lock:
            self._unindex(key)
            self._objects.pop(key, None)

    def replace(self, objs: list[Obj]) -> None:
        with self._lock:
            self._objects.clear()
            self._index.clear()
            for obj in objs:
                self._put_locked(obj)

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._objects.get(key)

    def by_index(self, value: str) -> list[Obj]:
        with self._lock:
            return [self._objects[k] for k in self._index.get(value, ())]

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)


def leader_index(namespace: str, job_name: str) -> str:
    return f"{namespace}/{job_name}"


def leader_index_of(pod: Obj) -> str | None:
    job = job_ref_of_pod(pod)
    return leader_index(namespace_of(pod), job.name) if job else None


class Informer:
    """List + watch of one resource (a kubernetes client `list_*` function) into a `Store`."""

    def __init__(
        self,
        kind: str,
        list_call: Callable[..., Any],
        store: Store,
        metrics: Metrics,
        *,
        label_selector: str | None = None,
        request_timeout: float = 10.0,
        watch_timeout: int = 300,
    ) -> None:
        self.kind = kind
        self.store = store
        self._list_call = list_call
        self._selector_args: dict[str, Any] = {"label_selector": label_selector} if label_selector else {}
        self._metrics = metrics
        self._request_timeout = request_timeout
        self._watch_timeout = watch_timeout
        self._stop = threading.Event()
        self.synced = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{kind}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            response.shutdown()  # unblocks the watch read immediately
        if self._thread.ident is not None:
            self._thread.join(timeout)

    def _list(self) -> str:
        response = self._list_call(
            **self._selector_args, _preload_content=False, _request_timeout=self._request_timeout
        )
        body = json.loads(response.data)
        items: list[Obj] = body.get("items") or []
        self.store.replace(items)
        self._metrics.cache_objects.labels(self.kind).set(len(items))
        return str((body.get("metadata") or {}).get("resourceVersion") or "")

    def _events(self, resource_version: str) -> Iterator[dict[str, Any]]:
        response = self._list_call(
            **self._selector_args,
            watch=True,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=self._watch_timeout,
            _preload_content=False,
            _request_timeout=(self._request_timeout, self._watch_timeout + self._request_timeout),
        )
        self._response = response
        try:
            buffer = b""
            for chunk in response.stream(64 * 1024, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
                if self._stop.is_set():
                    return
        finally:
            self._response = None
            response.release_conn()

    def _watch(self, resource_version: str) -> str:
        """Watches until the server ends the stream; returns the last resourceVersion seen."""
        for event in self._events(resource_version):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                code = obj.get("code")
                raise WatchExpired(obj.get("message", "")) if code == HTTP_GONE else WatchFailed(str(obj))
            resource_version = str(metadata(obj).get("resourceVersion") or resource_version)
            if kind in ("ADDED", "MODIFIED"):
                self.store.put(obj)
            elif kind == "DELETED":
                self.store.delete(obj)
            self._metrics.cache_objects.labels(self.kind).set(len(self.store))
        return resource_version

    def _run(self) -> None:
        backoff = 0.5
        cause = "start"
        while not self._stop.is_set():
            try:
                self._metrics.relists.labels(self.kind, cause).inc()
                resource_version = self._list()
                self.synced.set()
                log.info("informer listed", extra={"kind": self.kind, "objects": len(self.store)})
                backoff = 0.5
                while not self._stop.is_set():
                    resource_version = self._watch(resource_version)
            except WatchExpired:
                cause = "gone"
                log.info("watch expired (410), re-listing", extra={"kind": self.kind})
            except Exception as err:
                if self._stop.is_set():
                    return
                cause = "error"
                log.warning(
                    "informer error, re-listing in %.1fs: %s", backoff, err, extra={"kind": self.kind}
                )
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)


class WatchExpired(Exception):
    """410 Gone: the resourceVersion is too old; re-list."""


class WatchFailed(Exception):
    """An ERROR event other than 410."""


class LiveApi(Protocol):
    def list_leaders(self, namespace: str, job_name: str) -> list[Obj]: ...

    def get_node(self, name: str) -> Obj | None: ...


class LeaderSource(Protocol):
    """What the admission handlers need: readiness and the state of a follower's leader."""

    def ready(self) -> bool: ...

    async def leader_state(self, plan: PodPlan) -> LeaderState: ...


class LeaderDirectory:
    """Leader pods (role=leader) and nodes from informers; one live lookup on a cache miss."""

    def __init__(self, pods: Informer, nodes: Informer, live: LiveApi, metrics: Metrics) -> None:
        self._pods = pods
        self._nodes = nodes
        self._live = live
        self._metrics = metrics

    def start(self) -> None:
        self._pods.start()
        self._nodes.start()

    def stop(self) -> None:
        self._pods.stop()
        self._nodes.stop()

    def ready(self) -> bool:
        return self._pods.synced.is_set() and self._nodes.synced.is_set()

    def from_cache(self, plan: PodPlan) -> tuple[Obj, Obj] | None:
        """(leader, node) when the cache knows a bound leader of this Job and its node; else None."""
        candidates = self._pods.store.by_index(leader_index(plan.namespace, plan.job.name))
        leader = pick_leader(candidates, plan.job)
        bound_to = node_name(leader) if leader is not None else None
        if leader is None or bound_to is None:
            return None
        node = self._nodes.store.get(bound_to)
        return (leader, node) if node is not None else None

    def _live_lookup(self, plan: PodPlan) -> tuple[Obj | None, Obj | None]:
        try:
            leader = pick_leader(self._live.list_leaders(plan.namespace, plan.job.name), plan.job)
        except Exception:
            self._metrics.live_lookups.labels("pod", "error").inc()
            raise
        self._metrics.live_lookups.labels("pod", "found" if leader else "not_found").inc()
        bound_to = node_name(leader) if leader is not None else None
        if bound_to is None:
            return leader, None
        node = self._nodes.store.get(bound_to)
        if node is not None:
            return leader, node
        try:
            node = self._live.get_node(bound_to)
        except Exception:
            self._metrics.live_lookups.labels("node", "error").inc()
            raise
        self._metrics.live_lookups.labels("node", "found" if node else "not_found").inc()
        return leader, node

    async def leader_state(self, plan: PodPlan) -> LeaderState:
        cached = self.from_cache(plan)
        if cached is not None:
            self._metrics.cache_lookups.labels("hit").inc()
            return leader_state(plan, *cached)
        self._metrics.cache_lookups.labels("miss").inc()
        leader, node = await asyncio.to_thread(self._live_lookup, plan)
        return leader_state(plan, leader, node)
