"""The one in-memory stand-in for the Kubernetes API server in unit tests (and the webhook's load
benchmark), shared by every binary's tests; behaviour of the cluster itself is tested on the real one
(tests/kube).

- `FakeKubeApi`: a small fake Kubernetes API server over real HTTP, driven by the real clients
  (`kubekit.client.Kube`, `kubekit.generic.GenericClient`, httpx). It serves, with the real REST shapes:
  discovery, list (equality label selectors) and watch of every resource it serves, get, create (409
  AlreadyExists), update (409 Conflict on a stale resourceVersion), patch (merge patch with resourceVersion
  and uid preconditions, JSON patch with `test` ops, 422 when one fails, strategic merge patch with lists
  of `type`d entries merged by type; the status subresource changes only the status), delete (uid
  precondition, graceful deletes on request), `dryRun=All`, TokenRequests and SubjectAccessReviews,
  `/readyz` and, on request, `/metrics`. Watches stream resourceVersioned events, bookmarks to clients
  that allow them, and a `410 Gone` ERROR event from a compacted resourceVersion.

  The knobs a test turns (each documented on its method): `fail_next` (injected 4xx/5xx answers and
  dropped connections), `hold_next` (a request held until released), `end_watches` (the server ends or
  breaks watches), `bookmark`, `compact`, `graceful_deletes`, `before_answering` (another client acts
  between a write and its answer), `serve`, `grants`, `serve_metrics`, `audit_log` / `audit_ids`,
  `serves_kueue`. What was asked is kept in `calls` (verb, resource, name, code, ...), `requests` (a
  count by verb), `paths` and `deleted`.

      with FakeKubeApi() as api:          # listens on 127.0.0.1, a free port
          api.put("nodes", node)
          kube = kube_of(api)             # the binaries' client (tests.support.fixtures)

- `WatchFeed`: one list + watch (`kubekit.informer.ListWatch`) in process, fed by hand, for a real
  `kubekit.informer.Informer`: `push` returns once the informer has applied the event. It is not an API
  server: it stands in for the informer's side of one connection, so that a test can step an informer
  event by event (and deliver events no server would send: a late or out-of-order one) with no HTTP
  timing in between. Whatever the code under test asks the API server goes to a `FakeKubeApi`.
"""

from __future__ import annotations

import copy
import itertools
import json
import socket
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import TracebackType
from typing import Any, Literal
from urllib.parse import parse_qs, urlparse

import jsonpatch

from kubekit.keys import object_key
from placement.constants import JOBSET_GROUP, JOBSET_VERSION
from placement.kueue import KUEUE_GROUP, KUEUE_VERSION, WORKLOADS
from placement.objects import Obj, labels_of
from tests.support.quiet_server import QuietHTTPServer

