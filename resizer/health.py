"""`/livez`, `/readyz` and `/metrics` on one small threaded HTTP server."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

Probe = Callable[[], tuple[bool, str]]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line, not socketserver's traceback on stderr: a probe that gave up and closed its connection
        while being answered is the client's business."""
        error = sys.exc_info()[1]
        level = logging.DEBUG if isinstance(error, ConnectionError | TimeoutError) else logging.WARNING
        log.log(level, "health request from %s failed: %r", client_address[0], error)


class HealthServer:
    def __init__(
        self, host: str, port: int, registry: CollectorRegistry, livez: Probe, readyz: Probe
    ) -> None:
        probes = {"/livez": livez, "/readyz": readyz}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._reply(200, generate_latest(registry), CONTENT_TYPE_LATEST)
                elif path in probes:
                    ok, detail = probes[path]()
                    self._reply(200 if ok else 503, f"{detail}\n".encode(), "text/plain; charset=utf-8")
                else:
                    self._reply(404, b"not found\n", "text/plain; charset=utf-8")

            def _reply(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return None  # probes every few seconds would drown the useful lines

        self._server = _Server((host, port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="health-http", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
