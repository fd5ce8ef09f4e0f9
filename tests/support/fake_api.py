"""The one in-memory stand-in for the Kubernetes API server in unit tests (and the webhook's load
benchmark), shared by every binary's tests; behaviour of the cluster itself is tested on the real one
(tests/kube).

- `FakeKubeApi`: a small fake Kubernetes API server over real HTTP. Serves what the webhook's informers and
  live lookups and Helm's `lookup` call, with the real REST shapes: discovery of the core group it serves,
  list and watch of pods (all namespaces or one), nodes and Jobs with equality label selectors, GET of
  a pod, a node, a Secret or a JobSet (`jobset.x-k8s.io/v1alpha2`), list of Kueue's Workloads when
  `serves_kueue` is set (404 otherwise, as without Kueue's CRDs), resourceVersions, bookmarks-free
  watch streams, and `410 Gone` ERROR events for watches from a compacted resourceVersion. Counts every
  request so callers can assert how many API calls something cost, and records every path it was asked.

      with FakeKubeApi() as api:          # listens on 127.0.0.1, a free port
          api.put("nodes", node)
          settings = Settings(server=api.url, ...)

- `WatchFeed`: one list + watch (`kubekit.informer.ListWatch`) in process, fed by hand, for a real
  `kubekit.informer.Informer`: `push` returns once the informer has applied the event.
"""

from __future__ import annotations

import copy
import json
import threading
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlparse

from placement.constants import JOBSET_GROUP, JOBSET_VERSION
from placement.kueue import KUEUE_GROUP, KUEUE_VERSION, WORKLOADS
from placement.objects import Obj

CORE_RESOURCES = {
    "pods": ("Pod", "pod"),
    "nodes": ("Node", "node"),
    "events": ("Event", "event"),
    "secrets": ("Secret", "secret"),
}
"""The core/v1 resources served: plural -> (kind, singular)."""
CLUSTER_SCOPED = {"nodes"}
FEED_TIMEOUT = 10.0
"""Seconds `WatchFeed.push` waits for the informer: only bounds how long a broken test hangs."""


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


@dataclass(frozen=True)
class _Event:
    resource_version: int
    resource: str
    type: str
    obj: Obj


def _matches(obj: Obj, selector: str) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


def _key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


class FakeKubeApi:
    """Thread-safe in-memory pods, nodes, Events, Secrets, Jobs and JobSets behind a ThreadingHTTPServer."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._objects: dict[str, dict[str, Obj]] = {
            resource: {} for resource in (*CORE_RESOURCES, "jobs", "jobsets", WORKLOADS)
        }
        self.serves_kueue = False
        """Whether Kueue's Workloads are listed (else 404, as from a cluster without Kueue's CRDs)."""
        self._events: list[_Event] = []
        self._rv = 1
        self._compacted = 0
        self._closing = False
        self.requests: Counter[str] = Counter()
        """Requests by verb: list, watch, get, discovery (and `other` for anything unsupported)."""
        self.paths: list[str] = []
        """Every request's path, query included, in order."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-kube-api", daemon=True)

    # --- lifecycle ----------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeKubeApi:
        self._thread.start()
        return self

    def close(self) -> None:
        with self._cond:
            self._closing = True
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

    # --- state -------------------------------------------------------------------------------------------
    def _record(self, resource: str, kind: str, obj: Obj) -> Obj:
        self._rv += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        if kind == "DELETED":
            self._objects[resource].pop(_key(obj), None)
        else:
            self._objects[resource][_key(obj)] = obj
        self._events.append(_Event(self._rv, resource, kind, obj))
        self._cond.notify_all()
        return obj

    def put(self, resource: str, obj: Obj) -> Obj:
        """Create or replace (ADDED / MODIFIED event)."""
        with self._cond:
            kind = "MODIFIED" if _key(obj) in self._objects[resource] else "ADDED"
            return self._record(resource, kind, obj)

    def delete(self, resource: str, obj: Obj) -> None:
        with self._cond:
            current = self._objects[resource].get(_key(obj))
            if current is not None:
                self._record(resource, "DELETED", current)

    def compact(self) -> None:
        """Forget history: watches from an older resourceVersion get 410 Gone."""
        with self._cond:
            self._rv += 1
            self._compacted = self._rv
            self._events.clear()
            self._cond.notify_all()

    def api_calls(self) -> int:
        return sum(self.requests.values())

    # --- what the handler serves ----------------------------------------------------------------------------
    def list_objects(self, resource: str, namespace: str | None, selector: str) -> Obj:
        with self._cond:
            items = [
                copy.deepcopy(o)
                for o in self._objects[resource].values()
                if (namespace is None or o["metadata"].get("namespace") == namespace)
                and _matches(o, selector)
            ]
            return {
                "kind": "List",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self._rv)},
                "items": items,
            }

    def get_object(self, resource: str, key: str) -> Obj | None:
        with self._cond:
            obj = self._objects[resource].get(key)
            return copy.deepcopy(obj) if obj is not None else None

    def watch_events(
        self, resource: str, namespace: str | None, selector: str, since: int, timeout: float
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
                {"type": e.type, "object": copy.deepcopy(e.obj)}
                for e in self._events
                if e.resource_version > since
                and e.resource == resource
                and (namespace is None or e.obj["metadata"].get("namespace") == namespace)
                and _matches(e.obj, selector)
            ]
            return events, self._rv

    @property
    def closing(self) -> bool:
        return self._closing


