"""The resizer's only door to the API server: the official client, raw JSON in and out.

Responses are read with `_preload_content=False` and parsed as plain dicts (the shape `placement/` decides
on), which also skips the client's slow model deserialisation. Every call carries a client-side timeout so
a dead connection cannot hang a worker, and every failure surfaces as one `KubeError`.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

Obj = dict[str, Any]
Resource = Literal["jobs", "pods"]
T = TypeVar("T")

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
LEASES = "/apis/coordination.k8s.io/v1"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


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
    def label(self) -> str:
        """A short, bounded metric label: the status code, or `connection`."""
        return str(self.status) if self.status is not None else "connection"


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


@dataclass(frozen=True)
class Timeouts:
    connect: float = 5.0
    read: float = 30.0
    watch_server_seconds: int = 300
    """The server ends each watch after this; the client read timeout is a little longer."""

    @property
    def request(self) -> tuple[float, float]:
        return (self.connect, self.read)

    @property
    def watch(self) -> tuple[float, float]:
        return (self.connect, self.watch_server_seconds + self.read)


def build_api_client(
    kubeconfig: Path | None, server: str | None, pool_size: int, user_agent: str
) -> client.ApiClient:
    """`--server` (plain URL, e.g. kubesim) > `--kubeconfig` > in-cluster > ~/.kube/config."""
    configuration = client.Configuration()
    if server:
        configuration.host = server.rstrip("/")
    elif kubeconfig:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig), client_configuration=configuration
        )
    else:
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = pool_size
    # No hidden urllib3 retries (its default retries a timed-out read 3 times, so a call could take 4x its
    # timeout and a Lease renewal outlive the renew deadline): the work queue and the elector retry.
    configuration.retries = urllib3.Retry(total=0, redirect=False, raise_on_status=False)
    api_client = client.ApiClient(configuration)
    api_client.user_agent = user_agent
    return api_client


class WatchStream:
    """One open watch response: iterate its events; `close()` from another thread ends the iteration."""

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
        """From another thread: wake a reader blocked in recv() by shutting the socket down."""
        connection = getattr(self._response, "connection", None)
        sock = getattr(connection, "sock", None)
        with contextlib.suppress(OSError):
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            self._response.close()


class Kube:
    """Typed, dict-based wrapper over the calls the resizer makes."""

    def __init__(self, api_client: client.ApiClient, timeouts: Timeouts) -> None:
        self.api_client = api_client
        self.timeouts = timeouts
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.coordination = client.CoordinationV1Api(api_client)

    def close(self) -> None:
        self.api_client.close()  # type: ignore[no-untyped-call]

    @staticmethod
    def _json(response: Any) -> Obj:
        try:
            data = response.data
        finally:
            response.release_conn()
        parsed: Obj = json.loads(data)
        return parsed

    def _timeout(self, total: float | None) -> dict[str, Any]:
        return {} if total is None else {"_request_timeout": (min(self.timeouts.connect, total), total)}

    def _raw(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
        kwargs.setdefault("_request_timeout", self.timeouts.request)
        return _call(lambda: self._json(function(*args, _preload_content=False, **kwargs)))

    def _list_function(self, resource: Resource, namespace: str | None) -> Callable[..., Any]:
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
    ) -> tuple[list[Obj], str]:
        """All matching objects (following `continue`) and the list's resourceVersion."""
        function = self._list_function(resource, namespace)
        args = () if namespace is None else (namespace,)
        items: list[Obj] = []
        token: str | None = None
        while True:
            page = self._raw(
                function,
                *args,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=500,
                _continue=token,
            )
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return items, str((page.get("metadata") or {}).get("resourceVersion") or "")

    def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None,
        label_selector: str | None,
        resource_version: str,
        field_selector: str | None = None,
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
            )
        )
        return WatchStream(response)

    def get_job(self, namespace: str, name: str) -> Obj:
        return self._raw(self.batch.read_namespaced_job, name, namespace)

    def patch_job(self, namespace: str, name: str, merge_patch: Obj) -> Obj:
        return self._raw(
            self.batch.patch_namespaced_job, name, namespace, merge_patch, _content_type=MERGE_PATCH
        )

    def get_pod(self, namespace: str, name: str) -> Obj:
        return self._raw(self.core.read_namespaced_pod, name, namespace)

    def patch_pod(self, namespace: str, name: str, json_patch: list[Obj]) -> Obj:
        return self._raw(
            self.core.patch_namespaced_pod, name, namespace, json_patch, _content_type=JSON_PATCH
        )

    def get_node(self, name: str) -> Obj:
        return self._raw(self.core.read_node, name)

    def get_lease(self, namespace: str, name: str, timeout: float | None = None) -> Obj:
        return self._raw(self.coordination.read_namespaced_lease, name, namespace, **self._timeout(timeout))

    def create_lease(self, namespace: str, lease: Obj, timeout: float | None = None) -> Obj:
        return self._send("POST", f"{LEASES}/namespaces/{namespace}/leases", lease, timeout)

    def replace_lease(self, namespace: str, name: str, lease: Obj, timeout: float | None = None) -> Obj:
        return self._send("PUT", f"{LEASES}/namespaces/{namespace}/leases/{name}", lease, timeout)

    def _send(self, method: str, path: str, body: Obj, timeout: float | None) -> Obj:
        """A write with the body sent exactly as given.

        The generated Lease methods coerce the body into `V1Lease`, whose datetimes then serialise with
        `+00:00` offsets; a Lease's MicroTime must go out as written (RFC 3339, microseconds, `Z`)."""
        request_timeout = self._timeout(timeout).get("_request_timeout", self.timeouts.request)

        def call() -> Obj:
            params = self.api_client.param_serialize(
                method,
                path,
                header_params={"Content-Type": "application/json", "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self.api_client.call_api(*params, _request_timeout=request_timeout)
            data: bytes = response.response.data
            if not 200 <= response.status <= 299:
                text = data.decode(errors="replace")
                raise ApiException(status=response.status, reason=response.reason, body=text)
            parsed: Obj = json.loads(data)
            return parsed

        return _call(call)
