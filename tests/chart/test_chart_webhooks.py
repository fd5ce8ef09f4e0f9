"""Safety properties of the rendered webhook configurations (docs/deploy.md, "Which requests reach the
webhook"; docs/design.md, "Failing safely").

Every check runs over `the_webhooks(objects)`, which first asserts that exactly the three expected webhooks
were rendered: a loop over an empty rendering cannot pass. Pod validation is part of the pod mutation's call
(docs/webhook.md, "One call per pod"): no pod webhook is validating."""

from __future__ import annotations

import pytest

from placement.constants import METADATA_NAME_LABEL
from tests.chart.chart_rendering import NAMESPACE, Obj, merged, of_component, of_kind, render, webhooks

EXPECTED_WEBHOOKS = {
    # name: (configuration kind, path, API group, resource, values key, version, operations)
    "pods.mutate.exclusive-placement.io": (
        "MutatingWebhookConfiguration",
        "/mutate-pods",
        "",
        "pods",
        "mutatePods",
        "v1",
        ["CREATE"],
    ),
    "jobs.mutate.exclusive-placement.io": (
        "MutatingWebhookConfiguration",
        "/mutate-jobs",
        "batch",
        "jobs",
        "mutateJobs",
        "v1",
        ["CREATE"],
    ),
    "jobsets.validate.exclusive-placement.io": (
        "ValidatingWebhookConfiguration",
        "/validate-jobsets",
        "jobset.x-k8s.io",
        "jobsets",
        "validateJobSets",
        "v1alpha2",
        ["CREATE", "UPDATE"],
    ),
}


def the_webhooks(objects: list[Obj]) -> list[tuple[str, Obj]]:
    """(configuration kind, webhook) of every rendered webhook, once it is checked they are the three."""
    found = list(webhooks(objects))
    assert sorted(webhook["name"] for _, webhook in found) == sorted(EXPECTED_WEBHOOKS)
    return found


def exempt_namespaces(webhook: Obj) -> list[str]:
    expressions = webhook["namespaceSelector"]["matchExpressions"]
    exemptions = [e for e in expressions if e["key"] == METADATA_NAME_LABEL and e["operator"] == "NotIn"]
    assert len(exemptions) == 1, expressions
    values: list[str] = exemptions[0]["values"]
    return values


@pytest.fixture(scope="module")
def provided(mode_values: dict[str, Obj]) -> list[Obj]:
    return render(mode_values["provided"])


def test_exactly_the_three_webhooks_route_to_their_paths(provided: list[Obj]) -> None:
    service = of_component(provided, "Service", "webhook")
    found = {}
    for kind, webhook in the_webhooks(provided):
        rule = webhook["rules"]
        assert len(rule) == 1
        found[webhook["name"]] = (
            kind,
            webhook["clientConfig"]["service"]["path"],
            rule[0]["apiGroups"][0],
            rule[0]["resources"][0],
            rule[0]["apiVersions"],
            rule[0]["operations"],
        )
        assert webhook["clientConfig"]["service"]["name"] == service["metadata"]["name"]
        assert webhook["clientConfig"]["service"]["namespace"] == NAMESPACE
        assert webhook["clientConfig"]["service"]["port"] in [p["port"] for p in service["spec"]["ports"]]
    assert found == {name: (*spec[:4], [spec[5]], spec[6]) for name, spec in EXPECTED_WEBHOOKS.items()}


def test_every_webhook_is_side_effect_free_and_speaks_v1(provided: list[Obj]) -> None:
    for _, webhook in the_webhooks(provided):
        assert webhook["sideEffects"] == "None"
        assert webhook["admissionReviewVersions"] == ["v1"]
        assert webhook["matchConditions"], webhook["name"]


def test_no_mutation_is_reinvoked(provided: list[Obj]) -> None:
    """One call per object: JobSet's pod webhook, after ours, changes nothing the pod mutation wrote."""
    policies = {
        w["name"]: w.get("reinvocationPolicy")
        for kind, w in the_webhooks(provided)
        if kind.startswith("Mutating")
    }
    assert policies == {
        "pods.mutate.exclusive-placement.io": "Never",
        "jobs.mutate.exclusive-placement.io": "Never",
    }


def test_defaults_fail_closed_with_a_ten_second_timeout(provided: list[Obj]) -> None:
    assert {(w["failurePolicy"], w["timeoutSeconds"]) for _, w in the_webhooks(provided)} == {("Fail", 10)}


@pytest.mark.parametrize("changed", ["mutatePods", "mutateJobs", "validateJobSets"])
def test_failure_policy_and_timeout_come_from_each_webhooks_values(
    changed: str, mode_values: dict[str, Obj]
) -> None:
    values = merged(
        mode_values["provided"],
        {"webhook": {"admission": {changed: {"failurePolicy": "Ignore", "timeoutSeconds": 3}}}},
    )
    for _, webhook in the_webhooks(render(values)):
        expected = ("Ignore", 3) if EXPECTED_WEBHOOKS[webhook["name"]][4] == changed else ("Fail", 10)
        assert (webhook["failurePolicy"], webhook["timeoutSeconds"]) == expected, webhook["name"]


@pytest.mark.parametrize("namespace", ["exclusive-placement", "placement-system"])
def test_release_namespace_and_kube_system_are_always_exempt(
    namespace: str, mode_values: dict[str, Obj]
) -> None:
    for _, webhook in the_webhooks(render(mode_values["generate"], namespace=namespace)):
        assert exempt_namespaces(webhook) == [namespace, "kube-system"]


def test_user_exemptions_merge_with_the_mandatory_ones(mode_values: dict[str, Obj]) -> None:
    values = merged(
        mode_values["generate"],
        {
            "webhook": {
                "admission": {
                    "exemptNamespaces": ["monitoring", "kube-system", "cert-manager"],
                    "namespaceSelectorExpressions": [{"key": "team", "operator": "In", "values": ["ml"]}],
                }
            }
        },
    )
    for _, webhook in the_webhooks(render(values)):
        assert exempt_namespaces(webhook) == [NAMESPACE, "kube-system", "monitoring", "cert-manager"]
        assert {"key": "team", "operator": "In", "values": ["ml"]} in webhook["namespaceSelector"][
            "matchExpressions"
        ]


def test_object_selector_is_empty_by_default_and_configurable(
    provided: list[Obj], mode_values: dict[str, Obj]
) -> None:
    assert {str(w["objectSelector"]) for _, w in the_webhooks(provided)} == {"{}"}
    selector = {"matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}
    values = merged(mode_values["provided"], {"webhook": {"admission": {"objectSelector": selector}}})
    selectors = {w["name"]: w["objectSelector"] for _, w in the_webhooks(render(values))}
    # A JobSet does not carry the labels of its pods: the JobSet validation keeps an empty one.
    assert selectors == {name: {} if name.startswith("jobsets.") else selector for name in EXPECTED_WEBHOOKS}


def test_webhook_configurations_are_named_per_release(mode_values: dict[str, Obj]) -> None:
    first = render(mode_values["generate"], name="one")
    second = render(mode_values["generate"], name="two")
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        names = {o["metadata"]["name"] for o in of_kind(first, kind) + of_kind(second, kind)}
        assert len(names) == 2, names  # one per release: none missing, none shared
