"""A small synchronous REST client for the handful of kinds devstack and the benchmarks touch.

Plain dicts in, plain dicts out, over httpx: the stack talks to kube-apiserver (TLS, a client certificate
or a bearer token from a kubeconfig) exactly as any client would, and to a plain-HTTP URL with no
credentials (a test's in-memory fake). `create` takes any kind the API server serves: a kind outside the
table below is looked up in discovery (its apiVersion's resource list), as kubectl does.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

Items = list[dict[str, Any]]


@dataclass(frozen=True)
class ResourceType:
    prefix: str
    plural: str
    namespaced: bool


RESOURCE_TYPES: dict[str, ResourceType] = {
    "Namespace": ResourceType("api/v1", "namespaces", False),
    "Node": ResourceType("api/v1", "nodes", False),
    "Pod": ResourceType("api/v1", "pods", True),
    "Event": ResourceType("api/v1", "events", True),
    "Job": ResourceType("apis/batch/v1", "jobs", True),
    "JobSet": ResourceType("apis/jobset.x-k8s.io/v1alpha2", "jobsets", True),
    "Lease": ResourceType("apis/coordination.k8s.io/v1", "leases", True),
    "ConfigMap": ResourceType("api/v1", "configmaps", True),
    "FlowSchema": ResourceType("apis/flowcontrol.apiserver.k8s.io/v1", "flowschemas", False),
    "PriorityLevelConfiguration": ResourceType(
        "apis/flowcontrol.apiserver.k8s.io/v1", "prioritylevelconfigurations", False
    ),
    "CustomResourceDefinition": ResourceType(
        "apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False
    ),
    "PriorityClass": ResourceType("apis/scheduling.k8s.io/v1", "priorityclasses", False),
    "Workload": ResourceType("apis/kueue.x-k8s.io/v1beta2", "workloads", True),
    "LocalQueue": ResourceType("apis/kueue.x-k8s.io/v1beta2", "localqueues", True),
    "ClusterQueue": ResourceType("apis/kueue.x-k8s.io/v1beta2", "clusterqueues", False),
    "ResourceFlavor": ResourceType("apis/kueue.x-k8s.io/v1beta2", "resourceflavors", False),
    "Topology": ResourceType("apis/kueue.x-k8s.io/v1beta2", "topologies", False),
    "WorkloadPriorityClass": ResourceType("apis/kueue.x-k8s.io/v1beta2", "workloadpriorityclasses", False),
    "ServiceAccount": ResourceType("api/v1", "serviceaccounts", True),
    "SubjectAccessReview": ResourceType("apis/authorization.k8s.io/v1", "subjectaccessreviews", False),
    "ClusterRole": ResourceType("apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ResourceType("apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ResourceType("apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ResourceType("apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "MutatingWebhookConfiguration": ResourceType(
        "apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", False
    ),
    "ValidatingWebhookConfiguration": ResourceType(
        "apis/admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", False
    ),
    "ValidatingAdmissionPolicy": ResourceType(
        "apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicies", False
    ),
    "ValidatingAdmissionPolicyBinding": ResourceType(
        "apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", False
    ),
    "MutatingAdmissionPolicy": ResourceType(
        "apis/admissionregistration.k8s.io/v1", "mutatingadmissionpolicies", False
    ),
    "MutatingAdmissionPolicyBinding": ResourceType(
        "apis/admissionregistration.k8s.io/v1", "mutatingadmissionpolicybindings", False
    ),
}


class KubeError(RuntimeError):
    def __init__(self, status: int, reason: str, message: str):
        super().__init__(f"HTTP {status} {reason}: {message}")
        self.status = status
        self.reason = reason


def resource_type(kind: str) -> ResourceType:
    try:
        return RESOURCE_TYPES[kind]
    except KeyError:
        known = ", ".join(sorted(RESOURCE_TYPES))
        raise ValueError(f"kind {kind!r} is not supported by devstack (supported: {known})") from None


def collection_path(kind: str, namespace: str | None = None, rtype: ResourceType | None = None) -> str:
    rtype = rtype or resource_type(kind)
    if rtype.namespaced and namespace:
        return f"/{rtype.prefix}/namespaces/{namespace}/{rtype.plural}"
    return f"/{rtype.prefix}/{rtype.plural}"


def api_prefix(api_version: str) -> str:
    """`v1` → `api/v1`, `group/version` → `apis/group/version`."""
    return f"apis/{api_version}" if "/" in api_version else f"api/{api_version}"


class UnservedKind(ValueError):
    """The API server serves no such kind: the message says which apiVersion and kind."""


@dataclass(frozen=True)
class Credentials:
    """How to reach an API server over TLS: the CA that signed it, and a client certificate or a token."""

    ca_file: Path
    client_cert: tuple[Path, Path] | None = None
    token: str | None = None

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        if self.client_cert is not None:
            context.load_cert_chain(str(self.client_cert[0]), str(self.client_cert[1]))
        return context


def kubeconfig_credentials(path: Path) -> tuple[str, Credentials]:
    """The server and credentials of a kubeconfig's current context (file paths, not inline data)."""
    config = yaml.safe_load(path.read_text())
    context_name = config["current-context"]
    context = next(c["context"] for c in config["contexts"] if c["name"] == context_name)
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    client_cert = None
    if "client-certificate" in user:
        client_cert = (Path(user["client-certificate"]), Path(user["client-key"]))
    return cluster["server"], Credentials(
        ca_file=Path(cluster["certificate-authority"]), client_cert=client_cert, token=user.get("token")
    )


