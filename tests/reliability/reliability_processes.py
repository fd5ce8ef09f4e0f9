"""Real processes for the reliability tests: the webhook over TLS against the fake API; cert helpers."""

from __future__ import annotations

import datetime
import json
import socket
import ssl
from pathlib import Path
from typing import Any

import httpx

from certs.files import write_dev_certs
from certs.generate import DEFAULT_SERVING_DAYS
from devstack.commands import webhook_command
from devstack.ports import free_port
from devstack.processes import ManagedProcess
from devstack.readiness import wait_http_ok
from tests.support.fake_api import FakeKubeApi

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "admission"
SERVICE, NAMESPACE = "exclusive-placement-webhook", "exclusive-placement"


def fixture_review(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def dev_certs(cert_dir: Path, *, renew: bool = False) -> None:
    """Write a CA and serving cert; `renew` writes a new serving cert (new key) under the same CA, as a
    cert-manager renewal does, by deciding as if most of the lifetime had passed."""
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=DEFAULT_SERVING_DAYS)
    write_dev_certs(cert_dir, SERVICE, NAMESPACE, ["localhost"], ["127.0.0.1"], now=later if renew else None)


def file_certificate_der(cert_dir: Path) -> bytes:
    pem = (cert_dir / "tls.crt").read_text()
    first = pem[: pem.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")]
    return ssl.PEM_cert_to_DER_cert(first)


def served_certificate_der(port: int, ca_file: Path) -> bytes:
    """The certificate a NEW connection is served (verified against the CA)."""
    context = ssl.create_default_context(cafile=str(ca_file))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


class WebhookUnderTest:
    """`python -m webhook` on a free port with TLS from `cert_dir`, reloading certs every 0.2 s."""

    def __init__(self, workdir: Path, api: FakeKubeApi) -> None:
        self.cert_dir = workdir / "certs"
        dev_certs(self.cert_dir)
        self.port = free_port()
        argv = webhook_command(
            port=self.port,
            cert_dir=self.cert_dir,
            server=api.url,
            extra_args=["--cert-reload-seconds", "0.2"],
        )
        self.process = ManagedProcess("webhook", argv, workdir / "webhook.log")

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.cert_dir / "ca.crt"

    def trust(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def __enter__(self) -> WebhookUnderTest:
        self.process.start()
        try:
            wait_http_ok(self.process, f"{self.base}/readyz", 60, ca_file=self.ca_file)
        except BaseException:
            self.process.stop()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.process.stop()

    def metrics(self) -> str:
        return httpx.get(f"{self.base}/metrics", verify=self.trust(), timeout=10).text
