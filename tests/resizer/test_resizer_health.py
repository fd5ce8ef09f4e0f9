"""The resizer's health server: a client that leaves while being answered is one line, not a traceback."""

from __future__ import annotations

import logging
import socket
import struct

import httpx
import pytest
from prometheus_client import CollectorRegistry

from resizer.health import HealthServer
from tests.support.waiting import eventually


def test_a_client_that_resets_its_connection_leaves_no_traceback(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    server = HealthServer("127.0.0.1", 0, CollectorRegistry(), lambda: (True, "ok"), lambda: (True, "leader"))
    server.start()
    try:
        with caplog.at_level(logging.DEBUG, logger="resizer.health"):
            with socket.create_connection(("127.0.0.1", server.port)) as client:
                # Headers left unfinished: the server is reading when the reset comes. A whole request may
                # be answered first and then read as a clean EOF (29 of 500 tries on this machine).
                client.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n")
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
            eventually(
                lambda: [r for r in caplog.records if r.name == "resizer.health"],
                "the failed request logged",
                10,
            )
            assert httpx.get(f"http://127.0.0.1:{server.port}/readyz", timeout=5).text == "leader\n"
    finally:
        server.stop()
    (record,) = [r for r in caplog.records if r.name == "resizer.health"]
    assert record.getMessage().startswith("health request from 127.0.0.1 failed: ")
    assert "Traceback" not in capsys.readouterr().err
