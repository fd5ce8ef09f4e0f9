"""A stand-in server stays silent when its client hangs up, and still reports its own failures."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from tests.support.quiet_server import QuietHTTPServer


class Failing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        raise {"/hung-up": BrokenPipeError(32, "Broken pipe"), "/bug": ValueError("a bug")}[self.path]

    def log_message(self, *_: object) -> None:
        return None


@pytest.fixture
def server() -> Iterator[QuietHTTPServer]:
    server = QuietHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def get_until_closed(server: QuietHTTPServer, path: str) -> bytes:
    """socketserver reports a request's error before it closes the connection: EOF means it was reported."""
    with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10) as connection:
        connection.sendall(f"GET {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
        received = b""
        while chunk := connection.recv(4096):
            received += chunk
        return received


def test_a_client_hanging_up_prints_nothing(
    server: QuietHTTPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert get_until_closed(server, "/hung-up") == b""
    assert capsys.readouterr().err == ""


def test_any_other_error_is_still_reported(
    server: QuietHTTPServer, capsys: pytest.CaptureFixture[str]
) -> None:
    get_until_closed(server, "/bug")
    err = capsys.readouterr().err
    assert "ValueError: a bug" in err
    assert "Exception occurred during processing of request" in err
