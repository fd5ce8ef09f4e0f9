"""The one door to the API server for both binaries: the official client, raw JSON in and out.

Responses are read with `_preload_content=False` and parsed as plain dicts (the shape `placement/` decides
on), which also skips the client's slow model deserialisation. Every call carries a client-side timeout so
a dead connection cannot hang a thread, urllib3 never retries behind the caller's back, and every failure
surfaces as one `KubeError`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any, Literal, TypeVar

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from kubekit.objects import Obj

Resource = Literal["jobs", "pods", "nodes", "events"]


@dataclass(frozen=True)
class CustomResource:
    """A custom resource by its API group, version and plural (`jobsets` of `jobset.x-k8s.io/v1alpha2`):
    declared by the caller that reads it, so the client names no one's CRDs."""

    group: str
    version: str
    plural: str

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}"


T = TypeVar("T")

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
HOME_KUBECONFIG = Path("~/.kube/config")
LEASES = "/apis/coordination.k8s.io/v1"
EVENTS = "/apis/events.k8s.io/v1"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
LIST_PAGE_SIZE = 500
METADATA_LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
METADATA_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
"""client-go's metadata client (controller-runtime's metadata-only informers) asks this way: a server that
cannot transform falls back to whole objects (the plain `application/json`), which a projection trims."""


class ClusterConfigError(RuntimeError):
    """No usable way to reach the API server (the message says which sources were tried)."""


def _load_kubeconfig(
    path: Path | str, configuration: client.Configuration, context: str | None = None
) -> None:
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(path), context=context, client_configuration=configuration
        )
    except (config.ConfigException, OSError, ValueError) as err:
        raise ClusterConfigError(f"kubeconfig {path}: {err}") from err


def _load_in_cluster_or_home(configuration: client.Configuration, context: str | None = None) -> None:
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return
    except config.ConfigException as in_cluster_error:
        home = HOME_KUBECONFIG.expanduser()
        if not home.is_file():
            raise ClusterConfigError(
                f"no cluster configuration: not running in a cluster ({in_cluster_error}), $KUBECONFIG is "
                f"unset and {home} does not exist; pass --kubeconfig or --server"
            ) from in_cluster_error
    _load_kubeconfig(home, configuration, context)


def cluster_configuration(
    kubeconfig: Path | None, server: str | None, context: str | None = None
) -> client.Configuration:
    """`--server` (plain URL, no credentials: a local test API server) > `--kubeconfig` > `$KUBECONFIG` >
    in-cluster service account > `~/.kube/config` (controller-runtime's order, after the explicit flags).
    `context`: a kubeconfig context other than its current one."""
    configuration = client.Configuration()
    if server:
        configuration.host = server.rstrip("/")
    elif kubeconfig is not None:
        if not kubeconfig.is_file():
            raise ClusterConfigError(f"kubeconfig {kubeconfig} does not exist")
        _load_kubeconfig(kubeconfig, configuration, context)
    elif os.environ.get("KUBECONFIG"):
        _load_kubeconfig(os.environ["KUBECONFIG"], configuration, context)
    else:
        _load_in_cluster_or_home(configuration, context)
    return configuration


def build_api_client(
    kubeconfig: Path | None,
    server: str | None,
    *,
    user_agent: str,
    pool_size: int | None = None,
    context: str | None = None,
) -> client.ApiClient:
    """An `ApiClient` with no hidden retries: urllib3's default retries a timed-out read 3 times, so a call
    could take 4x its timeout (a live lookup outliving the admission deadline, a Lease renewal outliving the
    renew deadline). The callers retry where they know the deadline. `pool_size`: connections kept per
    host (the client's default, 5 per CPU, when None)."""
    configuration = cluster_configuration(kubeconfig, server, context)
    return configured_api_client(configuration, user_agent=user_agent, pool_size=pool_size)


def configured_api_client(
    configuration: client.Configuration, *, user_agent: str, pool_size: int | None = None
) -> client.ApiClient:
    """`build_api_client` for a configuration the caller made (`kubekit.credentials.configuration`)."""
    if pool_size is not None:
        configuration.connection_pool_maxsize = pool_size
    configuration.retries = urllib3.Retry(total=0, redirect=False, raise_on_status=False)
    api_client = client.ApiClient(configuration)
    api_client.user_agent = user_agent
    return api_client


class KubeError(Exception):
    """A failed API call. `status` is None for connection-level failures (refused, reset, timed out)."""

    def __init__(self, status: int | None, reason: str, message: str = "") -> None:
        super().__init__(f"{status or 'connection'} {reason}: {message}".rstrip(": "))
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def retryable(self) -> bool:
        return self.status is None or self.status in RETRYABLE_STATUSES

    @property
    def not_found(self) -> bool:
        return is_not_found(self.status)

    @property
    def conflict(self) -> bool:
        return is_conflict(self.status)

    @property
    def label(self) -> str:
        """A short, bounded metric label: the status code, or `connection`."""
        return str(self.status) if self.status is not None else "connection"


