"""The object store: one global monotonic resourceVersion, per-resource maps, event history and watchers.

Stored objects are immutable snapshots by convention: every write stores a fresh dict, so readers that only
serialise (the HTTP layer) never copy, and in-process readers copy once (`patches.deep_copy`).
Everything runs on one asyncio event loop; no locking is needed.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kubesim.apiserver.resources import RESOURCE_TYPES, ResourceType
from kubesim.apiserver.selectors import FieldSelector, LabelSelector
from kubesim.errors import gone

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name)


@dataclass(frozen=True)
class StoredEvent:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    obj: Obj
    old: Obj | None


@dataclass(eq=False)
class Watcher:
    """One watch subscription: filters events and queues the ones its client should see."""

    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    queue: asyncio.Queue[tuple[str, Obj]] = field(default_factory=asyncio.Queue)
    max_backlog: int = 200_000
    expired: bool = False
    """Set when the client fell more than `max_backlog` events behind: its stream ends with 410 Expired."""

    def _matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        meta = obj["metadata"]
        if self.namespace is not None and meta.get("namespace", "") != self.namespace:
            return False
        return self.labels.matches(meta.get("labels")) and self.fields.matches(obj)

    def offer(self, event: StoredEvent) -> None:
        """Selector transitions look like the real API server: entering = ADDED, leaving = DELETED."""
        if self.expired:
            return
        if self.queue.qsize() >= self.max_backlog:
            self.expired = True
            self.queue.put_nowait(("ERROR", gone(str(event.rv), event.rv).to_status()))
            return
        now = self._matches(event.obj)
        if event.type == "DELETED":
            if now:
                self.queue.put_nowait(("DELETED", event.obj))
            return
        before = self._matches(event.old)
        if now and before:
            self.queue.put_nowait(("MODIFIED", event.obj))
        elif now:
            self.queue.put_nowait(("ADDED", event.obj))
        elif before:
            self.queue.put_nowait(("DELETED", event.obj))


class ResourceStore:
    def __init__(self, rt: ResourceType, history_size: int) -> None:
        self.rt = rt
        self.objects: dict[Key, Obj] = {}
        self.history: deque[StoredEvent] = deque(maxlen=history_size)
        self.evicted_rv = 0
        self.watchers: set[Watcher] = set()

    def record(self, event: StoredEvent) -> None:
        if len(self.history) == self.history.maxlen:
            self.evicted_rv = self.history[0].rv
        self.history.append(event)
        for watcher in self.watchers:
            watcher.offer(event)


class Store:
    def __init__(self, history_size: int = 10_000) -> None:
        self.rv = 0
        self.resources: dict[str, ResourceStore] = {
            rt.plural: ResourceStore(rt, history_size) for rt in RESOURCE_TYPES
        }
        # owner uid -> dependents (resource, namespace, name), for garbage collection
        self.dependents: dict[str, set[tuple[str, str, str]]] = {}

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        return self.resources[resource].objects.get((namespace, name))

    def iter(self, resource: str, namespace: str | None = None) -> Iterator[Obj]:
        objects = self.resources[resource].objects
        if namespace is None:
            yield from objects.values()
        else:
            for (ns, _), obj in objects.items():
                if ns == namespace:
                    yield obj

    def write(self, resource: str, event_type: str, obj: Obj, old: Obj | None) -> Obj:
        """Store `obj` (already stamped with a new resourceVersion) and notify watchers."""
        rs = self.resources[resource]
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if event_type == "DELETED":
            rs.objects.pop(key, None)
        else:
            rs.objects[key] = obj
        self._index_owners(resource, key, old, None if event_type == "DELETED" else obj)
        rs.record(StoredEvent(int(meta["resourceVersion"]), event_type, obj, old))
        return obj

    def _index_owners(self, resource: str, key: Key, old: Obj | None, new: Obj | None) -> None:
        old_uids = {r.get("uid") for r in (old or {}).get("metadata", {}).get("ownerReferences") or []}
        new_uids = {r.get("uid") for r in (new or {}).get("metadata", {}).get("ownerReferences") or []}
        ref = (resource, key[0], key[1])
        for uid in old_uids - new_uids:
            deps = self.dependents.get(str(uid))
            if deps is not None:
                deps.discard(ref)
                if not deps:
                    del self.dependents[str(uid)]
        for uid in new_uids - old_uids:
            self.dependents.setdefault(str(uid), set()).add(ref)

    def subscribe(
        self,
        resource: str,
        *,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        resource_version: int | None,
        initial: bool,
    ) -> Watcher:
        """Register a watcher. Synchronous, so the replay and the live stream cannot miss or repeat an event.

        resource_version None: from now (`initial`: first an ADDED event per existing object, as the real API
        server does for a watch without a resourceVersion). Older than the kept history: 410 Gone.
        """
        rs = self.resources[resource]
        watcher = Watcher(namespace, labels, fields)
        if resource_version is not None and resource_version > 0:
            if resource_version < rs.evicted_rv:
                raise gone(str(resource_version), rs.evicted_rv + 1)
            for event in rs.history:
                if event.rv > resource_version:
                    watcher.offer(event)
        elif initial:
            for obj in rs.objects.values():
                if watcher._matches(obj):
                    watcher.queue.put_nowait(("ADDED", obj))
        rs.watchers.add(watcher)
        return watcher

    def unsubscribe(self, resource: str, watcher: Watcher) -> None:
        self.resources[resource].watchers.discard(watcher)
