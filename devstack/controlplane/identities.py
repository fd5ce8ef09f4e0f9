"""Who each process is on the real cluster: a ServiceAccount, its RBAC, a token, a kubeconfig.

The webhook and the resizer run as the chart's ServiceAccounts under the chart's RBAC exactly as rendered,
so the API server's authorizer checks that the chart grants each process what it calls; JobSet's controller
runs as its own ServiceAccount under the ClusterRole of its module. Tokens come from the TokenRequest API,
as a Pod's projected token would; each kubeconfig names the cluster's CA and the token, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubekit.client import KubeError
from kubekit.generic import GenericClient

Obj = dict[str, Any]

RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
TOKEN_SECONDS = 7 * 24 * 3600
"""A week: longer than any devstack session; a Pod's projected token is refreshed, these are not."""
COMPONENT_LABEL = "app.kubernetes.io/component"


@dataclass(frozen=True)
class Identity:
    namespace: str
    service_account: str

    @property
    def username(self) -> str:
        """The user the API server (and its audit log) knows the token by."""
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"

    def service_account_object(self) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": self.service_account, "namespace": self.namespace},
        }

    def subject(self) -> Obj:
        return {"kind": "ServiceAccount", "name": self.service_account, "namespace": self.namespace}

    def binding(self, role: Obj) -> Obj:
        """The binding of `role` (a ClusterRole, or a Role with its namespace) to this ServiceAccount,
        named as the role."""
        kind = str(role["kind"])
        metadata = {key: role["metadata"][key] for key in ("name", "namespace") if key in role["metadata"]}
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": f"{kind}Binding",
            "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": metadata["name"]},
            "subjects": [self.subject()],
        }


def rbac_objects(objects: list[Obj]) -> list[Obj]:
    """The ServiceAccounts and RBAC of a rendered chart, ServiceAccounts and roles before their bindings."""
    order = {kind: index for index, kind in enumerate(RBAC_KINDS)}
    selected = [obj for obj in objects if obj.get("kind") in order]
    return sorted(selected, key=lambda obj: order[obj["kind"]])


def chart_identities(objects: list[Obj]) -> dict[str, Identity]:
    """component (`webhook`, `resizer`) -> the ServiceAccount the chart runs it as."""
    identities: dict[str, Identity] = {}
    for obj in objects:
        if obj.get("kind") != "ServiceAccount":
            continue
        metadata = obj["metadata"]
        component = metadata.get("labels", {}).get(COMPONENT_LABEL)
        if component:
            identities[component] = Identity(metadata["namespace"], metadata["name"])
    return identities


def apply_objects(client: GenericClient, objects: list[Obj]) -> None:
    """Create each object, or replace it when it exists (a restarted stack against the same cluster)."""
    for obj in objects:
        client.create_or_replace(obj, namespace=obj["metadata"].get("namespace"))


def ensure_namespace(client: GenericClient, name: str) -> None:
    try:
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    except KubeError as err:
        if not err.conflict:
            raise


def token_kubeconfig(server: str, ca_file: Path, token: str, user: str) -> str:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "devstack", "cluster": {"server": server, "certificate-authority": str(ca_file)}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": "devstack", "user": user}}],
        "current-context": user,
    }
    return yaml.safe_dump(config, sort_keys=False)


def write_kubeconfig(
    client: GenericClient, identity: Identity, ca_file: Path, path: Path, *, server: str | None = None
) -> Path:
    """A kubeconfig that authenticates as `identity` with a fresh token (file mode 0600), for `server`
    (default: the one `client` talks to; the fault proxy's listener for this project's processes)."""
    token = client.request_token(identity.namespace, identity.service_account, seconds=TOKEN_SECONDS)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(token_kubeconfig(server or client.server, ca_file, token, identity.service_account))
    return path
