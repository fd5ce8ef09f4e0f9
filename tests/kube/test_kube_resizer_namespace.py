"""`resizer.namespace` under kube-apiserver's real authorizer (Node,RBAC): the resizer's writes in the one
namespace it serves, nowhere else; its reads of pods still cluster-wide.

The chart is rendered with `resizer.namespace` set, as a second release (`scoped`) beside the stack's own,
and the resizer's ServiceAccount and RBAC of that rendering are applied as they are. The authorizer is asked
with SubjectAccessReviews, and the ServiceAccount's own token makes real requests: a patch of a pod in the
served namespace is authorized (404: there is no such pod), the same in another namespace is refused (403).
The stack's resizer, rendered with the default (every namespace), may make those writes there: the refusals
come from the value, not from a review that refuses everything.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from devstack.commands import RELEASE_NAMESPACE
from devstack.controlplane.identities import rbac_objects
from devstack.kinds import stack_client_at
from devstack.stack import Stack
from kubekit.client import KubeError
from kubekit.credentials import Credentials
from kubekit.generic import GenericClient
from tests.chart.chart_rendering import Obj, render
from tests.kube.kube_support import create_namespace, empty_namespace, kube_cluster
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-resizer-namespace")]

RELEASE = "scoped"
COMPONENT_LABEL = "app.kubernetes.io/component"
ABSENT_POD = "no-such-pod"
PATCH: Obj = {"metadata": {"labels": {"touched": "yes"}}}


@dataclass(frozen=True)
class Ask:
    verb: str
    resource: str
    group: str = ""
    subresource: str = ""

    def __str__(self) -> str:
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{self.verb} {self.group + '/' if self.group else ''}{resource}"


PATCH_PODS = Ask("patch", "pods")
DELETE_PODS = Ask("delete", "pods")
PATCH_POD_STATUS = Ask("patch", "pods", subresource="status")
PATCH_JOBS = Ask("patch", "jobs", "batch")
LIST_JOBS = Ask("list", "jobs", "batch")
CREATE_EVENTS = Ask("create", "events", "events.k8s.io")
LIST_PODS = Ask("list", "pods")
WATCH_PODS = Ask("watch", "pods")
LIST_NODES = Ask("list", "nodes")
WRITES = (PATCH_PODS, DELETE_PODS, PATCH_POD_STATUS, PATCH_JOBS, CREATE_EVENTS)


def may(stack: Stack, user: str, ask: Ask, namespace: str) -> bool:
    """kube-apiserver's authorizer's answer (a SubjectAccessReview) to `user`, a ServiceAccount of the
    release namespace, doing `ask` in `namespace` ("": in every namespace, or a cluster-scoped resource)."""
    review = stack.client.create(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{RELEASE_NAMESPACE}",
                    "system:authenticated",
                ],
                "resourceAttributes": {
                    "namespace": namespace,
                    "verb": ask.verb,
                    "group": ask.group,
                    "resource": ask.resource,
                    "subresource": ask.subresource,
                },
            },
        }
    )
    return bool(review.get("status", {}).get("allowed"))


def resizer_rbac(served: str) -> list[Obj]:
    """The resizer's ServiceAccount and RBAC of the chart rendered with `resizer.namespace: served`."""
    objects = render({"resizer": {"namespace": served}}, name=RELEASE, namespace=RELEASE_NAMESPACE)
    return [o for o in rbac_objects(objects) if o["metadata"]["labels"].get(COMPONENT_LABEL) == "resizer"]


@dataclass(frozen=True)
class Scoped:
    served: str
    other: str
    user: str
    """The scoped resizer's ServiceAccount, as the API server knows it."""
    client: GenericClient
    """As the scoped resizer's ServiceAccount (its own token)."""


