"""`python -m webhook` as a real process over real TLS; a swapped certificate is served without restart."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from certs.files import write_dev_certs
from devstack.commands import webhook_command
from devstack.ports import free_port
from devstack.processes import ManagedProcess
from devstack.readiness import wait_http_ok
from tests.support.fake_api import FakeKubeApi
from tests.support.waiting import eventually
from tests.webhook.webhook_support import fixture_review
from webhook.tls import server_context


def trust(ca_file: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca_file))


def served_certificate(port: int) -> bytes:
    """The DER certificate the server presents on a new connection (no verification)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


Served = tuple[int, Path, ManagedProcess]
"""The webhook's port, its certificate directory and its process."""


@pytest.fixture
def webhook_process(tmp_path: Path, fake_api: FakeKubeApi) -> Iterator[Served]:
    cert_dir = tmp_path / "certs"
    write_dev_certs(
        cert_dir, "exclusive-placement-webhook", "exclusive-placement", ["localhost"], ["127.0.0.1"]
    )
    port = free_port()
    argv = webhook_command(
        port=port, cert_dir=cert_dir, server=fake_api.url, extra_args=["--cert-reload-seconds", "0.2"]
    )
    process = ManagedProcess("webhook", argv, tmp_path / "webhook.log")
    process.start()
    try:
        wait_http_ok(process, f"https://127.0.0.1:{port}/readyz", 30, ca_file=cert_dir / "ca.crt")
        yield port, cert_dir, process
    finally:
        process.stop(15)


def test_tls_admission_and_cert_swap_without_restart(
    webhook_process: Served,
) -> None:
    port, cert_dir, process = webhook_process
    base = f"https://127.0.0.1:{port}"
    review = fixture_review("leader-pod.json")
    answer = httpx.post(f"{base}/mutate-pods", json=review, verify=trust(cert_dir / "ca.crt")).json()
    assert answer["response"]["uid"] == review["request"]["uid"]
    assert answer["response"]["patchType"] == "JSONPatch"
    before = served_certificate(port)
    old_ca_copy = cert_dir.parent / "old-ca.crt"
    old_ca_copy.write_bytes((cert_dir / "ca.crt").read_bytes())

    write_dev_certs(
        cert_dir,
        "exclusive-placement-webhook",
        "exclusive-placement",
        ["localhost"],
        ["127.0.0.1"],
        force_ca=True,
    )
    eventually(lambda: served_certificate(port) != before, "the new certificate served", 20, interval=0.1)

    assert process.running  # same process: no restart
    assert httpx.get(f"{base}/livez", verify=trust(cert_dir / "ca.crt")).text == "ok"
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{base}/livez", verify=trust(old_ca_copy))
    metrics = httpx.get(f"{base}/metrics", verify=trust(cert_dir / "ca.crt")).text
    assert 'exclusive_placement_cert_reloads_total{outcome="ok"} 2.0' in metrics


def test_plain_http_is_refused_on_the_tls_port(
    webhook_process: Served,
) -> None:
    port, _, _ = webhook_process
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/livez", timeout=5)


def test_tls_1_2_is_served_and_is_the_minimum(
    webhook_process: Served,
) -> None:
    port, cert_dir, _ = webhook_process
    context = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        assert tls.version() == "TLSv1.2"
    assert server_context().minimum_version is ssl.TLSVersion.TLSv1_2