CORE_RESOURCES = {
    "pods": ("Pod", "pod"),
    "nodes": ("Node", "node"),
    "events": ("Event", "event"),
    "secrets": ("Secret", "secret"),
}
"""The core/v1 resources `GET /api/v1` lists: plural -> (kind, singular)."""
FEED_TIMEOUT = 10.0
"""Seconds `WatchFeed.push` waits for the informer: only bounds how long a broken test hangs."""
HOLD_TIMEOUT = 60.0
"""Seconds a held request waits for its release: only bounds how long a broken test hangs."""
WATCH_POLL = 0.2
"""Seconds a watch waits for events at a time, so that it notices the server closing."""
DROP: Literal["drop"] = "drop"
"""`fail_next(DROP)`: the connection is closed without an answer (a reset, a crashed server)."""
DELETION_TIMESTAMP = "2026-05-01T10:00:00Z"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class WatchFeed:
    """A list (`listed`) and one watch stream whose events a test pushes one at a time.

    The informer reads the stream in its own thread; `push` waits until the informer asks for the next
    event, which it does once it has applied the last one (its cache updated, its handler called): a test
    goes on with no sleep and no race. The events get increasing resourceVersions, as on an API server.
    """

    def __init__(self, listed: Sequence[Obj] = ()) -> None:
        self._listed = [copy.deepcopy(obj) for obj in listed]
        self._cond = threading.Condition()
        self._events: deque[Obj] = deque()
        self._version = 1
        self._pushed = 0
        self._taken = 0
        self._applied = 0
        self.watches = 0
        """Watch streams opened (one, unless the informer re-listed or restarted)."""

    def list_objects(self, resource: str, **_selectors: Any) -> tuple[list[Obj], str]:
        with self._cond:
            return [copy.deepcopy(obj) for obj in self._listed], str(self._version)

    def watch(self, resource: str, **_selectors: Any) -> _FeedStream:
        with self._cond:
            self.watches += 1
        return _FeedStream(self)

    def push(self, kind: str, obj: Obj, timeout: float = FEED_TIMEOUT) -> None:
        """Deliver one watch event (`ADDED`, `MODIFIED`, `DELETED`) and wait until it is applied."""
        with self._cond:
            self._version += 1
            event_obj = copy.deepcopy(obj)
            event_obj.setdefault("metadata", {})["resourceVersion"] = str(self._version)
            self._events.append({"type": kind, "object": event_obj})
            self._pushed += 1
            self._cond.notify_all()
            if not self._cond.wait_for(lambda: self._applied >= self._pushed, timeout):
                raise AssertionError(
                    f"the informer did not apply a {kind} event within {timeout:g}s "
                    f"({self._applied} of {self._pushed} applied, {self.watches} watches opened)"
                )

    def _next(self, stream: _FeedStream) -> Obj | None:
        """The next event for `stream` (None once it is interrupted); asking means the last one is applied."""
        with self._cond:
            self._applied = self._taken
            self._cond.notify_all()
            self._cond.wait_for(lambda: bool(self._events) or stream.interrupted)
            if stream.interrupted:
                return None
            self._taken += 1
            return self._events.popleft()

    def _interrupt(self, stream: _FeedStream) -> None:
        with self._cond:
            stream.interrupted = True
            self._cond.notify_all()


class _FeedStream:
    def __init__(self, feed: WatchFeed) -> None:
        self._feed = feed
        self.interrupted = False

    def __iter__(self) -> Iterator[Obj]:
        while (event := self._feed._next(self)) is not None:
            yield event

    def interrupt(self) -> None:
        self._feed._interrupt(self)

    def close(self) -> None:
        self._feed._interrupt(self)


# --- what is served ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Served:
    """A resource type the fake serves: `group_version` (`v1`, `batch/v1`), its plural, kind and scope.
    `stored_as`: the plural it shares storage with (events.k8s.io's Events are core Events)."""

    group_version: str
    plural: str
    kind: str
    namespaced: bool = True
    stored_as: str = ""

    @property
    def prefix(self) -> str:
        return "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"

    @property
    def store(self) -> str:
        return self.stored_as or self.plural


BUILT_IN = (
    Served("v1", "pods", "Pod"),
    Served("v1", "nodes", "Node", namespaced=False),
    Served("v1", "events", "Event"),
    Served("v1", "secrets", "Secret"),
    Served("v1", "configmaps", "ConfigMap"),
    Served("v1", "namespaces", "Namespace", namespaced=False),
    Served("v1", "serviceaccounts", "ServiceAccount"),
    Served("batch/v1", "jobs", "Job"),
    Served("coordination.k8s.io/v1", "leases", "Lease"),
    Served("events.k8s.io/v1", "events", "Event", stored_as="events"),
    Served(f"{JOBSET_GROUP}/{JOBSET_VERSION}", "jobsets", "JobSet"),
    Served(f"{KUEUE_GROUP}/{KUEUE_VERSION}", WORKLOADS, "Workload"),
)


@dataclass(frozen=True)
class Call:
    """One request as the fake answered it (an audit record): `resource` is the plural, with the
    subresource after a slash (`pods/status`), empty for what is not a resource (discovery, `/metrics`);
    `code` is 0 for a dropped connection."""

    verb: str
    resource: str
    namespace: str | None
    name: str
    code: int
    query: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    """The request's headers, names in lower case."""
    path: str = ""
    """The request's path, without the query."""

    @property
    def what(self) -> str:
        """`resource/name` (`pods/train-0-0`), or the resource alone for a collection."""
        return f"{self.resource}/{self.name}" if self.name else self.resource


@dataclass
class Hold:
    """A request held by `hold_next`: `arrived` is set once it is held; `release()` lets it go on."""

    verb: str | None
    resource: str | None
    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self.released.set()


@dataclass
class _Failure:
    answer: int | Literal["drop"]
    verb: str | None
    resource: str | None
    times: int


