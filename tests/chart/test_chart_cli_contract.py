"""The chart's container arguments are accepted by the real webhook and resizer command lines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from resizer import settings as resizer_settings
from resizer.settings import load_settings as load_resizer_settings
from tests.chart.chart_rendering import NAMESPACE, Obj, merged, of_component, render
from webhook.settings import load_settings as load_webhook_settings


def args(objects: list[Obj], component: str) -> list[str]:
    deployment = of_component(objects, "Deployment", component)
    arguments: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return arguments


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Only the chart's flags and environment count: drop any EXCLUSIVE_PLACEMENT_* variable of the
    developer's shell, and whatever says which pod this test runs in."""
    for name in list(os.environ):
        if name.startswith("EXCLUSIVE_PLACEMENT_") or name in {"POD_NAME", "POD_NAMESPACE"}:
            monkeypatch.delenv(name)
    monkeypatch.setattr(resizer_settings, "SERVICE_ACCOUNT_NAMESPACE", tmp_path / "not-in-a-pod")


def in_the_pod(objects: list[Obj], component: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The container's environment as the kubelet gives it (downward API: the pod's name and namespace)."""
    deployment = of_component(objects, "Deployment", component)
    pod_fields = {
        "metadata.name": f"{component}-7d9f",
        "metadata.namespace": deployment["metadata"]["namespace"],
    }
    for variable in deployment["spec"]["template"]["spec"]["containers"][0].get("env") or []:
        if "value" in variable:
            monkeypatch.setenv(variable["name"], variable["value"])
        else:
            monkeypatch.setenv(variable["name"], pod_fields[variable["valueFrom"]["fieldRef"]["fieldPath"]])


@pytest.mark.parametrize("strategy", ["elastic", "scheduling-gate"])
def test_webhook_flags_parse_into_the_chart_settings(strategy: str, mode_values: dict[str, Obj]) -> None:
    objects = render(merged(mode_values["generate"], {"placement": {"defaultStrategy": strategy}}))
    settings = load_webhook_settings(args(objects, "webhook"))
    assert settings.port == 9443
    assert settings.cert_dir == Path("/etc/exclusive-placement/certs")
    assert settings.default_strategy == strategy
    assert settings.jobset_takeover is True
    assert settings.all_or_nothing is False
    assert settings.log_format == "json"
    assert settings.kubeconfig is None
    assert settings.server is None, "in a cluster the webhook uses its ServiceAccount"


def test_the_jobset_takeover_value_reaches_the_webhook(mode_values: dict[str, Obj]) -> None:
    objects = render(merged(mode_values["generate"], {"placement": {"jobsetTakeover": False}}))
    assert load_webhook_settings(args(objects, "webhook")).jobset_takeover is False


@pytest.mark.parametrize("value", [True, False])
def test_the_all_or_nothing_values_reach_the_webhook_and_the_resizer(
    value: bool, mode_values: dict[str, Obj], monkeypatch: pytest.MonkeyPatch
) -> None:
    overrides = {"placement": {"allOrNothing": value}, "resizer": {"allOrNothingTimeoutSeconds": 42.5}}
    objects = render(merged(mode_values["generate"], overrides))
    in_the_pod(objects, "resizer", monkeypatch)
    assert load_webhook_settings(args(objects, "webhook")).all_or_nothing is value
    assert load_resizer_settings(args(objects, "resizer")).all_or_nothing_timeout_seconds == 42.5


def test_resizer_flags_parse_into_the_chart_settings(
    mode_values: dict[str, Obj], monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = render(merged(mode_values["generate"], {"resizer": {"concurrency": 8}, "logFormat": "text"}))
    in_the_pod(objects, "resizer", monkeypatch)
    settings = load_resizer_settings(args(objects, "resizer"))
    assert settings.leader_elect is True
    assert settings.lease_name == "exclusive-placement-resizer"
    assert settings.lease_namespace == NAMESPACE
    assert settings.exempt_namespaces == (NAMESPACE, "kube-system")
    assert settings.metrics_port == 8080
    assert settings.concurrency == 8
    assert settings.log_format == "text"
    assert settings.all_or_nothing_timeout_seconds == 300
    assert settings.namespace is None  # every namespace


def test_the_resizer_namespace_value_reaches_the_resizer(
    mode_values: dict[str, Obj], monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = render(merged(mode_values["generate"], {"resizer": {"namespace": "team-a"}}))
    in_the_pod(objects, "resizer", monkeypatch)
    settings = load_resizer_settings(args(objects, "resizer"))
    assert settings.namespace == "team-a"
    assert settings.lease_namespace == NAMESPACE  # the Lease stays in the release namespace


def test_the_resizer_leaves_alone_the_namespaces_the_webhooks_are_exempt_from(
    mode_values: dict[str, Obj], monkeypatch: pytest.MonkeyPatch
) -> None:
    overrides = {"webhook": {"admission": {"exemptNamespaces": ["team-x", "kube-system"]}}}
    objects = render(merged(mode_values["generate"], overrides))
    in_the_pod(objects, "resizer", monkeypatch)
    exempt = load_resizer_settings(args(objects, "resizer")).exempt_namespaces
    webhook_selector = of_component(objects, "MutatingWebhookConfiguration", "webhook")["webhooks"][0]
    (expression,) = [
        e for e in webhook_selector["namespaceSelector"]["matchExpressions"] if e["operator"] == "NotIn"
    ]
    assert exempt == tuple(expression["values"]) == (NAMESPACE, "kube-system", "team-x")