@pytest.fixture
def scoped(kube_stack: Stack, namespace: str) -> Iterator[Scoped]:
    """The scoped release's resizer RBAC applied, serving `namespace`; `other` another tenant's namespace;
    once the authorizer has seen every binding."""
    other = f"{namespace[:50]}-other"
    create_namespace(kube_stack, other)
    applied = resizer_rbac(namespace)
    kinds = sorted({o["kind"] for o in applied})
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"], kinds
    (account,) = [o["metadata"]["name"] for o in applied if o["kind"] == "ServiceAccount"]
    user = f"system:serviceaccount:{RELEASE_NAMESPACE}:{account}"
    try:
        for obj in applied:
            kube_stack.client.create_or_replace(obj, namespace=obj["metadata"].get("namespace"))
        # RBAC reads bindings from an informer: wait until both the cluster-wide reads and the served
        # namespace's writes authorize, before asking what is refused
        eventually(
            lambda: may(kube_stack, user, LIST_PODS, "") and may(kube_stack, user, PATCH_PODS, namespace),
            f"{user} bound to its reads and its writes",
            30,
        )
        token = kube_stack.client.request_token(RELEASE_NAMESPACE, account, seconds=600)
        credentials = Credentials(ca_file=kube_cluster(kube_stack).control_plane.ca_file, token=token)
        with stack_client_at(kube_stack.client.server, credentials) as client:
            yield Scoped(namespace, other, user, client)
    finally:
        for obj in reversed(applied):
            kube_stack.client.delete(
                obj["kind"], obj["metadata"]["name"], namespace=obj["metadata"].get("namespace")
            )
        empty_namespace(kube_stack, other)


SELF_REVIEWS = {"authorization.k8s.io", "authentication.k8s.io"}
"""The self-review rules every user has (system:basic-user), left out as SECURITY.md's listings do."""


def can_i_list(client: GenericClient, namespace: str) -> dict[str, set[str]]:
    """What `kubectl auth can-i --list -n namespace` shows as the client's user (a SelfSubjectRulesReview):
    resource (`group/` prefixed) -> verbs."""
    review = client.create(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": namespace},
        }
    )
    rules: dict[str, set[str]] = {}
    for rule in review["status"]["resourceRules"]:
        for group in rule.get("apiGroups") or [""]:
            if group in SELF_REVIEWS:
                continue
            for resource in rule.get("resources") or []:
                rules.setdefault(f"{group}/{resource}" if group else resource, set()).update(rule["verbs"])
    return rules


def refused(client: GenericClient, namespace: str) -> int | None:
    """The status of the ServiceAccount's patch of a pod that does not exist in `namespace`: 404 if the
    authorizer let it through, 403 if not."""
    with pytest.raises(KubeError) as failed:
        client.patch("Pod", ABSENT_POD, PATCH, namespace=namespace)
    return failed.value.status


def test_a_resizer_serving_one_namespace_writes_there_only_and_reads_pods_everywhere(
    kube_stack: Stack, scoped: Scoped
) -> None:
    served, other, user = scoped.served, scoped.other, scoped.user
    allowed_in_served = {str(ask): may(kube_stack, user, ask, served) for ask in (*WRITES, LIST_JOBS)}
    assert allowed_in_served == {str(ask): True for ask in (*WRITES, LIST_JOBS)}
    allowed_elsewhere = {
        f"{ask} in {where or 'every namespace'}": may(kube_stack, user, ask, where)
        for ask in (*WRITES, LIST_JOBS)
        for where in (other, "")
    }
    assert allowed_elsewhere == dict.fromkeys(allowed_elsewhere, False)
    reads = {
        f"{ask} in {where or 'every namespace'}": may(kube_stack, user, ask, where)
        for ask in (LIST_PODS, WATCH_PODS)
        for where in (other, "")
    }
    assert reads == dict.fromkeys(reads, True)
    assert may(kube_stack, user, LIST_NODES, "")

    # the same through the ServiceAccount's own token
    assert refused(scoped.client, served) == 404
    assert refused(scoped.client, other) == 403
    assert isinstance(scoped.client.list("Pod"), list)  # every namespace: a 403 would raise
    assert can_i_list(scoped.client, other) == {"pods": {"list", "watch"}, "nodes": {"get", "list", "watch"}}
    assert can_i_list(scoped.client, served) == {
        "pods": {"get", "list", "watch", "patch", "delete"},
        "pods/status": {"patch"},
        "batch/jobs": {"get", "list", "watch", "patch"},
        "events.k8s.io/events": {"create", "patch"},
        "nodes": {"get", "list", "watch"},
    }

    # the stack's resizer, its writes bound cluster-wide (the default), may write there
    default_user = kube_cluster(kube_stack).identities["resizer"].username
    assert all(may(kube_stack, default_user, ask, other) for ask in WRITES)
