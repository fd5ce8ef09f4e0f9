"""Ctrl-C ends `kubectl exclusive-placement` with exit 130 and no traceback, at start-up (its first read
still unanswered) and while it watches (a subprocess against a fake API server; each step is polled)."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.fake_api import FakeKubeApi
from tests.support.waiting import eventually

INTERRUPTED = 130
EXIT_SECONDS = 30


def kubeconfig_for(url: str, path: Path) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": url}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "default"}}],
                "current-context": "x",
            }
        )
    )
    return path


class SilentServer:
    """Accepts connections and never answers: the plugin's first read stays in flight."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.accepted = threading.Event()
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._socket.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self._held.append(connection)
            self.accepted.set()

    def close(self) -> None:
        self._socket.close()
        for connection in self._held:
            connection.close()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


def plugin(kubeconfig: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kubectl_plugin", *args],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def interrupted(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=EXIT_SECONDS)
    return process.returncode, err


def test_ctrl_c_during_start_up_exits_130_without_a_traceback(silent: SilentServer, tmp_path: Path) -> None:
    process = plugin(kubeconfig_for(silent.url, tmp_path / "config"), "status", "--watch")
    try:
        eventually(silent.accepted.is_set, "the plugin's first request reached the API server")
        assert interrupted(process) == (INTERRUPTED, "")
    finally:
        process.kill()
        process.wait(EXIT_SECONDS)


def next_line(lines: queue.Queue[str]) -> str | None:
    try:
        return lines.get_nowait()
    except queue.Empty:
        return None


@pytest.mark.parametrize("attempt", range(3))
def test_ctrl_c_while_watching_exits_130_without_a_traceback(attempt: int, tmp_path: Path) -> None:
    with FakeKubeApi() as api:
        process = plugin(kubeconfig_for(api.url, tmp_path / "config"), "status", "-A", "-o", "json", "-w")
        lines: queue.Queue[str] = queue.Queue()

        def read() -> None:
            for line in process.stdout or ():
                lines.put(line)

        threading.Thread(target=read, daemon=True).start()
        try:
            eventually(lambda: next_line(lines), "the first document")
            eventually(lambda: api.requests["watch"] >= 3, "the informers watching")  # nodes, pods, Jobs
            assert interrupted(process) == (INTERRUPTED, "")
        finally:
            process.kill()
            process.wait(EXIT_SECONDS)
