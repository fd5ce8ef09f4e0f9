"""images/register_webhooks.py (compose's one-shot) registers the chart's configurations in a real kubesim."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from certs.files import write_dev_certs
from devstack.kube import KubeClient
from kubesim.testing import KubesimServer
from tests.compose.compose_model import REPO

SCRIPT = REPO / "images" / "register_webhooks.py"
WEBHOOK_URL = "https://127.0.0.1:9443"
EXPECTED_URLS = {
    "pods.mutate.exclusive-placement.io": f"{WEBHOOK_URL}/mutate-pods",
    "jobs.mutate.exclusive-placement.io": f"{WEBHOOK_URL}/mutate-jobs",
    "pods.validate.exclusive-placement.io": f"{WEBHOOK_URL}/validate-pods",
    "jobsets.validate.exclusive-placement.io": f"{WEBHOOK_URL}/validate-jobsets",
}


def register(server: str, ca_file: Path, strategy: str = "elastic") -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(SCRIPT), "--server", server, "--webhook-url", WEBHOOK_URL]
    return subprocess.run(
        [*argv, "--ca-file", str(ca_file), "--default-strategy", strategy],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.fixture(scope="module")
def kubesim() -> Iterator[KubesimServer]:
    with KubesimServer(nodes=1, pools=1, controllers=False) as server:
        yield server


def test_registers_the_charts_webhooks_at_the_compose_url(kubesim: KubesimServer, tmp_path: Path) -> None:
    paths = write_dev_certs(
        tmp_path, "exclusive-placement-webhook", "exclusive-placement", ["localhost"], ["127.0.0.1"]
    )
    for _ in range(2):  # a second run (compose restart) replaces rather than fails
        result = register(kubesim.url, paths.ca_crt)
        assert result.returncode == 0, result.stderr
    with KubeClient(kubesim.url) as client:
        configurations = client.list("MutatingWebhookConfiguration") + client.list(
            "ValidatingWebhookConfiguration"
        )
    urls = {w["name"]: w["clientConfig"]["url"] for c in configurations for w in c["webhooks"]}
    assert urls == EXPECTED_URLS
    assert "registered MutatingWebhookConfiguration/exclusive-placement" in result.stdout


def test_a_missing_ca_file_is_a_clear_error(kubesim: KubesimServer, tmp_path: Path) -> None:
    result = register(kubesim.url, tmp_path / "absent.crt")
    assert result.returncode == 1
    assert "absent.crt" in result.stderr
