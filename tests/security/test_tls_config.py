"""TLS configuration: TLS 1.2+ only, no plain-HTTP listener unless --insecure-dev, private keys 0600."""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import stat
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from certs.files import write_dev_certs
from tests.security.security_support import ROOT, WebhookProcess
from webhook.settings import WebhookSettings

# What OpenSSL reports when the SERVER refuses the version (an alert, or it hangs up on the ClientHello),
# as opposed to a client that cannot offer it at all ("no protocols available").
SERVER_REFUSED = ("TLSV1_ALERT_PROTOCOL_VERSION", "UNSUPPORTED_PROTOCOL", "UNEXPECTED_EOF")


def _client_context(webhook: WebhookProcess, version: ssl.TLSVersion) -> ssl.SSLContext:
    with warnings.catch_warnings():
        # Offering TLS 1.0/1.1 is deprecated in Python: exactly what this client must do.
        warnings.simplefilter("ignore", DeprecationWarning)
        return _old_or_new_context(webhook, version)


def _old_or_new_context(webhook: WebhookProcess, version: ssl.TLSVersion) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cafile=str(webhook.ca_file))
    context.minimum_version = version
    context.maximum_version = version
    if version < ssl.TLSVersion.TLSv1_2:
        context.set_ciphers("DEFAULT:@SECLEVEL=0")  # let the client offer the old protocol at all
    return context


def _handshake(webhook: WebhookProcess, version: ssl.TLSVersion, port: int | None = None) -> str:
    context = _client_context(webhook, version)
    with (
        socket.create_connection(("127.0.0.1", port or webhook.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        return str(tls.version())


def _permissive_server(webhook: WebhookProcess) -> tuple[socket.socket, threading.Thread]:
    """A control server accepting TLS 1.0+, with the webhook's certificate: proves the client below can
    really offer the old protocol, so a failure against the webhook is the webhook's refusal."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    context.load_cert_chain(webhook.cert_dir / "tls.crt", webhook.cert_dir / "tls.key")
    listener = socket.create_server(("127.0.0.1", 0))

    def serve_one() -> None:
        conn, _ = listener.accept()
        with contextlib.suppress(OSError), context.wrap_socket(conn, server_side=True) as tls:
            tls.recv(1)

    thread = threading.Thread(target=serve_one, daemon=True)
    thread.start()
    return listener, thread


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_tls_below_1_2_is_refused_by_the_server(
    limited_webhook: WebhookProcess, version: ssl.TLSVersion
) -> None:
    listener, thread = _permissive_server(limited_webhook)
    with listener:
        try:
            control = _handshake(limited_webhook, version, port=listener.getsockname()[1])
        except ssl.SSLError as err:
            pytest.skip(f"this OpenSSL cannot negotiate {version.name} at all: {err}")
        thread.join(10)
    assert control.startswith("TLSv1")
    with pytest.raises(ssl.SSLError) as refused:
        _handshake(limited_webhook, version)
    assert any(reason in str(refused.value) for reason in SERVER_REFUSED), refused.value


@pytest.mark.parametrize(
    ("version", "name"), [(ssl.TLSVersion.TLSv1_2, "TLSv1.2"), (ssl.TLSVersion.TLSv1_3, "TLSv1.3")]
)
def test_tls_1_2_and_1_3_are_served(
    limited_webhook: WebhookProcess, version: ssl.TLSVersion, name: str
) -> None:
    assert _handshake(limited_webhook, version) == name


def test_the_tls_port_does_not_speak_plain_http(limited_webhook: WebhookProcess) -> None:
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{limited_webhook.port}/livez", timeout=5)


def test_no_plain_http_listener_without_insecure_dev(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="--cert-dir is required"):
        WebhookSettings(server="http://127.0.0.1:1")
    result = subprocess.run(
        [sys.executable, "-m", "webhook", "--server", "http://127.0.0.1:1", "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "--cert-dir is required" in result.stderr
    # Only the explicit development flag serves plain HTTP.
    assert WebhookSettings(server="http://127.0.0.1:1", insecure_dev=True).cert_dir is None


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_private_keys_are_0600_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    previous = os.umask(umask)
    try:
        paths = write_dev_certs(tmp_path, "svc", "ns", ["localhost"], ["127.0.0.1"])
        # A forced rotation rewrites every file: still 0600.
        write_dev_certs(tmp_path, "svc", "ns", ["localhost"], ["127.0.0.1"], force_ca=True)
    finally:
        os.umask(previous)
    assert _mode(paths.tls_key) == 0o600
    assert _mode(paths.ca_key) == 0o600
    assert _mode(paths.tls_crt) == 0o644
    assert b"PRIVATE KEY" in paths.tls_key.read_bytes()


def test_certs_cli_writes_keys_0600(tmp_path: Path) -> None:
    out = tmp_path / "out"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "certs",
            "generate",
            "--out-dir",
            str(out),
            "--service",
            "s",
            "--namespace",
            "n",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=60,
    )
    keys = sorted(out.glob("*.key"))
    assert [k.name for k in keys] == ["ca.key", "tls.key"]
    assert [_mode(k) for k in keys] == [0o600, 0o600]
