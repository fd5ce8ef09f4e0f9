"""An HTTP server for test stand-ins that treats a client hanging up as the client's business."""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer
from typing import Any


class QuietHTTPServer(ThreadingHTTPServer):
    """socketserver prints a traceback on stderr for every request whose client closed its connection before
    the answer was written (a watch the informer abandoned, kube-apiserver giving up on a slow webhook). For a
    stand-in that is expected, so only other errors keep the default report."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)
