"""The webhook configurations devstack registers: the Helm chart's own, pointed at a local URL.

The chart renders `clientConfig.service` (a Service in the release namespace); the local webhook runs
outside the cluster, behind no Service, so each webhook's clientConfig becomes
`url: https://127.0.0.1:PORT/<path>` with the dev CA as caBundle. Everything else (rules, selectors,
exemptions, matchConditions, failure policies) is the chart's, so the local stack routes admissions exactly
as an installed release does.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from devstack.commands import RELEASE_NAMESPACE

CHART_PATH = Path(__file__).resolve().parent.parent / "charts" / "exclusive-placement"
RELEASE_NAME = "exclusive-placement"
WEBHOOK_CONFIGURATION_KINDS = frozenset({"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"})
ADMISSION_POLICY_KINDS = (
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
)
"""In the order they are created: a binding names its policy."""
POD_ADMISSION_PATHS = ("policy", "webhook")
"""The chart's `webhook.admission.pods.path` values devstack sets (it renders offline, where `auto` cannot
ask the API server what it serves)."""


class ChartError(RuntimeError):
    pass


def chart_values(
    ca_bundle_b64: str,
    default_strategy: str,
    exempt_namespaces: Sequence[str] = (),
    pod_admission: str = "webhook",
) -> dict[str, Any]:
    """Values for a local render: a provided certificate (ours), the stack's default strategy, the
    namespaces the webhooks must never see (`webhook.admission.exemptNamespaces`, as a user sets it), and
    how pods are admitted (`webhook.admission.pods.path`: `policy` or `webhook`)."""
    if pod_admission not in POD_ADMISSION_PATHS:
        raise ValueError(
            f"unknown pod admission path {pod_admission!r}; valid: {', '.join(POD_ADMISSION_PATHS)}"
        )
    admission: dict[str, Any] = {"pods": {"path": pod_admission}}
    if exempt_namespaces:
        admission["exemptNamespaces"] = list(exempt_namespaces)
    return {
        "certs": {"mode": "provided", "provided": {"caBundle": ca_bundle_b64}},
        "placement": {"defaultStrategy": default_strategy},
        "webhook": {"admission": admission},
    }


def render_chart(values: dict[str, Any], chart_path: Path = CHART_PATH) -> list[dict[str, Any]]:
    """Every object the chart renders with `values` (release `exclusive-placement` in its namespace)."""
    if not (chart_path / "Chart.yaml").is_file():
        raise ChartError(f"no Helm chart at {chart_path} (expected Chart.yaml there)")
    try:
        import helm_python
    except ImportError as err:
        raise ChartError(
            "helm-python-sdk is needed to render the chart's webhook configurations: "
            "install the dev requirements (make venv)"
        ) from err
    try:
        rendered = helm_python.Chart.load(str(chart_path)).render(
            values, name=RELEASE_NAME, namespace=RELEASE_NAMESPACE
        )
    except helm_python.HelmError as err:
        raise ChartError(f"rendering {chart_path} failed: {err}") from err
    objects: list[dict[str, Any]] = []
    for template in sorted(rendered):
        if not template.endswith((".yaml", ".yml")):
            continue  # NOTES.txt and friends are text for humans, not manifests
        objects.extend(doc for doc in yaml.safe_load_all(rendered[template]) if isinstance(doc, dict))
    return objects


def point_at_url(configuration: dict[str, Any], base_url: str, ca_bundle_b64: str) -> dict[str, Any]:
    """A copy of a webhook configuration whose webhooks call `base_url` + the chart's service path."""
    result = copy.deepcopy(configuration)
    for webhook in result.get("webhooks", []):
        client = webhook.get("clientConfig", {})
        service = client.get("service")
        if service is None:
            raise ChartError(f"webhook {webhook.get('name')!r} has no clientConfig.service to rewrite")
        webhook["clientConfig"] = {
            "url": base_url.rstrip("/") + service.get("path", "/"),
            "caBundle": ca_bundle_b64,
        }
    return result


