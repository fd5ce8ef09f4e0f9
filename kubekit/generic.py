"""Any kind by name: the generic client of the tools (devstack, the benchmarks, the kube test tier).

Plain dicts in, plain dicts out, on the binaries' `kubekit.client.Transport` (the official client's
`ApiClient`, no hidden retries, one `KubeError` with the HTTP status): the tools talk to kube-apiserver
(TLS, a client certificate or a bearer token) exactly as the binaries do, and to a plain-HTTP URL with no
credentials (a test's in-memory fake). `create` takes any kind the API server serves (`served_type`); the
other calls take a kind of the client's table (`kubekit.resources.BUILTIN_KINDS` and the custom kinds its
caller declares).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kubekit.client import (
    MERGE_PATCH,
    KubeError,
    Timeouts,
    Transport,
    cluster_configuration,
    configured_api_client,
)
from kubekit.credentials import Credentials, configuration
from kubekit.objects import Obj
from kubekit.resources import (
    BUILTIN_KINDS,
    ResourceType,
    UnservedKind,
    api_prefix,
    collection_path,
    object_path,
)

USER_AGENT = "devstack"
POOL_SIZE = 16
"""Connections kept: the tools watch from several threads while their main thread keeps calling."""
Items = list[Obj]
"""A list's items (the name `list` is the client's method inside the class)."""
PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")


def delete_options(propagation: str) -> dict[str, str]:
    if propagation not in PROPAGATION_POLICIES:
        raise ValueError(f"propagation must be one of {', '.join(PROPAGATION_POLICIES)}, got {propagation!r}")
    return {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}


class GenericClient:
    """Create, read, list, watch, patch and delete objects of any kind, as a tool does."""

    def __init__(self, transport: Transport, kinds: Mapping[str, ResourceType] | None = None) -> None:
        self.transport = transport
        self.kinds: Mapping[str, ResourceType] = {**BUILTIN_KINDS, **(kinds or {})}

    @classmethod
    def connect(
        cls,
        server: str,
        *,
        credentials: Credentials | None = None,
        timeout: float = 30.0,
        kinds: Mapping[str, ResourceType] | None = None,
    ) -> GenericClient:
        """`server` as given: plain HTTP without credentials, or TLS with `credentials`."""
        api_client = configured_api_client(
            configuration(server, credentials), user_agent=USER_AGENT, pool_size=POOL_SIZE
        )
        return cls(Transport(api_client, Timeouts(connect=timeout, read=timeout)), kinds)

    @classmethod
    def from_kubeconfig(
        cls, path: Path, *, timeout: float = 30.0, kinds: Mapping[str, ResourceType] | None = None
    ) -> GenericClient:
        """The server and the user of the kubeconfig's current context."""
        api_client = configured_api_client(
            cluster_configuration(path, None), user_agent=USER_AGENT, pool_size=POOL_SIZE
        )
        return cls(Transport(api_client, Timeouts(connect=timeout, read=timeout)), kinds)

    @property
    def server(self) -> str:
        host: str = self.transport.api_client.configuration.host
        return host

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> GenericClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def resource_type(self, kind: str) -> ResourceType:
        try:
            return self.kinds[kind]
        except KeyError:
            known = ", ".join(sorted(self.kinds))
            raise ValueError(f"kind {kind!r} is not in the client's table (known: {known})") from None

    def served_type(self, api_version: str, kind: str) -> ResourceType:
        """Where objects of this apiVersion and kind live: the client's table, else discovery."""
        known = self.kinds.get(kind)
        if known is not None and (not api_version or known.prefix == api_prefix(api_version)):
            return known
        prefix = api_prefix(api_version)
        try:
            resources = self.transport.request("GET", f"/{prefix}").get("resources") or []
        except KubeError as err:
            if err.not_found:
                raise UnservedKind(f"the API server does not serve {api_version} (kind {kind})") from None
            raise
        for resource in resources:
            if resource.get("kind") == kind and "/" not in str(resource.get("name")):
                return ResourceType(prefix, str(resource["name"]), bool(resource.get("namespaced")))
        raise UnservedKind(f"the API server serves no kind {kind} in {api_version}")

    def create(self, obj: Obj, *, namespace: str | None = None, as_user: str | None = None) -> Obj:
        """POST `obj` (a namespaced kind with no namespace goes to `default`); `as_user`: impersonating that
        user (the admin may: `Impersonate-User`), as the component that creates such objects would (the
        Job controller, for a Job's pods)."""
        rtype = self.served_type(str(obj.get("apiVersion") or ""), obj["kind"])
        headers = {"Impersonate-User": as_user} if as_user else None
        path = collection_path(rtype, _namespace(obj, namespace, rtype))
        return self.transport.request("POST", path, body=obj, headers=headers)

    def create_or_replace(self, obj: Obj, *, namespace: str | None = None) -> Obj:
        """Create, or on 409 AlreadyExists replace the existing object (cluster-scoped configs)."""
        try:
            return self.create(obj, namespace=namespace)
        except KubeError as err:
            if not err.conflict:
                raise
        rtype = self.served_type(str(obj.get("apiVersion") or ""), obj["kind"])
        path = object_path(rtype, obj["metadata"]["name"], _namespace(obj, namespace, rtype))
        current = self.transport.request("GET", path)
        version = current["metadata"]["resourceVersion"]
        replacement = {**obj, "metadata": {**obj["metadata"], "resourceVersion": version}}
        return self.transport.request("PUT", path, body=replacement)

    def get(self, kind: str, name: str, *, namespace: str | None = None) -> Obj:
        return self.transport.request("GET", object_path(self.resource_type(kind), name, namespace))

    def list(self, kind: str, *, namespace: str | None = None, label_selector: str | None = None) -> Items:
        return self.list_with_version(kind, namespace=namespace, label_selector=label_selector)[0]

    def list_with_version(
        self, kind: str, *, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[Items, str]:
        """The items and the list's resourceVersion, to watch from."""
        query = {"labelSelector": label_selector} if label_selector else None
        listed = self.transport.request(
            "GET", collection_path(self.resource_type(kind), namespace), query=query
        )
        return listed.get("items") or [], str((listed.get("metadata") or {}).get("resourceVersion") or "")

    def delete(
        self, kind: str, name: str, *, namespace: str | None = None, propagation: str = "Background"
    ) -> None:
        """Delete, by default in the background (dependents collected after; `Foreground`: the object stays,
        with a deletionTimestamp, until its dependents are gone); already gone is not an error."""
        options = delete_options(propagation)
        path = object_path(self.resource_type(kind), name, namespace)
        try:
            self.transport.request("DELETE", path, body=options)
        except KubeError as err:
            if not err.not_found:
                raise

    def patch(
        self,
        kind: str,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        subresource: str = "",
        patch_type: str = MERGE_PATCH,
        dry_run: bool = False,
    ) -> Obj:
        """`dry_run`: admitted (webhooks, policies) and validated, never stored."""
        path = object_path(self.resource_type(kind), name, namespace, subresource)
        query = {"dryRun": "All"} if dry_run else None
        return self.transport.request("PATCH", path, body=body, content_type=patch_type, query=query)

    def watch(
        self, kind: str, *, namespace: str | None = None, resource_version: str, timeout_seconds: int = 600
    ) -> Iterator[tuple[str, Obj]]:
        """(type, object) of every event from `resource_version` on, until the server ends the watch or
        the caller stops iterating (the connection is closed then, not returned half read)."""
        query = {"watch": "true", "resourceVersion": resource_version, "timeoutSeconds": str(timeout_seconds)}
        stream = self.transport.stream(
            collection_path(self.resource_type(kind), namespace), query, timeout_seconds
        )
        try:
            for event in stream:
                yield str(event["type"]), event["object"]
        finally:
            stream.interrupt()

    def request_token(self, namespace: str, service_account: str, *, seconds: int) -> str:
        """A token of `service_account` (TokenRequest), as a Pod's projected token would be."""
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token"
        return str(self.transport.request("POST", path, body=body)["status"]["token"])

    def service_account_may(
        self, namespace: str, service_account: str, verb: str, resource: str, group: str = ""
    ) -> bool:
        """kube-apiserver's authorizer's answer (a SubjectAccessReview) to `service_account` of `namespace`
        doing `verb` on `resource` there. RBAC reads bindings from an informer: a binding just written may
        not authorize the next request yet, so a caller waits for this before acting as the account."""
        review = self.create(
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {
                    "user": f"system:serviceaccount:{namespace}:{service_account}",
                    "groups": [
                        "system:serviceaccounts",
                        f"system:serviceaccounts:{namespace}",
                        "system:authenticated",
                    ],
                    "resourceAttributes": {
                        "namespace": namespace,
                        "verb": verb,
                        "group": group,
                        "resource": resource,
                    },
                },
            }
        )
        return bool(review.get("status", {}).get("allowed"))

    def text(self, path: str) -> str:
        """A non-JSON endpoint (`/metrics`, `/readyz`), as text; `KubeError` on an error status."""
        return self.transport.text(path)


def _namespace(obj: Obj, namespace: str | None, rtype: ResourceType) -> str | None:
    """The object's own namespace, else the caller's; `default` for a namespaced kind given neither."""
    chosen = (obj.get("metadata") or {}).get("namespace") or namespace
    return chosen or ("default" if rtype.namespaced else None)
