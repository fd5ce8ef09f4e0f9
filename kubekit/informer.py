"""Informers: list, then watch from the list's resourceVersion (client-go's reflector, for this client).

- The watch asks for bookmarks. A stream that ends (the server's `timeoutSeconds`) or breaks (a dropped
  connection) is resumed at once from the last resourceVersion seen: nothing is re-listed for that, and
  no time passes in which the cache does not follow the server.
- `410 Gone` (the version left the server's history, as an HTTP status or an ERROR event) re-lists; so
  does an unexpected exception, since the cache may then be out of step.
- Requests that fail (a list or a watch that cannot be opened, an ERROR event, a malformed event) and
  "very short" watches (closed within a second without one event: in effect refused) back off
  exponentially with jitter (0.1-0.2 s after the first, capped at `max_backoff`); the backoff starts over
  once a watch runs. client-go's reflector (tools/cache/reflector.go, `watch` and `handleWatch`) does the
  same.
- `synced` is set after the first complete list: readiness probes and work wait for it.

Each informer keeps what it is asked to keep in a thread-safe `Store`: `keep(obj)` decides whether an
object is cached at all, and `project(obj)` what of it is kept (by default everything but
`managedFields`; `kubekit.projection.FieldProjection` keeps only named fields); the label and field
selectors narrow the watch on the server side. A list is projected page by page (the client's
`transform`), so the whole objects of a large list are never all held at once. `project` must be
idempotent and `keep` must answer the same on a projected object. A `Handler` is told
what changed; it runs on the informer thread and must be quick (enqueue a key, nothing more). After every
(re-)list it gets `on_relist` so a level-triggered controller can reconcile everything again.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from kubekit.client import KubeError, Resource
from kubekit.keys import object_key
from kubekit.objects import Obj

log = logging.getLogger(__name__)

HTTP_GONE = 410
INITIAL_BACKOFF = 0.1
VERY_SHORT_WATCH_SECONDS = 1.0


class Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410 or an ERROR event with code 410): re-list."""


class VeryShortWatch(Exception):
    """A watch that closed within a second without delivering one event: treated as a failed request."""


class Handler(Protocol):
    def on_upsert(self, old: Obj | None, new: Obj) -> None: ...
    def on_delete(self, old: Obj) -> None: ...
    def on_relist(self, objects: list[Obj]) -> None: ...


class IgnoreChanges:
    """The handler of a cache that is only read (the webhook's): nothing to do on a change."""

    def on_upsert(self, old: Obj | None, new: Obj) -> None:
        return None

    def on_delete(self, old: Obj) -> None:
        return None

    def on_relist(self, objects: list[Obj]) -> None:
        return None


class OnAnyChange:
    """The handler of a cache whose reader only needs to know that something changed: `changed()` is called
    on every event and after every (re-)list."""

    def __init__(self, changed: Callable[[], None]) -> None:
        self._changed = changed

    def on_upsert(self, old: Obj | None, new: Obj) -> None:
        self._changed()

    def on_delete(self, old: Obj) -> None:
        self._changed()

    def on_relist(self, objects: list[Obj]) -> None:
        self._changed()


class Stream(Protocol):
    def __iter__(self) -> Iterator[Obj]: ...
    def close(self) -> None: ...
    def interrupt(self) -> None: ...


class ListWatch(Protocol):
    """What an informer calls: `kubekit.client.Kube` in production, fakes in tests."""

    def list_objects(
        self,
        resource: Resource,
        *,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None = None,
        transform: Callable[[Obj], Obj | None] | None = None,
        metadata_only: bool = False,
    ) -> tuple[list[Obj], str]: ...

    def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None,
        label_selector: str | None,
        resource_version: str,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> Stream: ...


class Store:
    """Objects by `object_key`, plus one optional secondary index (e.g. the owning Job's key)."""

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

    def keys(self) -> set[str]:
        with self._lock:
            return set(self._objects)

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def upsert(self, obj: Obj) -> Obj | None:
        """Store `obj`; returns the object it replaced, if any."""
        with self._lock:
            return self._put(obj)

    def upsert_answer(self, obj: Obj) -> bool:
        """Store `obj`, the API server's answer to this client's own write, unless the store already holds a
        newer version of the same object (its watch event overtook the answer: a pod bound by the scheduler
        a moment after this client ungated it). Integer resourceVersions are compared, as client-go's
        `NewIntegerResourceVersionMutationCache` does; an answer whose version is not comparable is stored.
        True when stored."""
        with self._lock:
            cached = self._objects.get(object_key(obj))
            if cached is not None and _is_newer(cached, obj):
                return False
            self._put(obj)
            return True

    def _put(self, obj: Obj) -> Obj | None:
        """Store `obj` (call with the lock held); the object it replaced, if any."""
        key = object_key(obj)
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

    def _unindex(self, key: str, obj: Obj) -> None:
        if self._index_of is None or (value := self._index_of(obj)) is None:
            return
        keys = self._index.get(value)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._index[value]


def _is_newer(cached: Obj, answer: Obj) -> bool:
    """`cached` is a later version of the same object than `answer` (same uid, larger resourceVersion)."""
    cached_meta, answer_meta = cached.get("metadata") or {}, answer.get("metadata") or {}
    if cached_meta.get("uid") != answer_meta.get("uid"):
        return False
    try:
        return int(str(cached_meta.get("resourceVersion"))) > int(str(answer_meta.get("resourceVersion")))
    except ValueError:
        return False