def local_webhook_configurations(
    base_url: str,
    ca_bundle_b64: str,
    default_strategy: str,
    chart_path: Path = CHART_PATH,
    *,
    exempt_namespaces: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The chart's Mutating/ValidatingWebhookConfigurations, calling the local webhook at `base_url`."""
    objects = render_chart(chart_values(ca_bundle_b64, default_strategy, exempt_namespaces), chart_path)
    return webhook_configurations(objects, base_url, ca_bundle_b64)


def webhook_configurations(
    objects: list[dict[str, Any]], base_url: str, ca_bundle_b64: str
) -> list[dict[str, Any]]:
    """The webhook configurations among the chart's rendered `objects`, calling `base_url`."""
    configurations = [
        point_at_url(obj, base_url, ca_bundle_b64)
        for obj in objects
        if obj.get("kind") in WEBHOOK_CONFIGURATION_KINDS
    ]
    kinds = {obj["kind"] for obj in configurations}
    if kinds != WEBHOOK_CONFIGURATION_KINDS:
        raise ChartError(
            f"the chart rendered {sorted(kinds)}; expected both {sorted(WEBHOOK_CONFIGURATION_KINDS)}"
        )
    return configurations


def admission_policies(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chart's Validating- and MutatingAdmissionPolicies, each kind before its bindings."""
    order = {kind: index for index, kind in enumerate(ADMISSION_POLICY_KINDS)}
    return sorted((obj for obj in objects if obj.get("kind") in order), key=lambda obj: order[obj["kind"]])


EXEMPT_FLAG = "--exempt-namespaces="


PIN_FOLLOWERS_FLAGS = ("--pin-followers-label", "--no-pin-followers-label")


def _deployment_args(objects: list[dict[str, Any]], component: str) -> list[str]:
    """The arguments of the chart's `<fullname>-<component>` Deployment (webhook, resizer)."""
    for obj in objects:
        if obj.get("kind") == "Deployment" and obj["metadata"]["name"].endswith(f"-{component}"):
            return [str(arg) for arg in obj["spec"]["template"]["spec"]["containers"][0].get("args") or []]
    raise ChartError(f"the chart rendered no {component} Deployment")


def _resizer_args(objects: list[dict[str, Any]]) -> list[str]:
    return _deployment_args(objects, "resizer")


def resizer_exempt_namespaces(objects: list[dict[str, Any]]) -> tuple[str, ...]:
    """The namespaces the chart's resizer is told to leave alone (those its webhooks are exempt from)."""
    for arg in _resizer_args(objects):
        if arg.startswith(EXEMPT_FLAG):
            return tuple(name for name in arg.removeprefix(EXEMPT_FLAG).split(",") if name)
    raise ChartError(f"the chart's resizer Deployment has no {EXEMPT_FLAG}... argument")


FOLLOWER_SHARDS_FLAG = "--follower-shards="


def webhook_follower_shards_flag(objects: list[dict[str, Any]]) -> str:
    """The chart's webhook `--follower-shards=<S>`: the shard labels it writes must be those its follower
    policy bindings match."""
    for arg in _deployment_args(objects, "webhook"):
        if arg.startswith(FOLLOWER_SHARDS_FLAG):
            return arg
    raise ChartError(f"the chart's webhook Deployment has no {FOLLOWER_SHARDS_FLAG}... argument")


def resizer_pin_followers_flag(objects: list[dict[str, Any]]) -> str:
    """Whether the chart's resizer labels resized Jobs pin-followers (the follower policy's params: on the
    policy path of pod admission only), as its flag."""
    for arg in _resizer_args(objects):
        if arg in PIN_FOLLOWERS_FLAGS:
            return arg
    raise ChartError(f"the chart's resizer Deployment has neither of {', '.join(PIN_FOLLOWERS_FLAGS)}")