@dataclass
class _WatchEnding:
    after: int | None
    abruptly: bool
    times: int | None


@dataclass(frozen=True)
class _Event:
    resource_version: int
    store: str
    type: str
    obj: Obj


@dataclass(frozen=True)
class _Route:
    """A parsed request path: `served` is None for what is not a resource (discovery, `/metrics`)."""

    served: Served | None
    namespace: str | None = None
    name: str = ""
    subresource: str = ""

    @property
    def resource(self) -> str:
        if self.served is None:
            return ""
        return f"{self.served.plural}/{self.subresource}" if self.subresource else self.served.plural


def _matches(obj: Obj, selector: str) -> bool:
    labels = labels_of(obj)
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


def _key(namespace: str | None, name: str) -> str:
    """`object_key`'s form, from a request's path."""
    return f"{namespace}/{name}" if namespace else name


def status(code: int, reason: str, message: str) -> Obj:
    """A `Status` answer, as kube-apiserver words a failure."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "code": code,
        "message": message,
    }


class ApiError(Exception):
    """An answer other than 2xx, raised by the fake's own verbs."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.body = status(code, reason, message)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, `null` removes a key, anything else replaces."""
    return _merge(target, patch, by_type=False)


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """A merge patch in which lists of objects keyed by `type` (conditions) merge entry by entry, as the
    strategic merge patch of pods/status does; other lists are replaced."""
    return _merge(target, patch, by_type=True)


def _merge(target: Any, patch: Any, *, by_type: bool) -> Any:
    if by_type and isinstance(patch, list) and isinstance(target, list) and _typed(patch) and _typed(target):
        entries = {entry["type"]: entry for entry in target}
        for entry in patch:
            entries[entry["type"]] = _merge(entries.get(entry["type"]), entry, by_type=True)
        return list(entries.values())
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merge(merged.get(key), value, by_type=by_type)
    return merged


def _typed(entries: list[Any]) -> bool:
    return all(isinstance(entry, dict) and "type" in entry for entry in entries)


def _apply_patch(current: Obj, body: Any, content_type: str) -> Obj:
    if content_type.startswith(JSON_PATCH):
        try:
            patched: Obj = jsonpatch.apply_patch(current, body)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
            raise ApiError(422, "Invalid", str(error)) from error
        return patched
    meta = (body or {}).get("metadata") or {}
    wanted_version = meta.get("resourceVersion")
    if wanted_version is not None and wanted_version != current["metadata"].get("resourceVersion"):
        raise ApiError(409, "Conflict", "the object has been modified; please apply your changes")
    wanted_uid = meta.get("uid")
    if wanted_uid is not None and wanted_uid != current["metadata"].get("uid"):
        raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {wanted_uid}")
    if content_type.startswith(STRATEGIC_MERGE_PATCH):
        return dict(strategic_merge_patch(current, body))
    return dict(merge_patch(current, body))


