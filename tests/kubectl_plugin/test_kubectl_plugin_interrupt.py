"""Ctrl-C ends `kubectl exclusive-placement` with exit 130 and no traceback, at start-up (its first read
still unanswered) and while it watches (a subprocess against a fake API server; each step is polled)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
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


def test_ctrl_c_during_start_up_exits_130_without_a_traceback(fake_api: FakeKubeApi, tmp_path: Path) -> None:
    first_read = fake_api.hold_next()  # never answered: the plugin's first read stays in flight
    process = plugin(kubeconfig_for(fake_api.url, tmp_path / "config"), "status", "--watch")
    try:
        eventually(first_read.arrived.is_set, "the plugin's first request reached the API server")
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