def without_managed_fields(obj: Obj) -> Obj:
    """The default projection: drop what no decision reads and what costs the most memory at scale."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return obj


def _keep_all(_obj: Obj) -> bool:
    return True


def _ignore_restart(_informer: str, _reason: str) -> None:
    return None


class Informer:
    """List + watch of one resource into a `Store`, in a daemon thread.

    `on_restart(name, reason)` is called whenever a watch starts again: `ended` (the server closed it) or
    `dropped` (the connection broke), both resumed at once; `gone` (410, re-listed); after a backoff, an
    HTTP status or `connection` (a failed request), `short` (a very short watch), `decode` (a malformed
    event), `unexpected` (any other exception, re-listed).
    """

    def __init__(
        self,
        api: ListWatch,
        resource: Resource,
        *,
        name: str,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None = None,
        handler: Handler | None = None,
        keep: Callable[[Obj], bool] = _keep_all,
        project: Callable[[Obj], Obj] = without_managed_fields,
        store: Store | None = None,
        on_restart: Callable[[str, str], None] = _ignore_restart,
        max_backoff: float = 5.0,
        metadata_only: bool = False,
    ) -> None:
        self.api = api
        self.resource: Resource = resource
        self.name = name
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.handler: Handler = handler if handler is not None else IgnoreChanges()
        self.keep = keep
        self.project = project
        self.metadata_only = metadata_only
        """List and watch `PartialObjectMetadata` (for a cache that reads nothing but metadata)."""
        self.store = store if store is not None else Store()
        self.synced = threading.Event()
        self._on_restart = on_restart
        self._max_backoff = max_backoff
        self._stop = threading.Event()
        self._stream: Stream | None = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end and wake it from a blocking watch read; `join` waits for it."""
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.interrupt()

    def join(self, timeout: float | None = None) -> None:
        if self._thread.ident is not None:
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
                resource_version, how = self._watch(resource_version)
                failures = 0
                if not self._stop.is_set():
                    self._on_restart(self.name, how)
            except Gone:
                log.info("informer %s: resourceVersion %s expired, re-listing", self.name, resource_version)
                self._on_restart(self.name, "gone")
                resource_version = None
            except Exception as error:
                if self._stop.is_set():
                    return
                failures += 1
                reason = self._failure_reason(error)
                if reason == "unexpected":
                    log.exception("informer %s: unexpected error, re-listing", self.name)
                    resource_version = None
                self._on_restart(self.name, reason)
                delay = min(self._max_backoff, INITIAL_BACKOFF * 2 ** min(failures, 10))
                delay *= random.uniform(0.5, 1.0)
                log.warning("informer %s: %s; retrying in %.2fs", self.name, error, delay)
                self._stop.wait(delay)

    @staticmethod
    def _failure_reason(error: Exception) -> str:
        if isinstance(error, KubeError):
            return error.label
        if isinstance(error, VeryShortWatch):
            return "short"
        if isinstance(error, ValueError):
            return "decode"
        return "unexpected"

    def _relist(self) -> str:
        objects, resource_version = self.api.list_objects(
            self.resource,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            transform=self._prepare,
            **self._metadata_only(),
        )
        # A client that ignores `transform` returns whole objects: projections are idempotent, so applying
        # them again is harmless.
        kept = [self.project(obj) for obj in objects if self.keep(obj)]
        self._replace(kept)
        self.synced.set()
        self.handler.on_relist(kept)
        log.debug(
            "informer %s: listed %d (kept %d) at %s", self.name, len(objects), len(kept), resource_version
        )
        return resource_version

    def _metadata_only(self) -> dict[str, bool]:
        """Asked only when set, so list-watches written before it (test fakes) need not know the option."""
        return {"metadata_only": True} if self.metadata_only else {}

    def _prepare(self, obj: Obj) -> Obj | None:
        """What the cache keeps of one listed object (None: nothing), applied page by page so that a list of
        15,000 nodes never holds every whole object at once."""
        return self.project(obj) if self.keep(obj) else None

    def _replace(self, objects: Iterable[Obj]) -> None:
        fresh = {object_key(obj): obj for obj in objects}
        for key in self.store.keys() - fresh.keys():
            old = self.store.delete(key)
            if old is not None:
                self.handler.on_delete(old)
        for obj in fresh.values():
            self.store.upsert(obj)

    def _watch(self, resource_version: str) -> tuple[str, str]:
        """Follow one watch stream to its end: (the last resourceVersion seen, `ended` or `dropped`)."""
        try:
            stream = self.api.watch(
                self.resource,
                namespace=self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                resource_version=resource_version,
                **self._metadata_only(),
            )
        except KubeError as error:
            if error.status == HTTP_GONE:
                raise Gone from error
            raise
        self._stream = stream
        if self._stop.is_set():
            # stop() ran while this watch was being opened and could not interrupt it yet.
            stream.interrupt()
        started, events, how = time.monotonic(), 0, "ended"
        try:
            for event in stream:
                if self._stop.is_set():
                    break
                events += 1
                resource_version = self._apply(event, resource_version)
        except (KubeError, Gone, ValueError):
            raise
        except Exception as error:  # a reset or timed-out connection: resume from the last version seen
            if not self._stop.is_set():
                log.info(
                    "informer %s: watch dropped (%s), resuming at %s", self.name, error, resource_version
                )
            how = "dropped"
        finally:
            self._stream = None
            stream.close()
        if not events and time.monotonic() - started < VERY_SHORT_WATCH_SECONDS and not self._stop.is_set():
            raise VeryShortWatch(f"the watch closed within {VERY_SHORT_WATCH_SECONDS:g}s without an event")
        return resource_version, how

    def _apply(self, event: Obj, resource_version: str) -> str:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = obj.get("code")
            if code == HTTP_GONE:
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
            new = self.project(obj)
            old = self.store.upsert(new)
            self.handler.on_upsert(old, new)
        return str(version or resource_version)
