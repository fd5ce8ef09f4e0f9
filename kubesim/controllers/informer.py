"""Informer: list, then watch from the list's resourceVersion; re-list on 410 Gone; a local indexed cache.

Handlers only look at objects and enqueue keys; they must not await. Writers may `assume` the object an
API call returned so that the cache (and every handler) is current before the watch event arrives.

With `delivery_seconds`, each watch event reaches the cache and the handlers that many simulated seconds
after the informer received it, in order: the time upstream spends between the etcd commit and a
controller's handler (the apiserver's watch cache dispatching to watchers, the stream, client-go's
reflector and DeltaFIFO, the shared informer's processor).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.interface import KubeApi, WatchEvent
from kubesim.stats import Stats

from .objects import Obj, object_key, resource_version

log = logging.getLogger(__name__)

IndexFunc = Callable[[Obj], list[str]]
_RETRY_MIN_SECONDS = 0.05
_RETRY_MAX_SECONDS = 2.0


@dataclass
class Handlers:
    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj], None] | None = None


@dataclass
class Informer:
    api: KubeApi
    resource: str
    stats: Stats | None = None
    namespace: str | None = None
    label_selector: str | None = None
    clock: Clock | None = None
    delivery_seconds: float = 0.0
    """Simulated seconds from receiving a watch event to applying it (needs `clock`)."""
    store: dict[str, Obj] = field(default_factory=dict)
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    _handlers: list[Handlers] = field(default_factory=list)
    _index_funcs: dict[str, IndexFunc] = field(default_factory=dict)
    _indexes: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    _in_transit: deque[tuple[float, WatchEvent]] = field(default_factory=deque)
    _delivery: asyncio.TimerHandle | None = None

    def add_handlers(self, handlers: Handlers) -> None:
        self._handlers.append(handlers)

    def add_index(self, name: str, func: IndexFunc) -> None:
        """Register an index; registering a name again keeps the first function (shared informers)."""
        if name in self._index_funcs:
            return
        self._index_funcs[name] = func
        self._indexes[name] = {}
        for key, obj in self.store.items():
            self._index(name, key, obj)

    def get(self, key: str) -> Obj | None:
        return self.store.get(key)

    def by_index(self, name: str, value: str) -> list[Obj]:
        return [self.store[key] for key in self._indexes[name].get(value, ()) if key in self.store]

    def assume(self, obj: Obj) -> None:
        """Apply an object an API call returned as if its watch event had arrived (handlers run now; the
        event itself, same resourceVersion, is then ignored). An older version than the cache's is dropped."""
        self._apply(object_key(obj), obj)

    def forget(self, key: str) -> None:
        """Apply the deletion of an object the caller deleted (the DELETED event is then a no-op)."""
        self._deleted(key)

    async def run(self) -> None:
        try:
            await self._list_and_watch()
        finally:
            self._drop_in_transit()

    async def _list_and_watch(self) -> None:
        delay = _RETRY_MIN_SECONDS
        version: str | None = None
        while True:
            try:
                if version is None:
                    version = await self._relist()
                version = await self._watch(version)
                delay = _RETRY_MIN_SECONDS
            except ApiError as error:
                if error.status == 410:
                    log.info("watch %s: resourceVersion %s expired, re-listing", self.resource, version)
                    version = None
                    continue
                log.warning(
                    "watch %s failed (%s %s); retrying in %.2fs",
                    self.resource,
                    error.status,
                    error.reason,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_SECONDS)
            except (ConnectionError, TimeoutError, OSError) as error:
                log.warning("watch %s broke (%s); retrying in %.2fs", self.resource, error, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_SECONDS)

    async def _relist(self) -> str:
        items, version = await self.api.list(
            self.resource, namespace=self.namespace, label_selector=self.label_selector
        )
        self._drop_in_transit()  # the list supersedes events still on their way
        seen: set[str] = set()
        for obj in items:
            key = object_key(obj)
            seen.add(key)
            self._apply(key, obj)
        for key in [k for k in self.store if k not in seen]:
            self._deleted(key)
        self.synced.set()
        return version

    async def _watch(self, version: str) -> str:
        stream = self.api.watch(
            self.resource,
            namespace=self.namespace,
            resource_version=version,
            label_selector=self.label_selector,
        )
        async for event in stream:
            obj = event["object"]
            kind = event["type"]
            if kind == "ERROR":
                code = int(obj.get("code") or 500)
                raise ApiError(code, str(obj.get("reason") or "Error"), str(obj.get("message") or ""))
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind == "BOOKMARK":
                continue
            if self.clock is not None and self.delivery_seconds > 0:
                self._in_transit.append((self.clock.now() + self.delivery_seconds, event))
                if self._delivery is None:
                    self._schedule_delivery()
            else:
                self._apply_event(event)
        return version

    def _apply_event(self, event: WatchEvent) -> None:
        key = object_key(event["object"])
        if event["type"] == "DELETED":
            self._deleted(key)
        else:
            self._apply(key, event["object"])

    def _schedule_delivery(self) -> None:
        assert self.clock is not None
        due = self._in_transit[0][0]
        real_delay = max(0.0, (due - self.clock.now()) * self.clock.time_scale)
        self._delivery = asyncio.get_running_loop().call_later(real_delay, self._deliver_due)

    def _deliver_due(self) -> None:
        assert self.clock is not None
        self._delivery = None
        now = self.clock.now()
        try:
            while self._in_transit and self._in_transit[0][0] <= now:
                self._apply_event(self._in_transit.popleft()[1])
        finally:
            if self._in_transit and self._delivery is None:
                self._schedule_delivery()

    def _drop_in_transit(self) -> None:
        if self._delivery is not None:
            self._delivery.cancel()
            self._delivery = None
        self._in_transit.clear()

    def _apply(self, key: str, obj: Obj) -> None:
        current = self.store.get(key)
        if current is None:
            self._put(key, obj)
            for handlers in self._handlers:
                if handlers.on_add:
                    handlers.on_add(obj)
            return
        if resource_version(obj) <= resource_version(current):
            return
        self._put(key, obj)
        for handlers in self._handlers:
            if handlers.on_update:
                handlers.on_update(current, obj)

    def _deleted(self, key: str) -> None:
        current = self.store.get(key)
        if current is None:
            return
        self._remove(key)
        for handlers in self._handlers:
            if handlers.on_delete:
                handlers.on_delete(current)

    def _put(self, key: str, obj: Obj) -> None:
        if key in self.store:
            self._unindex(key)
        self.store[key] = obj
        for name in self._index_funcs:
            self._index(name, key, obj)

    def _remove(self, key: str) -> None:
        self._unindex(key)
        del self.store[key]

    def _index(self, name: str, key: str, obj: Obj) -> None:
        for value in self._index_funcs[name](obj):
            self._indexes[name].setdefault(value, set()).add(key)

    def _unindex(self, key: str) -> None:
        obj = self.store[key]
        for name, func in self._index_funcs.items():
            index = self._indexes[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
