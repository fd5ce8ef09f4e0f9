"""uvicorn's httptools protocol with a request-header timeout (slowloris defence).

uvicorn bounds idle keep-alive connections but not a connection that trickles its request line and
headers: one that never completes them would hold a socket forever. This subclass arms a timer when a
connection opens and when each new request begins, and cancels it once the headers are complete; on expiry
it answers 408 and closes. (Slow bodies are bounded in the app, `webhook.limits`.)
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)

DEFAULT_HEADER_TIMEOUT_SECONDS = 10.0
_TIMEOUT_BODY = b'{"error": "request headers not received in time"}'
_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s" % (len(_TIMEOUT_BODY), _TIMEOUT_BODY)
)


def header_timeout_protocol(seconds: float = DEFAULT_HEADER_TIMEOUT_SECONDS) -> type[HttpToolsProtocol]:
    """The protocol class to give uvicorn as `http=`."""
    if seconds <= 0:
        raise ValueError(f"header timeout must be > 0 seconds, got {seconds}")

    class HeaderTimeoutProtocol(HttpToolsProtocol):
        header_timeout = seconds

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._header_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                log.warning("closing a connection that sent no complete request headers in %ss", seconds)
                self.transport.write(_TIMEOUT_RESPONSE)
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            # Between requests uvicorn's keep-alive timer bounds the idle connection.
            self._disarm()
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderTimeoutProtocol
