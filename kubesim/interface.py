"""The in-process API the controllers use (the contract between kubesim's API server and its controllers).

The API server (`kubesim.apiserver`) implements `KubeApi`; the controllers (`kubesim.controllers`) only
use this protocol, exactly as kube-controller-manager only uses the REST API. Every call is counted in
`Stats` like an HTTP request and every create/update goes through admission (webhooks included).

Resources are plural lower-case names: "namespaces", "nodes", "pods", "events", "jobs", "leases",
"jobsets", "mutatingwebhookconfigurations", "validatingwebhookconfigurations". Objects are plain dicts in
Kubernetes JSON shape. Errors are raised as `kubesim.errors.ApiError` (status, reason, message).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict

PatchType = Literal["merge", "strategic", "json", "apply"]
EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]


class WatchEvent(TypedDict):
    type: EventType
    object: dict[str, Any]


class KubeApi(Protocol):
    async def create(
        self,
        resource: str,
        obj: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
        client: str = "controller",
    ) -> dict[str, Any]:
        """Create (generateName honoured). Pod binding: resource="pods", subresource="binding",
        obj={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod}, "target": {"kind": "Node",
        "name": node}}. Raises ApiError 409 AlreadyExists, 422 Invalid, 403/400 on admission denial."""
        ...

    async def get(
        self, resource: str, name: str, *, namespace: str | None = None, client: str = "controller"
    ) -> dict[str, Any]: ...

    async def list(
        self,
        resource: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        client: str = "controller",
    ) -> tuple[list[dict[str, Any]], str]:
        """Returns (items, resourceVersion of the list)."""
        ...

    async def update(
        self,
        resource: str,
        obj: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        client: str = "controller",
    ) -> dict[str, Any]:
        """Replace. metadata.resourceVersion, when set, is a precondition (409 Conflict if stale).
        subresource="status" changes only .status."""
        ...

    async def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        *,
        patch_type: PatchType = "merge",
        namespace: str | None = None,
        subresource: str | None = None,
        client: str = "controller",
    ) -> dict[str, Any]: ...

    async def delete(
        self,
        resource: str,
        name: str,
        *,
        namespace: str | None = None,
        grace_period_seconds: int | None = None,
        client: str = "controller",
    ) -> dict[str, Any]:
        """Delete. A pod bound to a node and not yet terminal is deleted gracefully: the API server sets
        metadata.deletionTimestamp (a MODIFIED event) and the kubelet finishes it with
        grace_period_seconds=0. Everything else is removed at once (a DELETED event); dependents with
        ownerReferences are garbage-collected in the background."""
        ...

    def watch(
        self,
        resource: str,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Events after resource_version (None: from now). Raises ApiError 410 Gone if it is too old."""
        ...


@dataclass(frozen=True)
class WebhookReply:
    """What an in-process admission webhook answers (an AdmissionResponse without the wire).

    Allowed: `obj` is the object as a mutating webhook changed it (None: unchanged). Denied: `status` is
    the response's Status (`code`, `reason`, `message`, optional `details`); the client sees
    `admission webhook "<name>" denied the request: <message>` with that code."""

    allowed: bool = True
    obj: dict[str, Any] | None = None
    status: Mapping[str, Any] | None = None
    warnings: tuple[str, ...] = ()


WebhookHandler = Callable[[dict[str, Any]], Awaitable[WebhookReply]]
"""Called with the object under admission: a mutating webhook's handler gets a copy it may change and
return in `WebhookReply.obj`; a validating webhook's handler gets the object itself and must not change it."""


class WebhookServing(Protocol):
    """The API server's admission chain, for webhooks served in-process (JobSet's, run by kubesim's
    JobSet manager): configured like any Mutating/ValidatingWebhookConfiguration and called in the
    same order and on the same matches, but through `handlers` instead of an HTTPS round trip."""

    def serve_in_process(
        self, configuration: dict[str, Any], handlers: Mapping[str, WebhookHandler], *, mutating: bool
    ) -> Callable[[], None]:
        """Register `configuration` (a webhook configuration object; clientConfig is ignored), each
        webhook answered by `handlers[webhook name]`. Returns the function that unregisters it."""
        ...
