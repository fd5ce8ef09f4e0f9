"""Abusive clients against the real TLS webhook process: oversized bodies, slowloris, a flood.

The webhook must answer each with a clear, bounded error and keep answering health checks; nothing hangs.
Bounds here are generous socket timeouts (a hang fails the test), never timing assertions.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator

import httpx

from tests.security.security_support import (
    BODY_TIMEOUT,
    HEADER_TIMEOUT,
    MAX_INFLIGHT,
    WebhookProcess,
    fixture_review,
)
from tests.support.waiting import eventually
from webhook.limits import READINESS_HOLD_SECONDS
from webhook.settings import MAX_BODY_BYTES

REQUEST_HEAD = "POST /mutate-pods HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"


def _read_response(tls: object) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks: list[bytes] = []
    while True:
        chunk = tls.recv(65536)  # type: ignore[attr-defined]
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def test_declared_oversized_body_gets_413(limited_webhook: WebhookProcess) -> None:
    with limited_webhook.client() as client:
        response = client.post(
            "/mutate-pods",
            content=b"{" + b" " * (MAX_BODY_BYTES + 10) + b"}",
            headers={"Content-Type": "application/json"},
        )
    assert response.status_code == 413
    assert "larger than" in response.json()["error"]


def test_streamed_oversized_body_without_length_gets_413(limited_webhook: WebhookProcess) -> None:
    def chunks() -> Iterator[bytes]:
        block = b" " * (1024 * 1024)
        for _ in range(9):
            yield block

    with limited_webhook.client() as client:
        response = client.post("/mutate-pods", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413


def test_slow_body_is_cut_with_408(limited_webhook: WebhookProcess) -> None:
    with limited_webhook.tls_socket() as tls:
        tls.sendall(f"{REQUEST_HEAD}Content-Length: 5000\r\n\r\n".encode() + b'{"apiVersion": ')
        tls.settimeout(BODY_TIMEOUT * 10)  # a hang would raise TimeoutError here: cut by the server's timeout
        answer = _read_response(tls)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"request body not received within" in answer


def test_trickled_headers_are_cut_with_408(limited_webhook: WebhookProcess) -> None:
    with limited_webhook.tls_socket() as tls:
        tls.sendall(REQUEST_HEAD.encode())
        tls.settimeout(HEADER_TIMEOUT / 4)
        answer = b""
        deadline = time.monotonic() + HEADER_TIMEOUT * 10  # bounded: a hang fails below
        while time.monotonic() < deadline:
            try:
                tls.sendall(b"X")  # one byte of a header name every HEADER_TIMEOUT/4 s
            except OSError:
                break
            try:
                chunk = tls.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"request headers not received in time" in answer


def test_an_idle_connection_is_closed_without_an_answer(limited_webhook: WebhookProcess) -> None:
    """As Go's net/http does: an answer nobody asked for could be read as the answer to the request a
    client's connection pool sends on it next."""
    with limited_webhook.tls_socket() as tls:
        tls.settimeout(HEADER_TIMEOUT * 10)  # a hang would raise TimeoutError here: closed by the server
        answer = _read_response(tls)
    assert answer == b""


async def _flood(webhook: WebhookProcess, concurrency: int, seconds: float, tally: Counter[str]) -> None:
    """`concurrency` clients post follower reviews back to back (each needs a leader lookup: the
    expensive path) for `seconds`."""
    body = json.dumps(fixture_review("follower-pod.json"))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=webhook.base, verify=webhook.trust(), timeout=30, limits=limits
    ) as client:
        stop_at = time.monotonic() + seconds

        async def worker() -> None:
            while time.monotonic() < stop_at:
                try:
                    response = await client.post(
                        "/mutate-pods", content=body, headers={"Content-Type": "application/json"}
                    )
                except httpx.HTTPError as err:
                    tally[f"error {type(err).__name__}"] += 1
                    continue
                tally[str(response.status_code)] += 1
                if response.status_code == 429:
                    tally["retry-after"] += response.headers.get("retry-after") == "1"
                    tally["overloaded-message"] += "overloaded" in response.json()["error"]

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def test_flood_is_shed_with_429_unready_and_health_checks_keep_answering(
    flooded_webhook: WebhookProcess,
) -> None:
    tally: Counter[str] = Counter()
    health: Counter[str] = Counter()
    stop = threading.Event()

    def probe() -> None:
        with flooded_webhook.client(timeout=5) as client:
            while not stop.is_set():
                for path in ("/livez", "/readyz"):
                    try:
                        health[f"{path} {client.get(path).status_code}"] += 1
                    except httpx.HTTPError as err:
                        health[f"{path} error {type(err).__name__}"] += 1
                time.sleep(0.05)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        asyncio.run(_flood(flooded_webhook, MAX_INFLIGHT * 10, 4.0, tally))
    finally:
        stop.set()
        prober.join(30)
    print(f"flood at {MAX_INFLIGHT * 10} concurrent clients: {dict(tally)}; health checks: {dict(health)}")
    answered = tally["200"] + tally["429"]
    assert answered == sum(v for k, v in tally.items() if k.isdigit() or k.startswith("error")), tally
    assert tally["429"] > 0, "nothing was shed"
    assert tally["200"] > 0, "nothing was admitted"
    assert tally["retry-after"] == tally["429"]
    assert tally["overloaded-message"] == tally["429"]
    # Every probe answered; /readyz turned unready while admissions were shed, so the Service would route the
    # API server elsewhere.
    assert set(health) <= {"/livez 200", "/readyz 200", "/readyz 503"}, health
    assert health["/livez 200"] >= 4
    assert health["/readyz 503"] > 0, health
    with flooded_webhook.client() as client:  # admissions recover at once, readiness after its hold
        assert client.post("/mutate-pods", json=fixture_review("follower-pod.json")).status_code == 200
        eventually(
            lambda: client.get("/readyz").status_code == 200, "ready again", READINESS_HOLD_SECONDS * 10
        )
