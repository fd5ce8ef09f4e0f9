"""Webhook matchConditions: kubesim evaluates their CEL like kube-apiserver before calling a webhook."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from devstack.webhooks import local_webhook_configurations
from kubesim.apiserver.cel import compile_conditions, evaluate
from kubesim.testing import KubesimServer
from placement.constants import (
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    ZONE_LABEL,
    Strategy,
)
from tests.kubesim.kubesim_webhook_fixture import FakeWebhook
from tests.support.builders import make_job, make_pod
from tests.support.kube import as_body, error_status, kube_client, labels_of, name_of

MISSING_KEY = "object.metadata.annotations['team'] == 'ml'"  # errors when the pod has no annotations


@pytest.fixture
def sim() -> Iterator[KubesimServer]:
    with KubesimServer(nodes=2, pools=1, controllers=False) as server:
        yield server


@pytest.fixture
def kube(sim: KubesimServer) -> Iterator[client.ApiClient]:
    with kube_client(sim.kubeconfig_path) as api_client:
        yield api_client


def conditions(*expressions: str) -> list[dict[str, str]]:
    return [{"name": f"condition-{i}", "expression": e} for i, e in enumerate(expressions)]


def mutating_entry(webhook: FakeWebhook, name: str, *expressions: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"url": f"{webhook.url}/mutate", "caBundle": webhook.ca_bundle},
        "rules": [
            {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
        ],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
        "matchConditions": conditions(*expressions),
        **extra,
    }


def register_mutating(kube: client.ApiClient, name: str, *webhooks: dict[str, Any]) -> None:
    client.AdmissionregistrationV1Api(kube).create_mutating_webhook_configuration(
        as_body({"metadata": {"name": name}, "webhooks": list(webhooks)})
    )


def pod(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    built = make_pod(name, None)
    return (built.annotations(annotations) if annotations is not None else built).obj()


def api_error(info: pytest.ExceptionInfo[client.ApiException]) -> tuple[int, dict[str, Any]]:
    return int(info.value.status), error_status(info.value)


MATCH_CASES = [
    # (case, expressions, pod annotations, webhook called)
    ("all true", ("object.metadata.name.startsWith('t-')", "oldObject == null"), {"a": "b"}, True),
    ("request variable", ("request.operation == 'CREATE' && request.namespace == 'default'",), None, True),
    ("one false", ("true", "has(object.metadata.annotations)"), None, False),
    ("false beats an error", (MISSING_KEY, "false"), None, False),
]


@pytest.mark.parametrize(
    ("case", "expressions", "annotations", "called"), MATCH_CASES, ids=[c[0] for c in MATCH_CASES]
)
def test_webhook_is_called_only_when_every_condition_is_true(
    kube: client.ApiClient,
    webhook: FakeWebhook,
    case: str,
    expressions: tuple[str, ...],
    annotations: dict[str, str] | None,
    called: bool,
) -> None:
    register_mutating(kube, "conditional", mutating_entry(webhook, "conditional.kubesim.test", *expressions))
    name = f"t-{case.replace(' ', '-')}"
    created = client.CoreV1Api(kube).create_namespaced_pod("default", as_body(pod(name, annotations)))
    assert webhook.calls[f"mutate:{name}"] == (1 if called else 0), case
    assert ("mutated" in (labels_of(created))) is called, case


def test_evaluation_error_under_fail_rejects_without_calling_the_webhook(
    sim: KubesimServer, kube: client.ApiClient, webhook: FakeWebhook
) -> None:
    register_mutating(
        kube, "erring", mutating_entry(webhook, "erring.kubesim.test", MISSING_KEY, failurePolicy="Fail")
    )
    core = client.CoreV1Api(kube)
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_pod("default", as_body(pod("fail-closed")))
    status, body = api_error(info)
    assert status == 403
    assert body["reason"] == "Forbidden"
    assert body["message"].startswith(f"pods \"fail-closed\" is forbidden: expression '{MISSING_KEY}'")
    assert webhook.calls["mutate:fail-closed"] == 0
    assert sim.stats()["admission"]["calls"] == 0
    # The same webhook is called once the expression can be evaluated.
    core.create_namespaced_pod("default", as_body(pod("fail-evaluable", {"team": "ml"})))
    assert webhook.calls["mutate:fail-evaluable"] == 1


def test_evaluation_error_under_ignore_admits_without_calling_the_webhook(
    sim: KubesimServer, kube: client.ApiClient, webhook: FakeWebhook
) -> None:
    register_mutating(
        kube, "erring", mutating_entry(webhook, "erring.kubesim.test", MISSING_KEY, failurePolicy="Ignore")
    )
    created = client.CoreV1Api(kube).create_namespaced_pod("default", as_body(pod("fail-open")))
    assert name_of(created) == "fail-open"
    assert "mutated" not in (labels_of(created))
    assert webhook.calls["mutate:fail-open"] == 0
    assert sim.stats()["admission"]["calls"] == 0


@pytest.mark.parametrize(
    ("kind", "expressions", "field", "message"),
    [
        (
            "mutating",
            ("object.metadata.name ==",),
            "webhooks[0].matchConditions[0].expression",
            "compilation failed: ERROR: <input>:1:",
        ),
        (
            "validating",
            ("true", "unknownVariable == 1"),
            "webhooks[0].matchConditions[1].expression",
            "compilation failed: undeclared reference to 'unknownVariable'",
        ),
        (
            "validating",
            ("true",) * 65,
            "webhooks[0].matchConditions",
            "Too many: 65: must have at most 64 items",
        ),
    ],
    ids=["syntax error", "undeclared variable", "65 conditions"],
)
def test_invalid_match_conditions_are_refused_when_the_configuration_is_created(
    kube: client.ApiClient,
    webhook: FakeWebhook,
    kind: str,
    expressions: tuple[str, ...],
    field: str,
    message: str,
) -> None:
    admission = client.AdmissionregistrationV1Api(kube)
    body = {
        "metadata": {"name": "bad"},
        "webhooks": [mutating_entry(webhook, "bad.kubesim.test", *expressions)],
    }
    create = (
        admission.create_mutating_webhook_configuration
        if kind == "mutating"
        else admission.create_validating_webhook_configuration
    )
    with pytest.raises(client.ApiException) as info:
        create(as_body(body))
    status, status_body = api_error(info)
    assert status == 422
    assert status_body["reason"] == "Invalid"
    causes = {c["field"]: c["message"] for c in status_body["details"]["causes"]}
    assert message in causes[field]
    listed = (
        admission.list_mutating_webhook_configuration()
        if kind == "mutating"
        else admission.list_validating_webhook_configuration()
    )
    assert listed.items == []


def test_a_configuration_update_recompiles_its_conditions(
    kube: client.ApiClient, webhook: FakeWebhook
) -> None:
    register_mutating(kube, "updated", mutating_entry(webhook, "updated.kubesim.test", "false"))
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod("default", as_body(pod("before-update")))
    admission = client.AdmissionregistrationV1Api(kube)
    admission.patch_mutating_webhook_configuration(
        "updated", [{"op": "replace", "path": "/webhooks/0/matchConditions/0/expression", "value": "true"}]
    )
    core.create_namespaced_pod("default", as_body(pod("after-update")))
    assert (webhook.calls["mutate:before-update"], webhook.calls["mutate:after-update"]) == (0, 1)


def test_unsupported_authorizer_is_an_evaluation_error() -> None:
    compiled = compile_conditions(conditions("authorizer.requestResource.check('get').allowed()"))
    result = evaluate(compiled, {"object": {}, "oldObject": None, "request": {}})
    assert not result.matches
    assert result.skipped_by is None
    assert "authorizer is not supported by kubesim" in result.errors[0]


def chart_configurations(webhook: FakeWebhook) -> list[dict[str, Any]]:
    """The chart's own configurations, each webhook pointed at the fake's matching route."""
    configurations = local_webhook_configurations(webhook.url, webhook.ca_bundle, Strategy.ELASTIC)
    for configuration in configurations:
        route = "/mutate" if configuration["kind"] == "MutatingWebhookConfiguration" else "/deny"
        for entry in configuration["webhooks"]:
            entry["clientConfig"]["url"] = webhook.url + route
    return configurations


def test_chart_webhooks_see_only_annotated_pods_and_jobs(
    kube: client.ApiClient, webhook: FakeWebhook
) -> None:
    admission = client.AdmissionregistrationV1Api(kube)
    for configuration in chart_configurations(webhook):
        if configuration["kind"] == "MutatingWebhookConfiguration":
            admission.create_mutating_webhook_configuration(as_body(configuration))
        else:
            admission.create_validating_webhook_configuration(as_body(configuration))
    core, batch = client.CoreV1Api(kube), client.BatchV1Api(kube)
    validations_before = webhook.calls["deny"]

    core.create_namespaced_pod("default", as_body(pod("chart-plain", {"team": "ml"})))
    assert webhook.calls["mutate:chart-plain"] == 0
    assert webhook.calls["deny"] == validations_before

    core.create_namespaced_pod("default", as_body(pod("chart-ours", {TOPOLOGY_ANNOTATION: ZONE_LABEL})))
    core.create_namespaced_pod(
        "default", as_body(pod("chart-jobset", {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: ZONE_LABEL}))
    )
    assert webhook.calls["mutate:chart-ours"] >= 1
    assert webhook.calls["mutate:chart-jobset"] >= 1
    assert webhook.calls["deny"] == validations_before + 2

    def job(name: str, template_annotations: dict[str, str] | None) -> dict[str, Any]:
        built = make_job(name, None)
        if template_annotations is not None:
            built.template_annotations(template_annotations)
        return built.obj()

    batch.create_namespaced_job("default", as_body(job("chart-job-plain", None)))
    batch.create_namespaced_job(
        "default", as_body(job("chart-job-annotated", {TOPOLOGY_ANNOTATION: ZONE_LABEL}))
    )
    assert webhook.calls["mutate:chart-job-plain"] == 0
    assert webhook.calls["mutate:chart-job-annotated"] == 1
