"""SIGTERM to a real `python -m webhook`: the admission in flight is answered, new connections are refused.

What the chart's preStop sleep and terminationGracePeriodSeconds are sized for (docs/deploy.md, "Upgrades"):
once SIGTERM arrives the webhook stops accepting, so the pod must already be out of the Service's endpoints;
what it accepted before is answered within its graceful shutdown (GRACEFUL_SHUTDOWN_SECONDS).
"""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path

from tests.security.security_support import WebhookProcess, fixture_review, start_webhook
from tests.support.fake_api import FakeKubeApi
from tests.support.waiting import eventually
from webhook.server import GRACEFUL_SHUTDOWN_SECONDS

BODY_DELAY_SECONDS = 1.0
"""The rest of the body arrives this long after the listener closed: past uvicorn's own 0.1 s pause at the
start of its shutdown, well within GRACEFUL_SHUTDOWN_SECONDS."""
REQUEST_HEAD = "POST /mutate-pods HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
MEMORY_GAUGE = "exclusive_placement_admission_memory_bytes "


def reading_a_body(webhook: WebhookProcess) -> bool:
    """An admission has started reading its body: it holds memory (webhook.body.read_body)."""
    with webhook.client() as client:
        text = client.get("/metrics").text
    line = next(line for line in text.splitlines() if line.startswith(MEMORY_GAUGE))
    return float(line.removeprefix(MEMORY_GAUGE)) > 0


def refuses_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def test_sigterm_answers_the_admission_in_flight_and_accepts_no_new_connection(tmp_path: Path) -> None:
    body = json.dumps(fixture_review("leader-pod.json")).encode()
    with FakeKubeApi() as api:
        webhook = start_webhook(tmp_path, api)
        try:
            with webhook.tls_socket() as tls:
                tls.sendall(f"{REQUEST_HEAD}Content-Length: {len(body)}\r\n\r\n".encode() + body[:10])
                eventually(lambda: reading_a_body(webhook), "the admission reading its body", 10)
                webhook.process.signal(signal.SIGTERM)
                eventually(lambda: refuses_connections(webhook.port), "the listener closed on SIGTERM", 10)
                time.sleep(BODY_DELAY_SECONDS)
                assert webhook.process.running
                tls.sendall(body[10:])
                tls.settimeout(GRACEFUL_SHUTDOWN_SECONDS)
                answer = b""
                while chunk := tls.recv(65536):
                    answer += chunk
            head, _, payload = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), answer[:300]
            assert b"connection: close" in head.lower()
            assert json.loads(payload)["response"]["allowed"] is True
            eventually(
                lambda: not webhook.process.running, "the webhook exited", GRACEFUL_SHUTDOWN_SECONDS + 5
            )
        finally:
            webhook.process.stop()
