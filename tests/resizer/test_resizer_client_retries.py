"""The resizer's API client makes exactly one attempt per call: retries belong to the work queue and the
elector, which know the deadlines (urllib3's default retried a timed-out read 3 times: 4x the timeout)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from resizer.kube import build_api_client


@pytest.fixture
def silent_server() -> Iterator[tuple[str, list[socket.socket]]]:
    """Accepts connections and never answers; records every accepted connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            accepted.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


def test_a_timed_out_read_is_not_retried_behind_the_callers_back(
    silent_server: tuple[str, list[socket.socket]],
) -> None:
    url, accepted = silent_server
    api = client.CoreV1Api(build_api_client(None, url, 4, "test"))
    with pytest.raises(Exception, match=r"timed out|MaxRetryError"):
        api.list_namespace(_request_timeout=(1.0, 0.3))
    time.sleep(0.3)  # a retry, if any, would have connected by now
    assert len(accepted) == 1
