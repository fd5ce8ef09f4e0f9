"""`helm lint` (real Helm, via helm-python-sdk) finds nothing wrong, whatever the certificate mode."""

from __future__ import annotations

from typing import Any

import helm_python
import pytest

from tests.chart.chart_rendering import CHART_DIR, NAMESPACE, Obj, merged

WARNING = 2

EXTRA_VARIANTS: dict[str, Obj] = {
    "defaults": {},
    "service-monitor": {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}}},
    "hard-anti-affinity": {
        "webhook": {"antiAffinity": "hard", "replicas": 3},
        "resizer": {"antiAffinity": "hard"},
    },
    "job-key-policy": {"webhook": {"jobKeyPolicy": {"enabled": True}}},
}


def findings(values: Obj) -> list[dict[str, Any]]:
    report = helm_python.lint(
        str(CHART_DIR), values, strict=True, namespace=NAMESPACE, kube_version="v1.31.0"
    )
    assert report["total_charts_linted"] == 1
    return [m for m in report["messages"] if m["severity"] >= WARNING] + [
        {"error": e} for e in report["errors"]
    ]


@pytest.mark.parametrize("mode", ["generate", "cert-manager", "provided"])
@pytest.mark.parametrize("variant", sorted(EXTRA_VARIANTS))
def test_lint_is_clean_for_every_cert_mode(mode: str, variant: str, mode_values: dict[str, Obj]) -> None:
    assert findings(merged(mode_values[mode], EXTRA_VARIANTS[variant])) == []


def test_lint_reports_schema_violations_as_errors() -> None:
    problems = findings({"placement": {"defaultStrategy": "fastest"}})
    assert any("defaultStrategy" in str(p["error"]) for p in problems), problems


def test_client_dry_run_install_prints_verification_notes(mode_values: dict[str, Obj]) -> None:
    config = helm_python.Config(kube_apiserver="http://127.0.0.1:1", storage_driver="memory")
    try:
        release = config.install(
            str(CHART_DIR), "ep", mode_values["provided"], namespace="placement-system", dry_run="client"
        )
    finally:
        config.close()
    assert "kind: MutatingWebhookConfiguration" in release["manifest"]
    notes = release["notes"]
    assert "kubectl -n placement-system rollout status deployment/ep-exclusive-placement-webhook" in notes
    assert "get lease ep-exclusive-placement-resizer" in notes
    assert "helm -n placement-system uninstall ep" in notes
