"""Where the objects of a kind live on the API server: the built-in kinds by name, and the paths of their
collections.

Only Kubernetes' own kinds are named here: a caller that addresses a custom resource by kind declares it
(`GenericClient(kinds=...)`), as it declares a `kubekit.client.CustomResource`; any other kind is found in
discovery from its apiVersion (`GenericClient.served_type`), as kubectl does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

CORE = "api/v1"
BATCH = "apis/batch/v1"
COORDINATION = "apis/coordination.k8s.io/v1"
FLOW_CONTROL = "apis/flowcontrol.apiserver.k8s.io/v1"
RBAC = "apis/rbac.authorization.k8s.io/v1"
ADMISSION = "apis/admissionregistration.k8s.io/v1"


@dataclass(frozen=True)
class ResourceType:
    """A kind's collection: its API prefix (`api/v1`, `apis/batch/v1`), plural and scope."""

    prefix: str
    plural: str
    namespaced: bool


BUILTIN_KINDS: Mapping[str, ResourceType] = {
    "Namespace": ResourceType(CORE, "namespaces", False),
    "Node": ResourceType(CORE, "nodes", False),
    "Pod": ResourceType(CORE, "pods", True),
    "Event": ResourceType(CORE, "events", True),
    "ConfigMap": ResourceType(CORE, "configmaps", True),
    "ServiceAccount": ResourceType(CORE, "serviceaccounts", True),
    "Job": ResourceType(BATCH, "jobs", True),
    "Lease": ResourceType(COORDINATION, "leases", True),
    "FlowSchema": ResourceType(FLOW_CONTROL, "flowschemas", False),
    "PriorityLevelConfiguration": ResourceType(FLOW_CONTROL, "prioritylevelconfigurations", False),
    "CustomResourceDefinition": ResourceType(
        "apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False
    ),
    "PriorityClass": ResourceType("apis/scheduling.k8s.io/v1", "priorityclasses", False),
    "SubjectAccessReview": ResourceType("apis/authorization.k8s.io/v1", "subjectaccessreviews", False),
    "ClusterRole": ResourceType(RBAC, "clusterroles", False),
    "ClusterRoleBinding": ResourceType(RBAC, "clusterrolebindings", False),
    "Role": ResourceType(RBAC, "roles", True),
    "RoleBinding": ResourceType(RBAC, "rolebindings", True),
    "MutatingWebhookConfiguration": ResourceType(ADMISSION, "mutatingwebhookconfigurations", False),
    "ValidatingWebhookConfiguration": ResourceType(ADMISSION, "validatingwebhookconfigurations", False),
    "ValidatingAdmissionPolicy": ResourceType(ADMISSION, "validatingadmissionpolicies", False),
    "ValidatingAdmissionPolicyBinding": ResourceType(ADMISSION, "validatingadmissionpolicybindings", False),
    "MutatingAdmissionPolicy": ResourceType(ADMISSION, "mutatingadmissionpolicies", False),
    "MutatingAdmissionPolicyBinding": ResourceType(ADMISSION, "mutatingadmissionpolicybindings", False),
}


class UnservedKind(ValueError):
    """The API server serves no such kind: the message says which apiVersion and kind."""


def api_prefix(api_version: str) -> str:
    """`v1` → `api/v1`, `group/version` → `apis/group/version`."""
    return f"apis/{api_version}" if "/" in api_version else f"api/{api_version}"


def collection_path(rtype: ResourceType, namespace: str | None = None) -> str:
    """The collection of `rtype` in `namespace`, or across namespaces (and for a cluster-scoped kind)."""
    if rtype.namespaced and namespace:
        return f"/{rtype.prefix}/namespaces/{namespace}/{rtype.plural}"
    return f"/{rtype.prefix}/{rtype.plural}"


def object_path(rtype: ResourceType, name: str, namespace: str | None = None, subresource: str = "") -> str:
    path = f"{collection_path(rtype, namespace)}/{name}"
    return f"{path}/{subresource}" if subresource else path
