"""The kubernetes Python client in typed tests.

The client's model classes type every field as optional and its request bodies as model objects, while
tests send plain manifests (which the client serialises as they are) and read fields they know are set.
These helpers say so once instead of at every call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException


class _HasMetadata(Protocol):
    @property
    def metadata(self) -> client.V1ObjectMeta | None: ...


@contextmanager
def kube_client(kubeconfig: Path) -> Iterator[client.ApiClient]:
    """A client for the cluster in `kubeconfig`, closed on exit."""
    api: client.ApiClient = config.new_client_from_config(str(kubeconfig))  # type: ignore[no-untyped-call]
    try:
        yield api
    finally:
        api.close()  # type: ignore[no-untyped-call]


def as_body(manifest: Mapping[str, Any]) -> Any:
    """A plain manifest as a request body: the client sends a dict as it is."""
    return manifest


def meta(obj: _HasMetadata) -> client.V1ObjectMeta:
    assert obj.metadata is not None, f"{type(obj).__name__} without metadata"
    return obj.metadata


def labels_of(obj: _HasMetadata) -> dict[str, str]:
    return meta(obj).labels or {}


def name_of(obj: _HasMetadata) -> str:
    value = meta(obj).name
    assert value is not None, f"{type(obj).__name__} without a name"
    return value


class _HasListMetadata(Protocol):
    @property
    def metadata(self) -> client.V1ListMeta | None: ...


def list_version(listed: _HasListMetadata) -> str:
    """The resourceVersion of a list, to watch from."""
    assert listed.metadata is not None, "a list without metadata"
    version = listed.metadata.resource_version
    assert version, "a list without a resourceVersion"
    return version


def error_status(error: ApiException) -> dict[str, Any]:
    """The Status object the API server answered with."""
    assert error.body is not None, f"HTTP {error.status} without a body"
    status: dict[str, Any] = json.loads(error.body)
    return status


def watch_events(list_function: Callable[..., Any], *args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """The events of one watch (`watch.Watch().stream`), each {"type", "object", "raw_object"}."""
    stream: Iterator[dict[str, Any]] = watch.Watch().stream(  # type: ignore[no-untyped-call]
        list_function, *args, **kwargs
    )
    return stream
