"""A fake Kubernetes API server that serves Secrets only: enough for Helm's `lookup` during a render."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SECRETS_DISCOVERY = {
    "kind": "APIResourceList",
    "groupVersion": "v1",
    "resources": [
        {
            "name": "secrets",
            "singularName": "secret",
            "namespaced": True,
            "kind": "Secret",
            "verbs": ["get", "list"],
        }
    ],
}


class FakeSecretsApi:
    """Secrets keyed by (namespace, name); every GET path is recorded in `requests`."""

    def __init__(self) -> None:
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[str] = []

    def answer(self, path: str) -> tuple[int, dict[str, Any]]:
        self.requests.append(path)
        parts = path.split("?", 1)[0].strip("/").split("/")
        if parts == ["api", "v1"]:
            return 200, SECRETS_DISCOVERY
        if len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "secrets":
            secret = self.secrets.get((parts[3], parts[5]))
            if secret is not None:
                return 200, secret
        return 404, {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "reason": "NotFound",
            "code": 404,
        }


@contextmanager
def serve(api: FakeSecretsApi) -> Iterator[str]:
    """Serve `api` on a free localhost port; yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = api.answer(self.path)
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
