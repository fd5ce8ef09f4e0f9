"""Informers: list, then watch from the list's resourceVersion; re-list on 410 Gone (client-go's reflector).

Each informer keeps a thread-safe `Store` of the objects it was asked to keep and tells a handler what
changed. Handlers only enqueue keys (they run on the informer thread and must be quick). After every
(re-)list the handler gets `on_relist` so the controller can reconcile everything again: level-triggered,
so a missed event or a restart loses nothing.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from placement.resize import object_key
from resizer.kube import Kube, KubeError, Resource, WatchStream

Obj = dict[str, Any]
log = logging.getLogger(__name__)


class Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410 or an ERROR event with code 410)."""


class Handler(Protocol):
    def on_upsert(self, old: Obj | None, new: Obj) -> None: ...
    def on_delete(self, old: Obj) -> None: ...
    def on_relist(self, objects: list[Obj]) -> None: ...


class Store:
    """Objects by `namespace/name`, plus one secondary index (e.g. the owning Job's key)."""

    def __init__(self, index: Callable[[Obj], str | None] | None = None) -> None:
        self._index_of = index
        self._lock = threading.Lock()
        self._objects: dict[str, Obj] = {}
        self._index: dict[str, set[str]] = {}

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._objects.get(key)

    def by_index(self, value: str) -> list[Obj]:
        with self._lock:
            return [self._objects[key] for key in self._index.get(value, ()) if key in self._objects]

    def index_values(self) -> list[str]:
        with self._lock:
            return [value for value, keys in self._index.items() if keys]

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self._objects.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def upsert(self, obj: Obj) -> Obj | None:
        key = object_key(obj)
        with self._lock:
            old = self._objects.get(key)
            if old is not None:
                self._unindex(key, old)
            self._objects[key] = obj
            if self._index_of is not None and (value := self._index_of(obj)) is not None:
                self._index.setdefault(value, set()).add(key)
            return old

    def delete(self, key: str) -> Obj | None:
        with self._lock:
            old = self._objects.pop(key, None)
            if old is not None:
                self._unindex(key, old)
            return old

    def keys(self) -> set[str]:
        with self._lock:
            return set(self._objects)

    def _unindex(self, key: str, obj: Obj) -> None:
        if self._index_of is None or (value := self._index_of(obj)) is None:
            return
        keys = self._index.get(value)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._index[value]


def slim(obj: Obj) -> Obj:
    """Drop what no decision reads and what costs memory at scale."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return obj


class Informer:
    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        *,
        name: str,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None = None,
        handler: Handler,
        keep: Callable[[Obj], bool] = lambda _obj: True,
        store: Store | None = None,
        on_restart: Callable[[str, str], None] = lambda _name, _reason: None,
        max_backoff: float = 5.0,
    ) -> None:
        self.kube = kube
        self.resource: Resource = resource
        self.name = name
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.handler = handler
        self.keep = keep
        self.store = store if store is not None else Store()
        self.synced = threading.Event()
        self._on_restart = on_restart
        self._max_backoff = max_backoff
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.interrupt()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        failures = 0
        resource_version: str | None = None
        while not self._stop.is_set():
            try:
                if resource_version is None:
                    resource_version = self._relist()
                resource_version = self._watch(resource_version)
                failures = 0
                if not self._stop.is_set():
                    self._on_restart(self.name, "ended")  # server timeout or a dropped stream: resume
            except Gone:
                log.info("informer %s: resourceVersion %s expired, re-listing", self.name, resource_version)
                self._on_restart(self.name, "gone")
                resource_version = None
            except (KubeError, ValueError) as error:
                if self._stop.is_set():
                    return
                failures += 1
                reason = error.label if isinstance(error, KubeError) else "decode"
                self._on_restart(self.name, reason)
                delay = min(self._max_backoff, 0.1 * 2 ** min(failures, 10)) * random.uniform(0.5, 1.0)
                log.warning("informer %s: %s; retrying in %.2fs", self.name, error, delay)
                self._stop.wait(delay)

    def _relist(self) -> str:
        objects, resource_version = self.kube.list_objects(
            self.resource,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
        )
        kept = [slim(obj) for obj in objects if self.keep(obj)]
        self._replace(kept)
        self.synced.set()
        self.handler.on_relist(kept)
        log.debug(
            "informer %s: listed %d (kept %d) at %s", self.name, len(objects), len(kept), resource_version
        )
        return resource_version

    def _replace(self, objects: Iterable[Obj]) -> None:
        fresh = {object_key(obj): obj for obj in objects}
        for key in self.store.keys() - fresh.keys():
            old = self.store.delete(key)
            if old is not None:
                self.handler.on_delete(old)
        for obj in fresh.values():
            self.store.upsert(obj)

    def _watch(self, resource_version: str) -> str:
        """Follow one watch stream to its end; returns the last resourceVersion seen."""
        try:
            stream = self.kube.watch(
                self.resource,
                namespace=self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                resource_version=resource_version,
            )
        except KubeError as error:
            if error.status == 410:
                raise Gone from error
            raise
        self._stream = stream
        if self._stop.is_set():
            # stop() ran while this watch was being opened and could not interrupt it yet.
            stream.interrupt()
        try:
            for event in stream:
                if self._stop.is_set():
                    break
                resource_version = self._apply(event, resource_version)
        except KubeError:
            raise
        except Exception as error:
            if self._stop.is_set():
                return resource_version
            # A reset or timed-out stream: resume from the last version we saw.
            raise KubeError(None, type(error).__name__, str(error)) from error
        finally:
            self._stream = None
            stream.close()
        return resource_version

    def _apply(self, event: Obj, resource_version: str) -> str:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise Gone
            raise KubeError(
                code if isinstance(code, int) else None, str(obj.get("reason")), str(obj.get("message"))
            )
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            return str(version or resource_version)
        key = object_key(obj)
        if kind == "DELETED" or not self.keep(obj):
            old = self.store.delete(key)
            if old is not None:
                self.handler.on_delete(old)
        elif kind in ("ADDED", "MODIFIED"):
            new = slim(obj)
            old = self.store.upsert(new)
            self.handler.on_upsert(old, new)
        return str(version or resource_version)