def is_not_found(status: int | None) -> bool:
    """404: no such object, or no such kind (an API group the server does not serve). A `KubeError`'s
    status (`KubeError.not_found`), or a raw HTTP response's."""
    return status == HTTPStatus.NOT_FOUND


def is_conflict(status: int | None) -> bool:
    """409: the object already exists (a create), or a precondition no longer holds (a uid, a
    resourceVersion). A `KubeError`'s status (`KubeError.conflict`), or a raw HTTP response's."""
    return status == HTTPStatus.CONFLICT


def _translate(error: Exception) -> KubeError:
    if isinstance(error, ApiException):
        reason, message = str(error.reason or ""), ""
        if error.body:
            try:
                status_body = json.loads(error.body)
                reason = status_body.get("reason") or reason
                message = status_body.get("message") or ""
            except (ValueError, AttributeError):
                message = str(error.body)[:200]
        return KubeError(int(error.status) if error.status else None, reason, message)
    return KubeError(None, type(error).__name__, str(error))


def _call(function: Callable[[], T]) -> T:
    try:
        return function()
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as error:
        raise _translate(error) from error


def _accept(accept: str | None) -> dict[str, Any]:
    """The generated client's per-call header override (its own `Accept` otherwise)."""
    return {} if accept is None else {"_headers": {"Accept": accept}}


@dataclass(frozen=True)
class Timeouts:
    connect: float = 5.0
    read: float = 10.0
    watch_server_seconds: int = 300
    """The server ends each watch after this; the client read timeout is a little longer."""

    @property
    def request(self) -> tuple[float, float]:
        return (self.connect, self.read)

    @property
    def watch(self) -> tuple[float, float]:
        return (self.connect, self.watch_server_seconds + self.read)

    def call(self, total: float | None) -> tuple[float, float]:
        """(connect, read) of one call: the default, or `total` when the caller has a deadline of its own."""
        return self.request if total is None else (min(self.connect, total), total)


def _json(response: Any) -> Obj:
    """The JSON body of a response read unparsed (`_preload_content=False`); then pooled again."""
    try:
        data = response.data
    finally:
        response.release_conn()
    parsed: Obj = json.loads(data)
    return parsed


class WatchStream:
    """One open watch response: iterate its events; `interrupt()` from another thread ends the iteration."""

    def __init__(self, response: Any) -> None:
        self._response = response

    def __iter__(self) -> Iterator[Obj]:
        buffer = b""
        for chunk in self._response.stream(amt=None, decode_content=True):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    yield json.loads(line)

    def close(self) -> None:
        """Return the connection to the pool after a clean end of stream."""
        with contextlib.suppress(Exception):
            self._response.release_conn()

    def interrupt(self) -> None:
        """From another thread: wake a reader blocked in recv() by shutting the socket down.

        urllib3's `HTTPResponse.shutdown` reaches the socket even when http.client has already let go of
        it on the connection (a response with `Connection: close`); without it, `close()` would wait for the
        blocked reader until the server ends the watch."""
        with contextlib.suppress(Exception):
            self._response.shutdown()
        connection = getattr(self._response, "connection", None)
        sock = getattr(connection, "sock", None)
        with contextlib.suppress(OSError):
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            self._response.close()