class FakeKubeApi:
    """Thread-safe in-memory objects of every served resource behind a ThreadingHTTPServer."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._served: dict[tuple[str, str], Served] = {}
        self._discovered: set[tuple[str, str]] = set()
        self._objects: dict[str, dict[str, Obj]] = {}
        for served in BUILT_IN:
            self.serve(served, discovered=False)
        self.serves_kueue = False
        """Whether Kueue's Workloads are served (else 404, as from a cluster without Kueue's CRDs)."""
        self.graceful_deletes = False
        """Deleted pods stay, terminating (deletionTimestamp set, a MODIFIED event), as a pod with a grace
        period does; a second delete changes nothing."""
        self.grants: set[tuple[str, str]] = set()
        """(user, verb) pairs a SubjectAccessReview allows (every other review is denied)."""
        self.audit_log: Path | None = None
        """When set, every request is appended there as a kube-apiserver audit event (one JSON line)."""
        self.audit_ids = True
        """Whether each answer carries an `Audit-Id` header, as from a server that audits."""
        self.before_answering: Callable[[Call, Obj], None] | None = None
        """Called with a write's record and the stored object after the write, before it is answered:
        what another client does in between (a scheduler's bind seen before the answer to a patch)."""
        self._events: list[_Event] = []
        self._rv = 1
        self._compacted = 0
        self._closing = False
        self._failures: list[_Failure] = []
        self._holds: list[Hold] = []
        self._endings: list[_WatchEnding] = []
        self._metrics: list[str] = []
        self._audit_ids = itertools.count(1)
        self.calls: list[Call] = []
        """Every request, in the order they were answered (a dropped one too, code 0)."""
        self.requests: Counter[str] = Counter()
        """Requests by verb: list, watch, get, create, update, patch, delete, discovery (and `other`)."""
        self.paths: list[str] = []
        """Every request's path, query included, in order."""
        self.deleted: list[Obj] = []
        """Objects as they were when a delete request first reached them."""
        self._server = QuietHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._serve_forever, name="fake-kube-api", daemon=True)

    # --- lifecycle ----------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeKubeApi:
        self._thread.start()
        return self

    def _serve_forever(self) -> None:
        # socketserver checks for shutdown() between polls: a short poll makes each close quick.
        self._server.serve_forever(poll_interval=0.02)

    def close(self) -> None:
        with self._cond:
            self._closing = True
            for hold in self._holds:
                hold.release()
            self._cond.notify_all()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> FakeKubeApi:
        return self.start()

    def __exit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def closing(self) -> bool:
        return self._closing

    # --- knobs -----------------------------------------------------------------------------------------
    def serve(self, served: Served, *, discovered: bool = True) -> None:
        """Serve one more resource type (a CRD); `discovered`: listed by `GET /apis/<group>/<version>`."""
        with self._cond:
            self._served[(served.prefix, served.plural)] = served
            self._objects.setdefault(served.store, {})
            if discovered:
                self._discovered.add((served.prefix, served.plural))

    def fail_next(
        self,
        answer: int | Literal["drop"],
        *,
        times: int = 1,
        verb: str | None = None,
        resource: str | None = None,
    ) -> None:
        """The next `times` requests (of `verb` on `resource`, when given) fail: answered with status
        `answer` (429, 500, 403, ...) or, with `DROP`, their connection closed without an answer."""
        with self._cond:
            self._failures.append(_Failure(answer, verb, resource, times))

    def hold_next(self, verb: str | None = None, resource: str | None = None) -> Hold:
        """The next request (of `verb` on `resource`, when given) waits, before it is served, until the
        test calls `release()` on the returned `Hold` (or the fake closes): a slow or hung API call."""
        hold = Hold(verb, resource)
        with self._cond:
            self._holds.append(hold)
        return hold

    def end_watches(
        self, after: int | None = None, *, times: int | None = None, abruptly: bool = False
    ) -> None:
        """The server ends each of the next `times` watches (every watch from now on when None) once it
        has sent `after` events (0: at once), or, with `after=None`, once it has sent every event so far
        (caught up). `abruptly`: the connection breaks instead (no end of stream). Queued endings apply
        in order; a watch with none left runs until its `timeoutSeconds`."""
        with self._cond:
            self._endings.append(_WatchEnding(after, abruptly, times))

    def bookmark(self) -> int:
        """A BOOKMARK event at a new resourceVersion, sent to every watch that allows bookmarks."""
        with self._cond:
            self._rv += 1
            self._events.append(_Event(self._rv, "*", "BOOKMARK", {"metadata": {}}))
            self._cond.notify_all()
            return self._rv

    def compact(self) -> None:
        """Forget history: watches from an older resourceVersion get 410 Gone."""
        with self._cond:
            self._rv += 1
            self._compacted = self._rv
            self._events.clear()
            self._cond.notify_all()

    def serve_metrics(self, pages: Iterable[str]) -> None:
        """`GET /metrics` answers the next of `pages` at each scrape (the last one again once they run
        out), as a Prometheus text page."""
        with self._cond:
            self._metrics = list(pages)

    # --- state, as a test sets and reads it ------------------------------------------------------------
    def _record(self, store: str, kind: str, obj: Obj) -> Obj:
        self._rv += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        if kind == "DELETED":
            self._objects[store].pop(object_key(obj), None)
        else:
            self._objects[store][object_key(obj)] = obj
        self._events.append(_Event(self._rv, store, kind, obj))
        self._cond.notify_all()
        return copy.deepcopy(obj)

    def put(self, resource: str, obj: Obj) -> Obj:
        """Create or replace (ADDED / MODIFIED event); the stored object, with its resourceVersion."""
        with self._cond:
            kind = "MODIFIED" if object_key(obj) in self._objects[resource] else "ADDED"
            return self._record(resource, kind, obj)

    def delete(self, resource: str, obj: Obj) -> Obj | None:
        """Remove at once (DELETED event); what was stored, if anything."""
        with self._cond:
            current = self._objects[resource].get(object_key(obj))
            return None if current is None else self._record(resource, "DELETED", current)

    def stored(self, resource: str, namespace: str | None, name: str) -> Obj:
        """The stored object (KeyError when there is none)."""
        with self._cond:
            return copy.deepcopy(self._objects[resource][_key(namespace, name)])

    def find(self, resource: str, namespace: str | None, name: str) -> Obj | None:
        """The stored object, or None."""
        with self._cond:
            obj = self._objects[resource].get(_key(namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def objects(self, resource: str) -> list[Obj]:
        """Every stored object of `resource`, in the order they were first stored."""
        with self._cond:
            return copy.deepcopy(list(self._objects[resource].values()))

    def api_calls(self) -> int:
        return sum(self.requests.values())

    def count(self, verb: str, resource: str | None = None) -> int:
        """Requests of `verb` (on `resource`, `pods/status` for a subresource, when given)."""
        return len(self.calls_of(verb, resource))

    def calls_of(self, verb: str | None = None, resource: str | None = None) -> list[Call]:
        """The requests of `verb` on `resource` (each when given), in order."""
        with self._cond:
            return [
                c
                for c in self.calls
                if (verb is None or c.verb == verb) and (resource is None or c.resource == resource)
            ]

    # --- serving, called by the handler ---------------------------------------------------------------
    def route(self, path: str) -> _Route | None:
        """What a path names: a served resource (collection or object, maybe a subresource), else None."""
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) >= 2:
            prefix, rest = "/api/v1", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            prefix, rest = "/" + "/".join(parts[:3]), parts[3:]
        else:
            return None
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest:
            return None
        with self._cond:
            served = self._served.get((prefix, rest[0]))
        if served is None or (served.plural == WORKLOADS and not self.serves_kueue):
            return None
        return _Route(served, namespace, rest[1] if len(rest) > 1 else "", "/".join(rest[2:]))

    def discovery(self, path: str) -> Obj | None:
        """`GET /api/v1` or `GET /apis/<group>/<version>`: the resources listed there, else None."""
        if path.rstrip("/") == "/api/v1":
            return core_discovery()
        with self._cond:
            listed = [self._served[key] for key in sorted(self._discovered) if key[0] == path.rstrip("/")]
        if not listed:
            return None
        return {
            "kind": "APIResourceList",
            "groupVersion": path.strip("/").removeprefix("apis/"),
            "resources": [
                {"name": s.plural, "kind": s.kind, "namespaced": s.namespaced, "verbs": ["get", "list"]}
                for s in listed
            ],
        }

    def metrics_page(self) -> str | None:
        with self._cond:
            if not self._metrics:
                return None
            return self._metrics.pop(0) if len(self._metrics) > 1 else self._metrics[0]

    def take_failure(self, verb: str, resource: str) -> int | Literal["drop"] | None:
        with self._cond:
            for failure in self._failures:
                if failure.verb in (None, verb) and failure.resource in (None, resource):
                    failure.times -= 1
                    if failure.times <= 0:
                        self._failures.remove(failure)
                    return failure.answer
            return None

    def wait_if_held(self, verb: str, resource: str) -> None:
        with self._cond:
            hold = next(
                (h for h in self._holds if h.verb in (None, verb) and h.resource in (None, resource)), None
            )
            if hold is None:
                return
            self._holds.remove(hold)
            if self._closing:
                return
        hold.arrived.set()
        hold.released.wait(HOLD_TIMEOUT)

    def take_watch_ending(self) -> _WatchEnding | None:
        with self._cond:
            if not self._endings:
                return None
            ending = self._endings[0]
            if ending.times is not None:
                ending.times -= 1
                if ending.times <= 0:
                    self._endings.pop(0)
            return ending

    def note(self, call: Call) -> None:
        with self._cond:
            self.calls.append(call)
            self.requests[call.verb] += 1
        if self.audit_log is not None:
            self._audit(call)

    def _audit(self, call: Call) -> None:
        """One audit event, written before the request is answered: a client that has its answer finds
        its request in the log (kube-apiserver may log later, which the benchmark's marker request is
        for)."""
        resource, _, subresource = call.resource.partition("/")
        reference = {
            "resource": resource,
            "subresource": subresource,
            "namespace": call.namespace,
            "name": call.name,
        }
        event = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": call.headers.get("audit-id", ""),
            "stage": "ResponseComplete",
            "verb": call.verb,
            "user": {"username": "fake"},
            "userAgent": call.headers.get("user-agent", ""),
            "objectRef": {key: value for key, value in reference.items() if value},
            "responseStatus": {"code": call.code},
            "requestReceivedTimestamp": datetime.now(UTC).isoformat(),
        }
        assert self.audit_log is not None
        with self.audit_log.open("a") as log:
            log.write(json.dumps(event) + "\n")

    def next_audit_id(self) -> str:
        return f"fake-{next(self._audit_ids)}"

    def list_objects(self, served: Served, namespace: str | None, selector: str) -> Obj:
        with self._cond:
            items = [
                copy.deepcopy(o)
                for o in self._objects[served.store].values()
                if (namespace is None or o["metadata"].get("namespace") == namespace)
                and _matches(o, selector)
            ]
            return {
                "kind": f"{served.kind}List",
                "apiVersion": served.group_version,
                "metadata": {"resourceVersion": str(self._rv)},
                "items": items,
            }

    def get_object(self, route: _Route) -> Obj:
        assert route.served is not None
        with self._cond:
            obj = self._objects[route.served.store].get(_key(route.namespace, route.name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{route.served.plural} "{route.name}" not found')
            return copy.deepcopy(obj)

    def create(self, route: _Route, body: Obj, dry_run: bool) -> Obj:
        assert route.served is not None
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if route.served.namespaced:
            meta["namespace"] = route.namespace or meta.get("namespace") or "default"
        meta.setdefault("uid", str(uuid.uuid4()))
        with self._cond:
            if object_key(obj) in self._objects[route.served.store]:
                raise ApiError(409, "AlreadyExists", f'{route.served.plural} "{meta["name"]}" already exists')
            return obj if dry_run else self._record(route.served.store, "ADDED", obj)

    def update(self, route: _Route, body: Obj, dry_run: bool) -> Obj:
        current = self.get_object(route)
        if body.get("metadata", {}).get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified; please apply your changes")
        return self._replace(route, current, body, dry_run)

    def patch(self, route: _Route, body: Any, content_type: str, dry_run: bool) -> Obj:
        current = self.get_object(route)
        patched = _apply_patch(current, body, content_type)
        if route.subresource == "status":
            patched = {**current, "status": patched.get("status", {})}
        return self._replace(route, current, patched, dry_run)

    def _replace(self, route: _Route, current: Obj, new: Obj, dry_run: bool) -> Obj:
        """A write of `new` over `current`; a changed spec bumps the generation."""
        assert route.served is not None
        new = copy.deepcopy(new)
        meta = new.setdefault("metadata", {})
        meta.update(name=route.name, **({"namespace": route.namespace} if route.namespace else {}))
        if new.get("spec") != current.get("spec"):
            meta["generation"] = int(current["metadata"].get("generation") or 1) + 1
        with self._cond:
            if dry_run:
                return new
            if self._objects[route.served.store].get(object_key(new)) != current:
                raise ApiError(409, "Conflict", "the object has been modified; please apply your changes")
            return self._record(route.served.store, "MODIFIED", new)

    def remove(self, route: _Route, body: Obj | None, dry_run: bool) -> Obj:
        """A delete: the uid precondition checked, gracefully when `graceful_deletes` is set."""
        assert route.served is not None
        current = self.get_object(route)
        wanted_uid = ((body or {}).get("preconditions") or {}).get("uid")
        if wanted_uid and current["metadata"].get("uid") != wanted_uid:
            raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {wanted_uid}")
        if dry_run:
            return current
        with self._cond:
            if current["metadata"].get("deletionTimestamp"):
                return current
            self.deleted.append(current)
            if self.graceful_deletes and route.served.plural == "pods":
                terminating = copy.deepcopy(current)
                terminating["metadata"]["deletionTimestamp"] = DELETION_TIMESTAMP
                return self._record(route.served.store, "MODIFIED", terminating)
            self._record(route.served.store, "DELETED", current)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200}

    def watch_events(
        self,
        served: Served,
        namespace: str | None,
        selector: str,
        since: int,
        bookmarks: bool,
        timeout: float,
    ) -> tuple[list[Obj], int] | None:
        """(matching events after `since`, resourceVersion scanned up to), blocking up to `timeout` for
        the first; None when `since` is compacted (410 Gone)."""
        with self._cond:
            if since < self._compacted:
                return None
            self._cond.wait_for(
                lambda: self._closing or any(e.resource_version > since for e in self._events), timeout
            )
            events = [
                self._wire_event(e, served)
                for e in self._events
                if e.resource_version > since
                and (
                    (e.store == "*" and bookmarks)
                    or (
                        e.store == served.store
                        and (namespace is None or e.obj["metadata"].get("namespace") == namespace)
                        and _matches(e.obj, selector)
                    )
                )
            ]
            return events, self._rv

    @staticmethod
    def _wire_event(event: _Event, served: Served) -> Obj:
        if event.type == "BOOKMARK":
            obj: Obj = {
                "kind": served.kind,
                "apiVersion": served.group_version,
                "metadata": {"resourceVersion": str(event.resource_version)},
            }
            return {"type": "BOOKMARK", "object": obj}
        return {"type": event.type, "object": copy.deepcopy(event.obj)}

    def current_state(self, served: Served, namespace: str | None, selector: str) -> tuple[list[Obj], int]:
        """A watch without a resourceVersion: ADDED for every matching object, and the version it is at."""
        listed = self.list_objects(served, namespace, selector)
        added = [{"type": "ADDED", "object": o} for o in listed["items"]]
        return added, int(listed["metadata"]["resourceVersion"])

    def token(self, route: _Route, body: Obj) -> Obj:
        """A TokenRequest's answer: a token naming the ServiceAccount and the seconds asked for."""
        seconds = body["spec"]["expirationSeconds"]
        return {**body, "status": {"token": f"token-of-{route.name}-{seconds}"}}

    def review(self, body: Obj) -> Obj:
        """A SubjectAccessReview's answer: allowed for the (user, verb) pairs in `grants`."""
        spec = body["spec"]
        allowed = (spec["user"], spec["resourceAttributes"]["verb"]) in self.grants
        return {**body, "status": {"allowed": allowed}}


def core_discovery() -> Obj:
    """`GET /api/v1`: the core resources, as kube-apiserver lists them."""
    return {
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {
                "name": plural,
                "singularName": singular,
                "namespaced": plural != "nodes",
                "kind": kind,
                "verbs": ["get", "list", "watch"],
            }
            for plural, (kind, singular) in CORE_RESOURCES.items()
        ],
    }


VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def _verb(method: str, route: _Route, query: Mapping[str, str]) -> str:
    if method != "GET":
        return VERBS.get(method, "other")
    if route.name:
        return "get"
    return "watch" if query.get("watch") in ("true", "1", "True") else "list"


def _handler_for(api: FakeKubeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # Nagle's algorithm with the client's delayed ACK would stall small answers by 40 ms.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, code: int, data: bytes, content_type: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            if api.audit_ids and self._audit_id:
                self.send_header("Audit-Id", self._audit_id)
            self.end_headers()
            self.wfile.write(data)

        def _send_json(self, code: int, body: Obj) -> None:
            self._send(code, json.dumps(body).encode())

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _drop(self) -> None:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length)) if length else None

        def _serve(self) -> None:
            self._audit_id = api.next_audit_id()
            api.paths.append(self.path)
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            body = self._body()
            headers = {k.lower(): v for k, v in self.headers.items()}
            headers["audit-id"] = self._audit_id
            route = api.route(url.path)
            if route is None:
                self._serve_other(url.path, body, headers)
                return
            verb = _verb(self.command, route, query)
            call = Call(
                verb, route.resource, route.namespace, route.name, 200, query, body, headers, url.path
            )
            failure = api.take_failure(verb, route.resource)
            if failure is not None:
                self._fail(call, failure)
                return
            api.wait_if_held(verb, route.resource)
            if verb == "watch":
                api.note(call)
                self._watch(route, query)
                return
            try:
                code, answer = self._answer(route, verb, query, body)
            except ApiError as error:
                api.note(replace(call, code=error.code))
                self._send_json(error.code, error.body)
                return
            call = replace(call, code=code)
            api.note(call)
            if verb in VERBS.values() and api.before_answering is not None:
                api.before_answering(call, answer)
            self._send_json(code, answer)

        def _fail(self, call: Call, failure: int | Literal["drop"]) -> None:
            if failure == DROP:
                api.note(replace(call, code=0))
                self._drop()
                return
            assert isinstance(failure, int)
            api.note(replace(call, code=failure))
            self._send_json(failure, status(failure, "Injected", f"injected {failure} for {call.what}"))

        def _answer(self, route: _Route, verb: str, query: dict[str, str], body: Any) -> tuple[int, Obj]:
            dry_run = query.get("dryRun") == "All"
            assert route.served is not None
            if verb == "list":
                return 200, api.list_objects(route.served, route.namespace, query.get("labelSelector", ""))
            if verb == "get":
                return 200, api.get_object(route)
            if verb == "create" and route.subresource == "token":
                return 201, api.token(route, body)
            if verb == "create":
                return 201, api.create(route, body, dry_run)
            if verb == "update":
                return 200, api.update(route, body, dry_run)
            if verb == "patch":
                return 200, api.patch(route, body, self.headers.get("Content-Type", MERGE_PATCH), dry_run)
            if verb == "delete":
                return 200, api.remove(route, body, dry_run)
            raise ApiError(405, "MethodNotAllowed", f"{self.command} is not served")

        def _serve_other(self, path: str, body: Any, headers: dict[str, str]) -> None:
            """Discovery, `/readyz`, `/metrics`, SubjectAccessReviews; 404 for anything else."""
            code, verb, content_type, data = self._answer_other(path, body)
            api.note(Call(verb, "", None, "", code, {}, body, headers, path))
            self._send(code, data, content_type)

        def _answer_other(self, path: str, body: Any) -> tuple[int, str, str, bytes]:
            """(code, verb, content type, body) of a request for something other than a resource."""
            discovered = api.discovery(path) if self.command == "GET" else None
            page = api.metrics_page() if path == "/metrics" and self.command == "GET" else None
            if discovered is not None:
                return 200, "discovery", "application/json", json.dumps(discovered).encode()
            if path == "/readyz":
                return 200, "get", "text/plain", b"ok"
            if page is not None:
                return 200, "get", "text/plain; version=0.0.4", page.encode()
            if path == REVIEWS and self.command == "POST":
                return 201, "create", "application/json", json.dumps(api.review(body)).encode()
            missing = status(404, "NotFound", f"the server could not find the requested resource ({path})")
            return 404, "other", "application/json", json.dumps(missing).encode()

        def _watch(self, route: _Route, query: dict[str, str]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            ending = api.take_watch_ending()
            if self._stream(route, query, ending) == "ended" and ending is not None and ending.abruptly:
                self._drop()
                return
            self.wfile.write(b"0\r\n\r\n")

        def _stream(self, route: _Route, query: dict[str, str], ending: _WatchEnding | None) -> str:
            """Send events until the watch's time is up or the server closes (`timeout`), an ERROR event
            (`error`), or `ending` ends it (`ended`)."""
            assert route.served is not None
            selector = query.get("labelSelector", "")
            bookmarks = query.get("allowWatchBookmarks") in ("true", "1", "True")
            deadline = time.monotonic() + float(query.get("timeoutSeconds") or 30)
            caught_up = ending is not None and ending.after is None
            limit = ending.after if ending is not None else None
            sent = 0
            version = query.get("resourceVersion") or "0"
            if version == "0":
                pending, since = api.current_state(route.served, route.namespace, selector)
            else:
                pending, since = [], int(version)
            while not api.closing and (left := deadline - time.monotonic()) > 0:
                if limit is not None and sent >= limit:
                    return "ended"
                if not pending:
                    wait = 0.0 if caught_up else min(WATCH_POLL, left)
                    batch = api.watch_events(route.served, route.namespace, selector, since, bookmarks, wait)
                    if batch is None:
                        gone = status(410, "Expired", f"too old resource version: {since}")
                        self._chunk(json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n")
                        return "error"
                    pending, since = batch
                if caught_up and not pending:
                    return "ended"
                for event in pending:
                    if limit is not None and sent >= limit:
                        return "ended"
                    self._chunk(json.dumps(event).encode() + b"\n")
                    sent += 1
                pending = []
            return "timeout"

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    return Handler
