"""The resource types kubesim serves: REST names, kinds, scope and the verbs discovery advertises."""

from __future__ import annotations

from dataclasses import dataclass

from kubesim.errors import ApiError
from placement.constants import JOBSET_GROUP, JOBSET_VERSION

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    plural: str
    kind: str
    group: str
    version: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    singular: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()


RBAC = "rbac.authorization.k8s.io"
INERT_TYPES: tuple[ResourceType, ...] = (
    ResourceType("configmaps", "ConfigMap", "", "v1", True, ("cm",)),
    ResourceType("secrets", "Secret", "", "v1", True),
    ResourceType("services", "Service", "", "v1", True, ("svc",), ("status",)),
    ResourceType("serviceaccounts", "ServiceAccount", "", "v1", True, ("sa",)),
    ResourceType("deployments", "Deployment", "apps", "v1", True, ("deploy",), ("status",)),
    ResourceType("cronjobs", "CronJob", "batch", "v1", True, ("cj",), ("status",)),
    ResourceType("priorityclasses", "PriorityClass", "scheduling.k8s.io", "v1", False, ("pc",)),
    ResourceType("poddisruptionbudgets", "PodDisruptionBudget", "policy", "v1", True, ("pdb",), ("status",)),
    ResourceType("roles", "Role", RBAC, "v1", True),
    ResourceType("rolebindings", "RoleBinding", RBAC, "v1", True),
    ResourceType("clusterroles", "ClusterRole", RBAC, "v1", False),
    ResourceType("clusterrolebindings", "ClusterRoleBinding", RBAC, "v1", False),
)

RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType("namespaces", "Namespace", "", "v1", False, ("ns",), ("status",)),
    ResourceType("nodes", "Node", "", "v1", False, ("no",), ("status",)),
    ResourceType("pods", "Pod", "", "v1", True, ("po",), ("status", "binding")),
    ResourceType("events", "Event", "", "v1", True, ("ev",)),
    ResourceType("jobs", "Job", "batch", "v1", True, (), ("status",)),
    ResourceType("leases", "Lease", "coordination.k8s.io", "v1", True),
    ResourceType(
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        "admissionregistration.k8s.io",
        "v1",
        False,
    ),
    ResourceType(
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        "admissionregistration.k8s.io",
        "v1",
        False,
    ),
    ResourceType("jobsets", "JobSet", JOBSET_GROUP, JOBSET_VERSION, True, (), ("status",)),
    # Stored but inert (no controller acts on them): lets Helm install the project's chart unchanged.
    *INERT_TYPES,
)

EVENTS_V1 = ResourceType("events", "Event", "events.k8s.io", "v1", True, ("ev",))
"""Events in their second version: stored as core/v1 Events, converted (`kubesim.apiserver.conversion`)."""
SERVED_TYPES: tuple[ResourceType, ...] = (*RESOURCE_TYPES, EVENTS_V1)
"""What discovery lists and the REST layer serves: the stored types and the converted ones."""

BY_PLURAL: dict[str, ResourceType] = {rt.plural: rt for rt in RESOURCE_TYPES}
BY_GROUP_VERSION: dict[str, list[ResourceType]] = {}
for _rt in SERVED_TYPES:
    BY_GROUP_VERSION.setdefault(_rt.group_version, []).append(_rt)
BY_GROUP_VERSION_PLURAL: dict[tuple[str, str, str], ResourceType] = {
    (rt.group, rt.version, rt.plural): rt for rt in SERVED_TYPES
}


def resource_type(plural: str) -> ResourceType:
    """The stored resource of that plural."""
    try:
        return BY_PLURAL[plural]
    except KeyError:
        raise ApiError(
            404, "NotFound", f'the server could not find the requested resource ("{plural}")'
        ) from None


def lookup(group: str, version: str, plural: str) -> ResourceType:
    """The resource served at /api(s)/<group>/<version>/<plural>, or a 404 like the real API server."""
    rt = BY_GROUP_VERSION_PLURAL.get((group, version, plural))
    if rt is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    return rt
