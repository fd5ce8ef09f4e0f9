"""Real HTTP for the resizer's integration tests: kubesim in-process, resizers as real subprocesses.

Each resizer gets a free metrics port and its own session; every process is stopped (group-wide) when
the test ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.resizer_latency import shrunk_job
from devstack.ports import free_port
from kubesim.testing import KubesimServer
from placement.constants import RESIZE_LABEL
from tests.support.waiting import eventually


class Process:
    def __init__(self, argv: list[str], log_path: Path) -> None:
        self.argv = argv
        self.log_path = log_path
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=os.getcwd()
            )

    def signal(self, signum: int) -> None:
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signum)

    def stop(self, timeout: float = 10.0) -> int | None:
        if self.popen is None:
            return None
        self.signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            return self.popen.wait(timeout)

    def kill(self) -> None:
        if self.popen is not None:
            self.signal(signal.SIGKILL)
            self.popen.wait(10)

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class Kubesim:
    """`kubesim.testing.KubesimServer` (in-process, real HTTP) plus API helpers for the tests."""

    def __init__(self, **options: Any) -> None:
        self.server = KubesimServer(**options)
        self.url = ""
        self.client = httpx.Client(timeout=10)

    def start(self) -> None:
        self.server.start()
        self.url = self.server.url
        self.client = httpx.Client(base_url=self.url, timeout=10)

    def stop(self) -> None:
        self.client.close()
        self.server.stop()

    # --- API helpers that ride out injected 429/5xx (faults apply to the test's requests too)
    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        for _ in range(50):
            response = self.client.request(method, path, **kwargs)
            if response.status_code not in (429, 500, 502, 503, 504):
                response.raise_for_status()
                return response.json()
            time.sleep(0.05)
        raise AssertionError(f"{method} {path}: still failing after retries")

    def stats(self) -> dict[str, Any]:
        return self.server.stats()

    def jobs(self, namespace: str = "default") -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs")[
            "items"
        ]
        return items

    def pods(self, namespace: str = "default") -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
        return items

    def create_shrunk_job(self, name: str, target: int, namespace: str = "default") -> dict[str, Any]:
        created: dict[str, Any] = self.request(
            "POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", json=shrunk_job(name, target, cpu="100m")
        )
        return created


def resized(job: dict[str, Any], target: int) -> bool:
    spec, labels = job["spec"], job["metadata"].get("labels") or {}
    return (
        spec.get("completions") == target
        and spec.get("parallelism") == target
        and labels.get(RESIZE_LABEL) == "done"
    )


class Resizer:
    def __init__(self, workdir: Path, server: str, name: str, *flags: str) -> None:
        self.port = free_port()
        self.name = name
        target = ["--server", server] if server else []  # "": the flags name a kubeconfig instead
        self.process = Process(
            [
                sys.executable,
                "-m",
                "resizer",
                *target,
                "--metrics-host",
                "127.0.0.1",
                "--metrics-port",
                str(self.port),
                "--identity",
                name,
                *flags,
            ],
            workdir / f"{name}.log",
        )

    def start(self, timeout: float = 60) -> None:
        self.process.start()
        eventually(self.ready, f"{self.name} /readyz", timeout, ignoring=(httpx.HTTPError,))

    def ready(self) -> bool:
        if self.process.popen is not None and self.process.popen.poll() is not None:
            raise AssertionError(f"{self.name} exited:\n{self.process.log[-3000:]}")
        return httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=2).status_code == 200

    def metric(self, name: str) -> float:
        text = httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text
        full = f"exclusive_placement_resizer_{name}"
        # Summed over every label combination of the series.
        return sum(
            float(line.split()[-1])
            for line in text.splitlines()
            if line.startswith((f"{full} ", f"{full}{{"))
        )


@contextlib.contextmanager
def kubesim(**options: Any) -> Iterator[Kubesim]:
    sim = Kubesim(**options)
    try:
        sim.start()
        yield sim
    finally:
        sim.stop()


@contextlib.contextmanager
def resizers(workdir: Path, server: str, count: int, *flags: str) -> Iterator[list[Resizer]]:
    started: list[Resizer] = []
    try:
        for index in range(count):
            resizer = Resizer(workdir, server, f"resizer-{index}", *flags)
            started.append(resizer)
            resizer.start()
        yield started
    finally:
        for resizer in started:
            resizer.process.stop()
