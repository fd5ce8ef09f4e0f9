"""A live lookup makes exactly one attempt: urllib3's default retried a timed-out read 3 times, which
would stretch it to 4x its timeout, past the API server's admission timeout."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from webhook.kube import KubeLiveApi, api_client
from webhook.settings import Settings


@pytest.fixture
def silent_server() -> Iterator[tuple[str, list[socket.socket]]]:
    """Accepts connections and never answers; records every accepted connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


def test_a_timed_out_live_lookup_is_not_retried(silent_server: tuple[str, list[socket.socket]]) -> None:
    url, accepted = silent_server
    live = KubeLiveApi(api_client(Settings(insecure_dev=True, server=url)), request_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(Exception, match=r"timed out|MaxRetryError"):
        live.list_leaders("team-a", "trainer")
    assert time.monotonic() - started < 1.0
    time.sleep(0.3)  # a retry, if any, would have connected by now
    assert len(accepted) == 1
