"""One client against the real TLS webhook process: idle connections, too many connections, endless headers,
slow bodies, expanding bodies, and the client certificate the webhook can require.

Each attack comes from 127.0.0.1; the legitimate client (the API server, in a cluster) from 127.0.0.2,
another address on the loopback interface. Bounds are socket timeouts (a hang fails the test), never
timing assertions.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from certs.generate import create_ca, create_client_cert
from tests.security.security_support import (
    MAX_INFLIGHT,
    WebhookProcess,
    fixture_review,
    legit_client,
    running_webhook,
)
from tests.support.waiting import eventually

PER_CLIENT = 4
HANDSHAKE_TIMEOUT = 2.0
REQUEST_HEAD = "POST /mutate-pods HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"


@pytest.fixture(scope="module")
def capped_webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    with running_webhook(
        tmp_path_factory,
        "capped",
        "--max-connections-per-client",
        str(PER_CLIENT),
        "--tls-handshake-timeout-seconds",
        str(HANDSHAKE_TIMEOUT),
    ) as webhook:
        yield webhook


def closed_metric(webhook: WebhookProcess, reason: str) -> float:
    with legit_client(webhook) as client:
        text = client.get("/metrics").text
    prefix = f'exclusive_placement_connections_closed_total{{reason="{reason}"}} '
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


def admit_leader(webhook: WebhookProcess) -> int:
    with legit_client(webhook) as client:
        return client.post("/mutate-pods", json=fixture_review("leader-pod.json")).status_code


def read_until_closed(sock: socket.socket) -> bytes:
    chunks = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_connection_that_never_starts_tls_is_closed_after_the_handshake_timeout(
    capped_webhook: WebhookProcess,
) -> None:
    before = closed_metric(capped_webhook, "tls-handshake-timeout")
    with socket.create_connection(("127.0.0.1", capped_webhook.port)) as idle:
        idle.settimeout(HANDSHAKE_TIMEOUT * 10)  # a connection held forever fails here
        assert read_until_closed(idle) == b""
    assert closed_metric(capped_webhook, "tls-handshake-timeout") == before + 1


def test_one_client_cannot_take_every_connection(capped_webhook: WebhookProcess) -> None:
    held = [socket.create_connection(("127.0.0.1", capped_webhook.port)) for _ in range(PER_CLIENT)]
    try:
        eventually(
            lambda: (
                closed_metric(capped_webhook, "max-connections-per-client") == 0
                and _open_connections(capped_webhook) >= PER_CLIENT
            ),
            f"the {PER_CLIENT} idle connections accepted",
        )
        one_more = socket.create_connection(
            ("127.0.0.1", capped_webhook.port), timeout=HANDSHAKE_TIMEOUT * 10
        )
        with pytest.raises((ssl.SSLError, ConnectionError)), one_more:
            capped_webhook.trust().wrap_socket(one_more, server_hostname="localhost")  # closed before TLS
        assert closed_metric(capped_webhook, "max-connections-per-client") == 1
        assert admit_leader(capped_webhook) == 200  # another client is served meanwhile
    finally:
        for sock in held:
            sock.close()


def _open_connections(webhook: WebhookProcess) -> float:
    with legit_client(webhook) as client:
        text = client.get("/metrics").text
    return next(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("exclusive_placement_connections_open ")
    )


def test_an_endless_header_is_cut_with_431(capped_webhook: WebhookProcess) -> None:
    with capped_webhook.tls_socket() as tls:
        tls.settimeout(30)
        tls.sendall(REQUEST_HEAD.encode() + b"X-Filler: ")
        with contextlib.suppress(OSError):  # the server closes while we still send
            for _ in range(64):
                tls.sendall(b"a" * 1024)
        answer = read_until_closed(tls)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
    assert b"larger than 16384 bytes" in answer
    assert admit_leader(capped_webhook) == 200


def test_a_review_that_would_expand_beyond_the_memory_budget_gets_413(capped_webhook: WebhookProcess) -> None:
    review = fixture_review("leader-pod.json")
    review["request"]["object"]["spec"]["x"] = "EXPAND"
    body = json.dumps(review).encode().replace(b'"EXPAND"', b"[" + b",".join([b"{}"] * 500_000) + b"]")
    with legit_client(capped_webhook) as client:
        response = client.post("/mutate-pods", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert "would take about" in response.json()["error"]


def test_slow_bodies_hold_no_admission_slot(limited_webhook: WebhookProcess) -> None:
    """More slow bodies than admission slots: a legitimate admission is still decided, not shed."""
    slow = []
    try:
        for _ in range(MAX_INFLIGHT * 2):
            tls = limited_webhook.tls_socket()
            slow.append(tls)
            tls.sendall(f"{REQUEST_HEAD}Content-Length: 5000\r\n\r\n".encode() + b'{"apiVersion": ')
        assert admit_leader(limited_webhook) == 200
    finally:
        for tls in slow:
            tls.close()


# --- the client certificate ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("client-ca")
    ca = create_ca("api-server-client-ca")
    (directory / "ca.crt").write_bytes(ca.cert_pem)
    for name, issuer in (("apiserver", ca), ("stranger", create_ca("another-ca"))):
        pair = create_client_cert(issuer, f"kube-apiserver-{name}")
        (directory / f"{name}.crt").write_bytes(pair.cert_pem)
        (directory / f"{name}.key").write_bytes(pair.key_pem)
    return directory


@pytest.fixture(scope="module")
def mtls_webhook(tmp_path_factory: pytest.TempPathFactory, client_ca: Path) -> Iterator[WebhookProcess]:
    with running_webhook(tmp_path_factory, "mtls", "--client-ca-file", str(client_ca / "ca.crt")) as webhook:
        yield webhook


def client_with_certificate(webhook: WebhookProcess, directory: Path, name: str) -> httpx.Client:
    context = webhook.trust()
    context.load_cert_chain(directory / f"{name}.crt", directory / f"{name}.key")
    return httpx.Client(base_url=webhook.base, verify=context, timeout=10)


def test_admissions_need_the_api_servers_certificate(mtls_webhook: WebhookProcess, client_ca: Path) -> None:
    review = fixture_review("leader-pod.json")
    with mtls_webhook.client() as anonymous:
        refused = anonymous.post("/mutate-pods", json=review)
        assert refused.status_code == 403
        assert "client certificate" in refused.json()["error"]
        # the kubelet's probes and Prometheus present no certificate
        assert anonymous.get("/livez").status_code == 200
        assert anonymous.get("/readyz").status_code == 200
    with client_with_certificate(mtls_webhook, client_ca, "apiserver") as api_server:
        assert api_server.post("/mutate-pods", json=review).status_code == 200


def test_a_certificate_of_another_ca_is_refused(mtls_webhook: WebhookProcess, client_ca: Path) -> None:
    # TLS 1.3 verifies the client's certificate after the client's side of the handshake: the refusal shows
    # as a connection closed before any response.
    refusals = (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError)
    with client_with_certificate(mtls_webhook, client_ca, "stranger") as stranger, pytest.raises(refusals):
        stranger.get("/livez")
