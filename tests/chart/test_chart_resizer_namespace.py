"""`resizer.namespace`: the resizer's write rights bound in the one namespace it serves, its reads of pods
and Nodes still cluster-wide (why: `tests/resizer/test_resizer_informers.py`; that every call is granted
where the code makes it: `test_chart_rbac_coverage.py`)."""

from __future__ import annotations

import helm_python
import pytest

from tests.chart.chart_rendering import (
    NAMESPACE,
    RELEASE,
    Obj,
    grants_of,
    merged,
    of_component,
    of_kind,
    render,
)

SERVED = "team-a"
READS = f"{RELEASE}-resizer-reads"
WRITES = f"{RELEASE}-resizer-writes"
CLUSTER_READS = {("", "pods"): {"list", "watch"}, ("", "nodes"): {"get", "list", "watch"}}
SERVED_WRITES = {
    ("", "pods"): {"get", "patch", "delete"},
    ("", "pods/status"): {"patch"},
    ("batch", "jobs"): {"get", "list", "watch", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
}
WEBHOOKS_AND_BINDINGS = (
    ("MutatingWebhookConfiguration", "webhooks"),
    ("ValidatingWebhookConfiguration", "webhooks"),
    ("MutatingAdmissionPolicyBinding", ""),
    ("ValidatingAdmissionPolicyBinding", ""),
)
"""Where the chart's shared namespaceSelector goes: each webhook of a configuration, each binding's
matchResources."""
LEASE = {NAMESPACE: {("coordination.k8s.io", "leases"): {"get", "create", "update"}}}


def resizer_account(objects: list[Obj]) -> str:
    account: str = of_component(objects, "Deployment", "resizer")["spec"]["template"]["spec"][
        "serviceAccountName"
    ]
    return account


def resizer_args(objects: list[Obj]) -> list[str]:
    args: list[str] = of_component(objects, "Deployment", "resizer")["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    return args


def bindings_of(objects: list[Obj], role: str) -> list[tuple[str, str | None]]:
    """(kind, namespace) of every binding of ClusterRole `role`."""
    return sorted(
        (binding["kind"], binding["metadata"].get("namespace"))
        for binding in of_kind(objects, "ClusterRoleBinding") + of_kind(objects, "RoleBinding")
        if binding["roleRef"]
        == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
    )


@pytest.fixture(scope="module")
def default(mode_values: dict[str, Obj]) -> list[Obj]:
    return render(mode_values["generate"])


@pytest.fixture(scope="module")
def serving_one(mode_values: dict[str, Obj]) -> list[Obj]:
    return render(merged(mode_values["generate"], {"resizer": {"namespace": SERVED}}))


def test_by_default_both_roles_are_bound_cluster_wide_with_todays_rights(default: list[Obj]) -> None:
    assert bindings_of(default, READS) == [("ClusterRoleBinding", None)]
    assert bindings_of(default, WRITES) == [("ClusterRoleBinding", None)]
    cluster = {key: set(verbs) for key, verbs in SERVED_WRITES.items()}
    for key, verbs in CLUSTER_READS.items():
        cluster.setdefault(key, set()).update(verbs)
    assert grants_of(default, resizer_account(default)) == {"cluster": cluster, **LEASE}
    assert not [arg for arg in resizer_args(default) if arg.startswith("--namespace")]


def test_serving_one_namespace_its_writes_are_bound_there_alone(serving_one: list[Obj]) -> None:
    assert bindings_of(serving_one, READS) == [("ClusterRoleBinding", None)]
    assert bindings_of(serving_one, WRITES) == [("RoleBinding", SERVED)]
    assert grants_of(serving_one, resizer_account(serving_one)) == {
        "cluster": CLUSTER_READS,
        SERVED: SERVED_WRITES,
        **LEASE,
    }


def test_serving_one_namespace_the_resizer_is_told_which(serving_one: list[Obj]) -> None:
    assert f"--namespace={SERVED}" in resizer_args(serving_one)


def test_serving_one_namespace_the_webhooks_and_policies_act_there_alone(
    default: list[Obj], serving_one: list[Obj]
) -> None:
    """Else a Job shrunk in another namespace would never be resized back: no resizer serves it."""
    served = {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [SERVED]}
    configurations = [
        (kind, entry)
        for kind, list_key in WEBHOOKS_AND_BINDINGS
        for configuration in of_kind(serving_one, kind)
        for entry in (configuration.get(list_key) or [configuration.get("spec", {}).get("matchResources")])
        if entry is not None
    ]
    # (MutatingAdmissionPolicyBindings only where the pod path is `policy`)
    assert {kind for kind, _ in configurations} >= {
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicyBinding",
    }
    for kind, entry in configurations:
        assert served in entry["namespaceSelector"]["matchExpressions"], kind
    for kind, list_key in WEBHOOKS_AND_BINDINGS:
        for configuration in of_kind(default, kind):
            for entry in configuration.get(list_key) or [configuration.get("spec", {}).get("matchResources")]:
                if entry is not None:
                    assert served not in entry["namespaceSelector"]["matchExpressions"], kind


def test_the_roles_are_the_same_either_way(default: list[Obj], serving_one: list[Obj]) -> None:
    """Only the binding of the writes changes: an upgrade that sets the value rebinds, and grants nothing."""

    def roles(objects: list[Obj]) -> list[Obj]:
        return [
            role for role in of_kind(objects, "ClusterRole") if role["metadata"]["name"] in {READS, WRITES}
        ]

    assert len(roles(default)) == 2
    assert roles(default) == roles(serving_one)


@pytest.mark.parametrize(
    ("namespace", "extra_exempt"),
    [("kube-system", []), (NAMESPACE, []), ("monitoring", ["monitoring"])],
)
def test_an_exempt_namespace_is_refused(
    namespace: str, extra_exempt: list[str], mode_values: dict[str, Obj]
) -> None:
    values = {
        "resizer": {"namespace": namespace},
        "webhook": {"admission": {"exemptNamespaces": extra_exempt}},
    }
    with pytest.raises(helm_python.HelmRenderError) as refused:
        render(merged(mode_values["generate"], values))
    assert f'resizer.namespace "{namespace}" is exempt from the webhooks' in str(refused.value)