class Transport:
    """Calls by path, raw JSON in and out, on the binaries' `ApiClient`: its TLS, token, timeouts and no
    retries, every failure one `KubeError`. `Kube`'s writes that must go out as written use it; so does
    `kubekit.generic`'s client of the tools, so there is one way to reach the API server. Not part of
    `Kube`'s methods: the chart's RBAC is checked against those, one request each."""

    def __init__(self, api_client: client.ApiClient, timeouts: Timeouts) -> None:
        self.api_client = api_client
        self.timeouts = timeouts

    def close(self) -> None:
        self.api_client.close()  # type: ignore[no-untyped-call]

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Obj:
        """Any call by its path, the JSON answer as a dict: what the typed methods have no method for
        (`kubekit.generic`). `body` goes out as given (JSON), `headers` add to the client's own."""
        sent = {"Accept": "application/json", **(headers or {})}
        if body is not None:
            sent["Content-Type"] = content_type
        return _call(
            lambda: _json(
                self._open(method, path, self.timeouts.call(timeout), query=query, headers=sent, body=body)
            )
        )

    def text(self, path: str, timeout: float | None = None) -> str:
        """A non-JSON endpoint (`/metrics`, `/readyz`, `/version`) as text."""

        def call() -> str:
            response = self._open("GET", path, self.timeouts.call(timeout), headers={"Accept": "*/*"})
            try:
                data: bytes = response.data
            finally:
                response.release_conn()
            return data.decode(errors="replace")

        return _call(call)

    def stream(self, path: str, query: Mapping[str, str], server_seconds: int) -> WatchStream:
        """A watch by its path (`query` says `watch=true` and from where), open for `server_seconds` and
        the read timeout after them."""
        timeout = (self.timeouts.connect, server_seconds + self.timeouts.read)
        return WatchStream(_call(lambda: self._open("GET", path, timeout, query=query)))

    def _open(
        self,
        method: str,
        path: str,
        timeout: tuple[float, float],
        *,
        query: Mapping[str, str] | None = None,
        headers: dict[str, str] | None = None,
        body: Any = None,
    ) -> Any:
        """The urllib3 response of a 2xx answer, its body unread; else an `ApiException` with the body."""
        params = self.api_client.param_serialize(
            method,
            path,
            query_params=list(query.items()) if query else None,
            header_params=dict(headers or {}),
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.api_client.call_api(*params, _request_timeout=timeout).response
        if not 200 <= response.status <= 299:
            try:
                text = response.data.decode(errors="replace")
            finally:
                response.release_conn()
            raise ApiException(status=response.status, reason=response.reason, body=text)
        return response


class Kube:
    """Typed, dict-based wrapper over the calls the webhook and the resizer make."""

    def __init__(self, api_client: client.ApiClient, timeouts: Timeouts) -> None:
        self.api_client = api_client
        self.timeouts = timeouts
        self.transport = Transport(api_client, timeouts)
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    def close(self) -> None:
        self.api_client.close()  # type: ignore[no-untyped-call]

    def _timeout(self, total: float | None) -> tuple[float, float]:
        return self.timeouts.call(total)

    def _raw(
        self, function: Callable[..., Any], *args: Any, timeout: float | None = None, **kwargs: Any
    ) -> Obj:
        return _call(
            lambda: _json(
                function(*args, _preload_content=False, _request_timeout=self._timeout(timeout), **kwargs)
            )
        )

    def _list_function(self, resource: Resource, namespace: str | None) -> Callable[..., Any]:
        if resource == "nodes":
            return self.core.list_node
        if resource == "events":
            return (
                self.core.list_event_for_all_namespaces
                if namespace is None
                else self.core.list_namespaced_event
            )
        if resource == "jobs":
            return (
                self.batch.list_job_for_all_namespaces
                if namespace is None
                else self.batch.list_namespaced_job
            )
        return self.core.list_pod_for_all_namespaces if namespace is None else self.core.list_namespaced_pod

    def list_objects(
        self,
        resource: Resource,
        *,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None = None,
        timeout: float | None = None,
        transform: Callable[[Obj], Obj | None] | None = None,
        metadata_only: bool = False,
    ) -> tuple[list[Obj], str]:
        """All matching objects (following `continue`, pages of 500) and the list's resourceVersion.

        `transform` is applied to each page's items as it arrives (None drops an item): an informer's
        projection, so only one page of whole objects is ever held. `metadata_only` asks for
        `PartialObjectMetadata` items (metadata alone; whole objects from a server that cannot)."""
        function = self._list_function(resource, namespace)
        args = () if namespace is None else (namespace,)
        items: list[Obj] = []
        token: str | None = None
        while True:
            page = self._raw(
                function,
                *args,
                timeout=timeout,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=LIST_PAGE_SIZE,
                _continue=token,
                **_accept(METADATA_LIST_ACCEPT if metadata_only else None),
            )
            page_items: list[Obj] = page.get("items") or []
            if transform is None:
                items.extend(page_items)
            else:
                items.extend(kept for item in page_items if (kept := transform(item)) is not None)
            page_metadata = page.get("metadata") or {}
            token = page_metadata.get("continue") or None
            if not token:
                return items, str(page_metadata.get("resourceVersion") or "")

    def list_custom_objects(
        self, resource: CustomResource, *, namespace: str | None, timeout: float | None = None
    ) -> list[Obj]:
        """The custom objects of `resource` in `namespace` (None: every namespace), following `continue`
        (pages of 500)."""
        function = (
            self.custom.list_cluster_custom_object
            if namespace is None
            else self.custom.list_namespaced_custom_object
        )
        where = () if namespace is None else (namespace,)
        items: list[Obj] = []
        token: str | None = None
        while True:
            page = self._raw(
                function,
                resource.group,
                resource.version,
                *where,
                resource.plural,
                timeout=timeout,
                limit=LIST_PAGE_SIZE,
                _continue=token,
            )
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return items

    def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None,
        label_selector: str | None,
        resource_version: str,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> WatchStream:
        function = self._list_function(resource, namespace)
        args = () if namespace is None else (namespace,)
        response = _call(
            lambda: function(
                *args,
                label_selector=label_selector,
                field_selector=field_selector,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=self.timeouts.watch_server_seconds,
                watch=True,
                _preload_content=False,
                _request_timeout=self.timeouts.watch,
                **_accept(METADATA_ACCEPT if metadata_only else None),
            )
        )
        return WatchStream(response)

    def get_job(self, namespace: str, name: str) -> Obj:
        return self._raw(self.batch.read_namespaced_job, name, namespace)

    def patch_job(self, namespace: str, name: str, merge_patch: Obj) -> Obj:
        return self._raw(
            self.batch.patch_namespaced_job, name, namespace, merge_patch, _content_type=MERGE_PATCH
        )

    def json_patch_job(self, namespace: str, name: str, json_patch: list[Obj]) -> Obj:
        return self._raw(
            self.batch.patch_namespaced_job, name, namespace, json_patch, _content_type=JSON_PATCH
        )

    def get_pod(self, namespace: str, name: str) -> Obj:
        return self._raw(self.core.read_namespaced_pod, name, namespace)

    def patch_pod(self, namespace: str, name: str, json_patch: list[Obj]) -> Obj:
        return self._raw(
            self.core.patch_namespaced_pod, name, namespace, json_patch, _content_type=JSON_PATCH
        )

    def patch_pod_status(self, namespace: str, name: str, strategic_merge_patch: Obj) -> Obj:
        """A strategic merge patch of `pods/status` (conditions merge by type)."""
        return self._raw(
            self.core.patch_namespaced_pod_status,
            name,
            namespace,
            strategic_merge_patch,
            _content_type=STRATEGIC_MERGE_PATCH,
        )

    def delete_pod(self, namespace: str, name: str, uid: str) -> Obj:
        """Delete exactly this pod (a uid precondition: never a newer pod of the same name), in the
        background, with the pod's own grace period."""
        body = {"preconditions": {"uid": uid}, "propagationPolicy": "Background"}
        return self._raw(self.core.delete_namespaced_pod, name, namespace, body=body)

    def get_custom_object(
        self, resource: CustomResource, namespace: str, name: str, timeout: float | None = None
    ) -> Obj:
        """One namespaced custom object of `resource`."""
        return self._raw(
            self.custom.get_namespaced_custom_object,
            resource.group,
            resource.version,
            namespace,
            resource.plural,
            name,
            timeout=timeout,
        )

    def get_cluster_custom_object(
        self, resource: CustomResource, name: str, timeout: float | None = None
    ) -> Obj:
        """One cluster-scoped custom object of `resource`."""
        return self._raw(
            self.custom.get_cluster_custom_object,
            resource.group,
            resource.version,
            resource.plural,
            name,
            timeout=timeout,
        )

    def get_node(self, name: str, timeout: float | None = None) -> Obj:
        return self._raw(self.core.read_node, name, timeout=timeout)

    def get_lease(self, namespace: str, name: str, timeout: float | None = None) -> Obj:
        return self._raw(self.coordination.read_namespaced_lease, name, namespace, timeout=timeout)

    def create_lease(self, namespace: str, lease: Obj, timeout: float | None = None) -> Obj:
        return self._send("POST", f"{LEASES}/namespaces/{namespace}/leases", lease, timeout)

    def replace_lease(self, namespace: str, name: str, lease: Obj, timeout: float | None = None) -> Obj:
        return self._send("PUT", f"{LEASES}/namespaces/{namespace}/leases/{name}", lease, timeout)

    def create_event(self, namespace: str, event: Obj, timeout: float | None = None) -> Obj:
        """Create an events.k8s.io/v1 Event (its eventTime is a MicroTime: sent as written)."""
        return self._send("POST", f"{EVENTS}/namespaces/{namespace}/events", event, timeout)

    def patch_event(
        self, namespace: str, name: str, strategic_merge_patch: Obj, timeout: float | None = None
    ) -> Obj:
        """A strategic merge patch of an events.k8s.io/v1 Event (a series' count and lastObservedTime)."""
        return self._send(
            "PATCH",
            f"{EVENTS}/namespaces/{namespace}/events/{name}",
            strategic_merge_patch,
            timeout,
            content_type=STRATEGIC_MERGE_PATCH,
        )

    def _send(
        self,
        method: str,
        path: str,
        body: Obj,
        timeout: float | None,
        content_type: str = "application/json",
    ) -> Obj:
        """A write with the body sent exactly as given.

        The generated Lease and Event methods coerce the body into their models, whose datetimes then
        serialise with `+00:00` offsets; a MicroTime must go out as written (RFC 3339, microseconds, `Z`)."""
        return self.transport.request(method, path, body=body, content_type=content_type, timeout=timeout)
