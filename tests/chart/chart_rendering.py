"""Render the Helm chart with real Helm (helm-python-sdk) and read the objects it produces."""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python
import yaml

from certs.generate import create_ca

CHART_DIR = Path(__file__).resolve().parents[2] / "charts" / "exclusive-placement"
RELEASE = "exclusive-placement"
NAMESPACE = "exclusive-placement"
KUBERNETES_VERSION = "1.31.0"

Obj = dict[str, Any]


def make_ca_bundle() -> str:
    """A real CA certificate, base64 PEM, as a user would pass in `certs.provided.caBundle`."""
    return base64.b64encode(create_ca("chart-test-ca", days=2).cert_pem).decode()


def cert_mode_values(ca_bundle: str) -> dict[str, Obj]:
    """The minimal values of each certificate mode."""
    return {
        "generate": {"certs": {"mode": "generate"}},
        "cert-manager": {"certs": {"mode": "cert-manager"}},
        "provided": {
            "certs": {"mode": "provided", "secretName": "my-tls", "provided": {"caBundle": ca_bundle}}
        },
    }


def merged(base: Obj, override: Obj) -> Obj:
    """`override` deep-merged onto a copy of `base` (maps merge, everything else replaces)."""
    result = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def render_templates(values: Obj, *, name: str = RELEASE, namespace: str = NAMESPACE) -> dict[str, str]:
    chart = helm_python.Chart.load(str(CHART_DIR))
    try:
        return chart.render(values, name=name, namespace=namespace)
    finally:
        chart.close()


def render(values: Obj, *, name: str = RELEASE, namespace: str = NAMESPACE) -> list[Obj]:
    """Every Kubernetes object the chart renders (NOTES.txt excluded), in template order."""
    templates = render_templates(values, name=name, namespace=namespace)
    objects: list[Obj] = []
    for path in sorted(templates):
        if path.endswith(".txt"):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(templates[path]) if isinstance(doc, dict))
    return objects


def of_kind(objects: list[Obj], kind: str) -> list[Obj]:
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects: list[Obj], kind: str) -> Obj:
    found = of_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, found {[o['metadata']['name'] for o in found]}"
    return found[0]


def named(objects: list[Obj], kind: str, suffix: str) -> Obj:
    """The one object of `kind` whose name ends in `suffix` (the chart names objects `<fullname>-<what>`)."""
    found = [obj for obj in of_kind(objects, kind) if obj["metadata"]["name"].endswith(suffix)]
    assert len(found) == 1, (
        f"expected one {kind} named *{suffix}, found {[o['metadata']['name'] for o in found]}"
    )
    return found[0]


def webhooks(objects: list[Obj]) -> Iterator[tuple[str, Obj]]:
    """(configuration kind, webhook) for every webhook of every webhook configuration."""
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for configuration in of_kind(objects, kind):
            for webhook in configuration["webhooks"]:
                yield kind, webhook


def of_component(objects: list[Obj], kind: str, component: str) -> Obj:
    """The one object of `kind` labelled `app.kubernetes.io/component: <component>`."""
    found = [
        o
        for o in of_kind(objects, kind)
        if o["metadata"]["labels"].get("app.kubernetes.io/component") == component
    ]
    assert len(found) == 1, (
        f"expected one {kind} of {component}, found {[o['metadata']['name'] for o in found]}"
    )
    return found[0]


Grants = dict[tuple[str, str], set[str]]


def grants_of(objects: list[Obj], service_account: str) -> dict[str, Grants]:
    """{scope: {(apiGroup, resource): verbs}} for a ServiceAccount; scope is "cluster" or a namespace."""
    roles = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for o in of_kind(objects, "ClusterRole") + of_kind(objects, "Role")
    }
    result: dict[str, Grants] = {}
    for binding in of_kind(objects, "ClusterRoleBinding") + of_kind(objects, "RoleBinding"):
        subjects = {(s["kind"], s["name"], s["namespace"]) for s in binding["subjects"]}
        if ("ServiceAccount", service_account, NAMESPACE) not in subjects:
            continue
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace")
        role = roles[(ref["kind"], namespace if ref["kind"] == "Role" else None, ref["name"])]
        scope = namespace or "cluster"
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    result.setdefault(scope, {}).setdefault((group, resource), set()).update(rule["verbs"])
    return result