def core_discovery() -> Obj:
    """`GET /api/v1`: the resources this fake serves, as kube-apiserver lists them."""
    return {
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {
                "name": plural,
                "singularName": singular,
                "namespaced": plural not in CLUSTER_SCOPED,
                "kind": kind,
                "verbs": ["get", "list", "watch"],
            }
            for plural, (kind, singular) in CORE_RESOURCES.items()
        ],
    }


def _handler_for(api: FakeKubeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send_json(self, status: int, body: Obj) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _not_found(self, what: str) -> None:
            self._send_json(
                404,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "NotFound",
                    "code": 404,
                    "message": f"{what} not found",
                },
            )

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _watch(self, resource: str, namespace: str | None, selector: str, query: dict[str, str]) -> None:
            since = int(query.get("resourceVersion") or 0)
            deadline_left = float(query.get("timeoutSeconds") or 30)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            step = 0.2
            while deadline_left > 0 and not api.closing:
                batch = api.watch_events(resource, namespace, selector, since, min(step, deadline_left))
                deadline_left -= step
                if batch is None:
                    gone = {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "reason": "Expired",
                        "code": 410,
                        "message": f"too old resource version: {since}",
                    }
                    self._chunk(json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n")
                    break
                events, since = batch
                for event in events:
                    self._chunk(json.dumps(event).encode() + b"\n")
            self.wfile.write(b"0\r\n\r\n")
            self.close_connection = True

        def do_GET(self) -> None:
            api.paths.append(self.path)
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            selector = query.get("labelSelector", "")
            parts = [p for p in url.path.split("/") if p]
            namespace: str | None = None
            if (
                parts[:3] == ["apis", JOBSET_GROUP, JOBSET_VERSION]
                and len(parts) == 7
                and parts[5] == "jobsets"
            ):
                api.requests["get"] += 1
                jobset = api.get_object("jobsets", f"{parts[4]}/{parts[6]}")
                if jobset is None:
                    self._not_found(f'jobsets.{JOBSET_GROUP} "{parts[6]}"')
                else:
                    self._send_json(200, jobset)
                return
            if (
                api.serves_kueue
                and parts[:3] == ["apis", KUEUE_GROUP, KUEUE_VERSION]
                and parts[-1] == WORKLOADS
            ):
                api.requests["list"] += 1
                namespace = parts[4] if len(parts) == 6 else None
                self._send_json(200, api.list_objects(WORKLOADS, namespace, selector))
                return
            served: tuple[str, ...]
            if parts[:3] == ["apis", "batch", "v1"]:
                rest, served = parts[3:], ("jobs",)
            elif parts[:2] == ["api", "v1"]:
                rest, served = parts[2:], tuple(CORE_RESOURCES)
            else:
                api.requests["other"] += 1
                self._not_found(url.path)
                return
            if parts[:2] == ["api", "v1"] and not rest:
                api.requests["discovery"] += 1
                self._send_json(200, core_discovery())
                return
            if len(rest) >= 2 and rest[0] == "namespaces":
                namespace, rest = rest[1], rest[2:]
            if rest and rest[0] in served:
                resource = rest[0]
                if len(rest) == 1:
                    if query.get("watch") in ("true", "1", "True"):
                        api.requests["watch"] += 1
                        self._watch(resource, namespace, selector, query)
                    else:
                        api.requests["list"] += 1
                        self._send_json(200, api.list_objects(resource, namespace, selector))
                    return
                api.requests["get"] += 1
                obj = api.get_object(resource, f"{namespace or ''}/{rest[1]}")
                if obj is None:
                    self._not_found(f"{resource} {rest[1]}")
                else:
                    self._send_json(200, obj)
                return
            api.requests["other"] += 1
            self._not_found(url.path)

    return Handler