class KubeClient:
    def __init__(self, server: str, *, timeout: float = 30.0, credentials: Credentials | None = None):
        self.server = server
        headers = {"User-Agent": "devstack"}
        verify: ssl.SSLContext | bool = True
        if credentials is not None:
            verify = credentials.ssl_context()
            if credentials.token:
                headers["Authorization"] = f"Bearer {credentials.token}"
        self._http = httpx.Client(base_url=server, timeout=timeout, headers=headers, verify=verify)

    @classmethod
    def from_kubeconfig(cls, path: Path, *, timeout: float = 30.0) -> KubeClient:
        server, credentials = kubeconfig_credentials(path)
        return cls(server, timeout=timeout, credentials=credentials)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                body = response.json()
                reason, message = str(body.get("reason", "")), str(body.get("message", response.text))
            except ValueError:
                reason, message = "", response.text
            raise KubeError(response.status_code, reason, message)
        result: dict[str, Any] = response.json()
        return result

    def served_type(self, api_version: str, kind: str) -> ResourceType:
        """Where objects of this apiVersion and kind live: the known table, else discovery."""
        known = RESOURCE_TYPES.get(kind)
        if known is not None and (not api_version or known.prefix == api_prefix(api_version)):
            return known
        prefix = api_prefix(api_version)
        try:
            resources = self._request("GET", f"/{prefix}").get("resources") or []
        except KubeError as err:
            if err.status == 404:
                raise UnservedKind(f"the API server does not serve {api_version} (kind {kind})") from None
            raise
        for resource in resources:
            if resource.get("kind") == kind and "/" not in str(resource.get("name")):
                return ResourceType(prefix, str(resource["name"]), bool(resource.get("namespaced")))
        raise UnservedKind(f"the API server serves no kind {kind} in {api_version}")

    def create(
        self, obj: dict[str, Any], *, namespace: str | None = None, as_user: str | None = None
    ) -> dict[str, Any]:
        """POST `obj`; `as_user`: impersonating that user (the admin may: `Impersonate-User`), as the
        component that creates such objects would (the Job controller, for a Job's pods)."""
        rtype = self.served_type(str(obj.get("apiVersion") or ""), obj["kind"])
        ns = obj.get("metadata", {}).get("namespace") or namespace
        if rtype.namespaced and not ns:
            ns = "default"
        headers = {"Impersonate-User": as_user} if as_user else None
        return self._request("POST", collection_path(obj["kind"], ns, rtype), json=obj, headers=headers)

    def create_or_replace(self, obj: dict[str, Any], *, namespace: str | None = None) -> dict[str, Any]:
        """Create, or on 409 AlreadyExists replace the existing object (cluster-scoped configs)."""
        try:
            return self.create(obj, namespace=namespace)
        except KubeError as err:
            if err.status != 409:
                raise
        name = obj["metadata"]["name"]
        ns = obj.get("metadata", {}).get("namespace") or namespace
        current = self.get(obj["kind"], name, namespace=ns)
        replacement = {
            **obj,
            "metadata": {**obj["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]},
        }
        return self._request("PUT", f"{collection_path(obj['kind'], ns)}/{name}", json=replacement)

    def get(self, kind: str, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        return self._request("GET", f"{collection_path(kind, namespace)}/{name}")

    def list(
        self, kind: str, *, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        params = {"labelSelector": label_selector} if label_selector else {}
        items: list[dict[str, Any]] = self._request("GET", collection_path(kind, namespace), params=params)[
            "items"
        ]
        return items

    def delete(self, kind: str, name: str, *, namespace: str | None = None) -> None:
        try:
            self._request(
                "DELETE",
                f"{collection_path(kind, namespace)}/{name}",
                json={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
            )
        except KubeError as err:
            if err.status != 404:
                raise

    def patch(
        self,
        kind: str,
        name: str,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str = "",
        patch_type: str = "application/merge-patch+json",
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """`dry_run`: admitted (webhooks, policies) and validated, never stored."""
        path = f"{collection_path(kind, namespace)}/{name}" + (f"/{subresource}" if subresource else "")
        params = {"dryRun": "All"} if dry_run else {}
        return self._request("PATCH", path, json=body, headers={"Content-Type": patch_type}, params=params)

    def list_with_version(self, kind: str, *, namespace: str | None = None) -> tuple[Items, str]:
        """The items and the list's resourceVersion, to watch from."""
        listed = self._request("GET", collection_path(kind, namespace))
        return listed["items"], str(listed["metadata"]["resourceVersion"])

    def watch(
        self, kind: str, *, namespace: str | None = None, resource_version: str, timeout_seconds: int = 600
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(type, object) of every event from `resource_version` on, until the server ends the watch or
        the caller stops iterating."""
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
        }
        with self._http.stream(
            "GET", collection_path(kind, namespace), params=params, timeout=httpx.Timeout(10.0, read=None)
        ) as response:
            if response.status_code >= 400:
                raise KubeError(response.status_code, "", response.read().decode(errors="replace")[:500])
            for line in response.iter_lines():
                if line.strip():
                    event = json.loads(line)
                    yield event["type"], event["object"]

    def request_token(self, namespace: str, service_account: str, *, seconds: int) -> str:
        """A token of `service_account` (TokenRequest), as a Pod's projected token would be."""
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token"
        return str(self._request("POST", path, json=body)["status"]["token"])

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
        response = self._http.get(path)
        if response.status_code >= 400:
            raise KubeError(response.status_code, "", response.text[:500])
        return response.text
