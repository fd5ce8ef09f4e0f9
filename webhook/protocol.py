"""uvicorn's httptools protocol with bounded request headers, per connection.

uvicorn bounds idle keep-alive connections (`timeout_keep_alive`) but not a request's line and headers:
its httptools protocol has no size limit (uvicorn's `h11_max_incomplete_event_size` applies to the h11
protocol only) and no time limit. Without them one connection trickling an endless header line held a
growing buffer (and, fed a byte at a time, httptools' concatenation costs quadratic CPU: 4 s for 256 KiB).
This subclass:

- closes a connection that does not complete its request headers within `HeaderLimits.timeout` (408);
  one that has sent no byte of a request by then is closed without an answer, as Go's net/http closes an
  idle connection: the API server's HTTP client keeps connections it dialled but did not use in its idle
  pool, and an unsolicited 408 racing its next request on one was read as that request's answer;
- answers 431 and closes once the request line and headers exceed `HeaderLimits.max_bytes`;
- hands httptools the header bytes in few pieces (buffered until the blank line or 1 KiB), so trickled
  bytes cost no more than sent ones;
- tells the app whether the client presented a verified certificate (`request.state.client_certificate`:
  its subject's common name, None without one), when the server asks for one (`--client-ca-file`);
- calls `on_closed` once when the connection ends, so `webhook.listener` can count it.

Slow bodies are bounded in the app (`webhook.app`, `webhook.limits`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from webhook.metrics import Metrics

log = logging.getLogger(__name__)

DEFAULT_HEADER_TIMEOUT_SECONDS = 10.0
DEFAULT_MAX_HEADER_BYTES = 16 * 1024
"""h11's default (uvicorn's h11 protocol); the API server sends a few hundred bytes."""
CLOSE_GRACE_SECONDS = 0.5
"""After a 408 or 431 the connection is cut this long after the answer was written (Go's net/http waits as
long): a TLS connection merely closed waits for the client's close_notify, decrypting what it still sends."""
FEED_BYTES = 1024
"""Header bytes are handed to httptools once the blank line arrives or this many are buffered."""
_END_OF_HEADERS = (b"\r\n\r\n", b"\n\n")


@dataclass(frozen=True)
class HeaderLimits:
    timeout: float = DEFAULT_HEADER_TIMEOUT_SECONDS
    max_bytes: int = DEFAULT_MAX_HEADER_BYTES

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise ValueError(f"header timeout must be > 0 seconds, got {self.timeout}")
        if self.max_bytes < FEED_BYTES:
            raise ValueError(f"max header bytes must be at least {FEED_BYTES}, got {self.max_bytes}")


def _closing_response(status: bytes, message: str) -> bytes:
    body = f'{{"error": "{message}"}}'.encode()
    head = b"HTTP/1.1 %s\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: %d\r\n\r\n"
    return head % (status, len(body)) + body


def _common_name(certificate: Any) -> str | None:
    """The subject common name of `ssl.SSLObject.getpeercert()`'s answer (None: no verified certificate)."""
    if not isinstance(certificate, dict):
        return None
    for rdn in certificate.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return ""


class GuardedHttpProtocol(HttpToolsProtocol):
    """One client connection (after TLS, when the server has TLS)."""

    def __init__(
        self,
        *args: Any,
        headers: HeaderLimits,
        metrics: Metrics,
        on_closed: Callable[[], None],
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._limits = headers
        self._metrics = metrics
        self._on_closed = on_closed
        self._timer: asyncio.TimerHandle | None = None
        self._awaiting_headers = True
        self._pending = bytearray()
        self._request_started = False
        self._client_certificate: str | None = None

    # --- the connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._client_certificate = _common_name(transport.get_extra_info("peercert"))
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self.transport is not None:  # else the TLS handshake failed: uvicorn never saw the connection
            super().connection_lost(exc)
        self._on_closed()

    def _close(self, status: bytes, message: str, reason: str) -> None:
        self._metrics.connections_closed.labels(reason).inc()
        log.debug("closing a connection from %s: %s", self.client, message)
        if not self.transport.is_closing():
            self.transport.write(_closing_response(status, message))
            self.transport.close()
            self.loop.call_later(CLOSE_GRACE_SECONDS, self.transport.abort)

    # --- request headers: bounded in time and size

    def _arm(self) -> None:
        if self._timer is None:
            self._timer = self.loop.call_later(self._limits.timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _headers_too_slow(self) -> None:
        self._timer = None
        if not self._request_started:
            self._metrics.connections_closed.labels("idle").inc()
            self.transport.close()
            self.loop.call_later(CLOSE_GRACE_SECONDS, self.transport.abort)
            return
        self._close(b"408 Request Timeout", "request headers not received in time", "header-timeout")

    def data_received(self, data: bytes) -> None:
        if not self._awaiting_headers:
            super().data_received(data)
            return
        if not self._pending:
            self._arm()
        self._request_started = True
        self._pending += data
        ends = [end for end in (self._pending.find(mark) for mark in _END_OF_HEADERS) if end >= 0]
        if (min(ends) if ends else len(self._pending)) > self._limits.max_bytes:
            self._pending.clear()
            message = f"request line and headers larger than {self._limits.max_bytes} bytes"
            self._close(b"431 Request Header Fields Too Large", message, "header-too-large")
            return
        if ends or len(self._pending) >= FEED_BYTES:
            pending = bytes(self._pending)
            self._pending.clear()
            super().data_received(pending)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["state"]["client_certificate"] = self._client_certificate

    def on_headers_complete(self) -> None:
        self._awaiting_headers = False
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        # Between requests uvicorn's keep-alive timer bounds the idle connection.
        self._awaiting_headers = True
        self._request_started = False
        super().on_response_complete()
