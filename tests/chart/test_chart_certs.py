"""The three certificate modes: generated (and kept across upgrades), cert-manager, and provided."""

from __future__ import annotations

import base64
import datetime

import helm_python
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from tests.chart.chart_rendering import (
    CHART_DIR,
    NAMESPACE,
    RELEASE,
    Obj,
    merged,
    of_component,
    of_kind,
    one,
    render,
    webhooks,
)
from tests.support.fake_api import FakeKubeApi

SERVICE = "exclusive-placement-webhook"
SERVICE_DNS = {
    SERVICE,
    f"{SERVICE}.{NAMESPACE}",
    f"{SERVICE}.{NAMESPACE}.svc",
    f"{SERVICE}.{NAMESPACE}.svc.cluster.local",
}


def ca_bundles(objects: list[Obj]) -> set[str | None]:
    return {w["clientConfig"].get("caBundle") for _, w in webhooks(objects)}


def mounted_secret(objects: list[Obj]) -> str:
    volumes = of_component(objects, "Deployment", "webhook")["spec"]["template"]["spec"]["volumes"]
    name: str = next(v for v in volumes if v["name"] == "certs")["secret"]["secretName"]
    return name


def pem(b64: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(b64))


def test_generated_certificate_is_served_and_trusted(mode_values: dict[str, Obj]) -> None:
    objects = render(mode_values["generate"])
    secret = one(objects, "Secret")
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["name"] == mounted_secret(objects)
    assert ca_bundles(objects) == {secret["data"]["ca.crt"]}
    ca, serving = pem(secret["data"]["ca.crt"]), pem(secret["data"]["tls.crt"])
    serving.verify_directly_issued_by(ca)
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(sans.get_values_for_type(x509.DNSName)) == SERVICE_DNS
    assert serving.not_valid_after_utc - datetime.datetime.now(datetime.UTC) > datetime.timedelta(days=3000)


def test_generate_mode_validity_comes_from_values(mode_values: dict[str, Obj]) -> None:
    values = merged(mode_values["generate"], {"certs": {"generate": {"validityDays": 30}}})
    serving = pem(one(render(values), "Secret")["data"]["tls.crt"])
    remaining = serving.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert datetime.timedelta(days=29) < remaining <= datetime.timedelta(days=30)


def render_against(api_url: str, values: Obj) -> list[Obj]:
    """A cluster-aware render, as `helm upgrade` does it: `lookup` reads the live Secret."""
    config = helm_python.Config(kube_apiserver=api_url, storage_driver="memory")
    chart = helm_python.Chart.load(str(CHART_DIR))
    try:
        templates = config.render(chart, values, name=RELEASE, namespace=NAMESPACE, is_upgrade=True)
    finally:
        chart.close()
        config.close()
    return [
        doc
        for path in sorted(templates)
        if path.endswith(".yaml")
        for doc in yaml.safe_load_all(templates[path])
        if doc
    ]


def test_generated_certificate_is_kept_across_upgrades(mode_values: dict[str, Obj]) -> None:
    with FakeKubeApi() as api:
        first = render_against(api.url, mode_values["generate"])
        installed = one(first, "Secret")
        api.put("secrets", {**installed, "metadata": {**installed["metadata"], "namespace": NAMESPACE}})
        second = render_against(api.url, mode_values["generate"])
    assert one(second, "Secret")["data"] == installed["data"]
    assert ca_bundles(second) == {installed["data"]["ca.crt"]}
    assert any(f"/secrets/{installed['metadata']['name']}" in path for path in api.paths)


def test_an_incomplete_secret_is_replaced_not_reused(mode_values: dict[str, Obj]) -> None:
    with FakeKubeApi() as api:
        name = one(render_against(api.url, mode_values["generate"]), "Secret")["metadata"]["name"]
        api.put(
            "secrets",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "data": {"tls.crt": "eA=="},
            },
        )
        renewed = one(render_against(api.url, mode_values["generate"]), "Secret")
    assert renewed["data"]["tls.crt"] != "eA=="
    pem(renewed["data"]["tls.crt"]).verify_directly_issued_by(pem(renewed["data"]["ca.crt"]))


def test_cert_manager_mode_injects_the_ca_of_the_mounted_certificate(mode_values: dict[str, Obj]) -> None:
    objects = render(mode_values["cert-manager"])
    certificate = one(objects, "Certificate")
    issuer = one(objects, "Issuer")
    assert certificate["spec"]["secretName"] == mounted_secret(objects)
    assert set(certificate["spec"]["dnsNames"]) == SERVICE_DNS
    assert "server auth" in certificate["spec"]["usages"]
    assert certificate["spec"]["issuerRef"] == {
        "name": issuer["metadata"]["name"],
        "kind": "Issuer",
        "group": "cert-manager.io",
    }
    assert issuer["spec"] == {"selfSigned": {}}
    assert ca_bundles(objects) == {None}, "cert-manager's cainjector owns caBundle"
    expected = f"{NAMESPACE}/{certificate['metadata']['name']}"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert one(objects, kind)["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == expected
    assert of_kind(objects, "Secret") == []


def test_cert_manager_mode_can_use_an_existing_issuer(mode_values: dict[str, Obj]) -> None:
    ref = {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    objects = render(merged(mode_values["cert-manager"], {"certs": {"certManager": {"issuerRef": ref}}}))
    assert one(objects, "Certificate")["spec"]["issuerRef"] == ref
    assert of_kind(objects, "Issuer") == []


def test_provided_mode_uses_the_users_secret_and_ca(mode_values: dict[str, Obj], ca_bundle: str) -> None:
    objects = render(mode_values["provided"])
    assert of_kind(objects, "Secret") == []
    assert mounted_secret(objects) == "my-tls"
    assert ca_bundles(objects) == {ca_bundle}
    assert "annotations" not in one(objects, "MutatingWebhookConfiguration")["metadata"]


@pytest.mark.parametrize("mode", ["generate", "provided"])
def test_only_cert_manager_mode_asks_for_ca_injection(mode: str, mode_values: dict[str, Obj]) -> None:
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert "cert-manager.io/inject-ca-from" not in one(render(mode_values[mode]), kind)["metadata"].get(
            "annotations", {}
        )


def test_generated_key_is_a_usable_private_key(mode_values: dict[str, Obj]) -> None:
    secret = one(render(mode_values["generate"]), "Secret")
    key = load_pem_private_key(base64.b64decode(secret["data"]["tls.key"]), password=None)
    serving = pem(secret["data"]["tls.crt"])
    assert key.public_key().public_numbers() == serving.public_key().public_numbers()  # type: ignore[union-attr]
