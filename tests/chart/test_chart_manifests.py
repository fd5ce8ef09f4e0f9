"""Every manifest the chart renders is valid against the Kubernetes 1.31 schemas (kubernetes-validate)."""

from __future__ import annotations

import kubernetes_validate
import pytest

from tests.chart.chart_rendering import KUBERNETES_VERSION, Obj, merged, render

# Custom resources have no schema in kubernetes-validate; they are checked field by field in test_chart_certs.
CUSTOM_RESOURCES = {
    ("cert-manager.io/v1", "Issuer"),
    ("cert-manager.io/v1", "Certificate"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
}

ALWAYS = {
    "ClusterRole",
    "ClusterRoleBinding",
    "Deployment",
    "MutatingWebhookConfiguration",
    "PodDisruptionBudget",
    "Role",
    "RoleBinding",
    "Service",
    "ServiceAccount",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingWebhookConfiguration",
}
PER_MODE = {"generate": {"Secret"}, "cert-manager": {"Issuer", "Certificate"}, "provided": set()}

VARIANTS: dict[str, Obj] = {
    "defaults": {},
    "everything-on": {
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
        "image": {"pullSecrets": [{"name": "regcred"}], "tag": "1.2.3"},
        "webhook": {
            "antiAffinity": "hard",
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}
            ],
            "extraEnv": [{"name": "EXCLUSIVE_PLACEMENT_CERT_RELOAD_SECONDS", "value": "10"}],
            "admission": {
                "exemptNamespaces": ["monitoring"],
                "namespaceSelectorExpressions": [{"key": "team", "operator": "In", "values": ["ml"]}],
                "objectSelector": {
                    "matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]
                },
            },
            "jobKeyPolicy": {"enabled": True},
            "networkPolicy": {
                "enabled": True,
                "apiServerCIDRs": ["10.0.0.0/28", "fd00::/120"],
                "extraFrom": [
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
                ],
            },
            "clientCA": {"secretName": "apiserver-client-ca"},
        },
        "resizer": {
            "extraEnv": [{"name": "EXCLUSIVE_PLACEMENT_RETRY_MAX_DELAY_SECONDS", "value": "60"}],
            "namespace": "team-a",
        },
    },
    "pdb-off": {"webhook": {"podDisruptionBudget": {"enabled": False}}},
    "job-key-policy-dry-run": {
        "webhook": {"jobKeyPolicy": {"enabled": True, "validationActions": ["Warn", "Audit"]}}
    },
    "resize-keys-policy-off": {"webhook": {"resizeKeysPolicy": {"enabled": False}}},
}


def schema_errors(objects: list[Obj]) -> list[str]:
    errors = []
    for obj in objects:
        if (obj["apiVersion"], obj["kind"]) in CUSTOM_RESOURCES:
            continue
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as err:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {err.message} at {list(err.path)}")
        except kubernetes_validate.SchemaNotFoundError as err:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: no 1.31 schema ({err})")
    return errors


@pytest.mark.parametrize("mode", sorted(PER_MODE))
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_manifest_is_valid_kubernetes_1_31(
    mode: str, variant: str, mode_values: dict[str, Obj]
) -> None:
    objects = render(merged(mode_values[mode], VARIANTS[variant]))
    assert schema_errors(objects) == []


@pytest.mark.parametrize("mode", sorted(PER_MODE))
def test_each_mode_renders_exactly_its_objects(mode: str, mode_values: dict[str, Obj]) -> None:
    kinds = {obj["kind"] for obj in render(mode_values[mode])}
    assert kinds == ALWAYS | PER_MODE[mode]


def test_service_monitors_only_when_enabled(mode_values: dict[str, Obj]) -> None:
    enabled = merged(mode_values["generate"], VARIANTS["everything-on"])
    monitors = [o for o in render(enabled) if o["kind"] == "ServiceMonitor"]
    assert {m["spec"]["endpoints"][0]["port"] for m in monitors} == {"https", "metrics"}
    assert all(m["metadata"]["labels"]["release"] == "prom" for m in monitors)


def test_schema_check_catches_an_invalid_manifest() -> None:
    broken = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "x"},
        "spec": {"ports": [{"port": "https"}]},
    }
    assert len(schema_errors([broken])) == 1


def test_names_fit_in_63_characters_with_a_long_release_name(mode_values: dict[str, Obj]) -> None:
    long_release = "a-really-long-release-name-for-exclusive-placement-testing-x"
    everything = merged(mode_values["cert-manager"], VARIANTS["everything-on"])
    objects = render(everything, name=long_release)
    too_long = [o["metadata"]["name"] for o in objects if len(o["metadata"]["name"]) > 63]
    assert too_long == []
    assert len({(o["kind"], o["metadata"]["name"]) for o in objects}) == len(objects)
