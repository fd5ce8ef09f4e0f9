"""Real HTTP for the resizer's integration tests: kubesim in-process, resizers as real subprocesses.

Each resizer gets a free metrics port and its own session; every process is stopped (group-wide) when
the test ends.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.resizer_latency import shrunk_job
from devstack.commands import resizer_command
from devstack.ports import free_port
from devstack.processes import ManagedProcess
from kubesim.testing import KubesimServer
from placement.constants import RESIZE_LABEL
from tests.support.metrics import RESIZER_PREFIX, scraped
from tests.support.waiting import eventually


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


LEASE_NAMESPACE = "default"
"""Where replicas elect their leader: kubesim's default namespace (the release namespace does not exist)."""


class Resizer:
    """`python -m resizer` from devstack's `resizer_command`; `server=None`: the flags name a kubeconfig."""

    def __init__(self, workdir: Path, server: str | None, name: str, *flags: str, leader_elect: bool) -> None:
        self.port = free_port()
        self.name = name
        argv = resizer_command(
            server=server,
            metrics_port=self.port,
            leader_elect=leader_elect,
            lease_namespace=LEASE_NAMESPACE,
            extra_args=["--identity", name, *flags],
        )
        self.process = ManagedProcess(name, argv, workdir / f"{name}.log")

    def start(self, timeout: float = 60) -> None:
        self.process.start()
        eventually(self.ready, f"{self.name} /readyz", timeout, ignoring=(httpx.HTTPError,))

    def ready(self) -> bool:
        self.process.check_alive()
        return httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=2).status_code == 200

    @property
    def log(self) -> str:
        return self.process.log_since_start()

    def metric(self, name: str) -> float:
        """Summed over every label combination of the series."""
        return scraped(f"http://127.0.0.1:{self.port}/metrics", f"{RESIZER_PREFIX}_{name}")


@contextlib.contextmanager
def kubesim(**options: Any) -> Iterator[Kubesim]:
    sim = Kubesim(**options)
    try:
        sim.start()
        yield sim
    finally:
        sim.stop()


@contextlib.contextmanager
def resizers(
    workdir: Path, server: str | None, count: int, *flags: str, leader_elect: bool = True
) -> Iterator[list[Resizer]]:
    started: list[Resizer] = []
    try:
        for index in range(count):
            resizer = Resizer(workdir, server, f"resizer-{index}", *flags, leader_elect=leader_elect)
            started.append(resizer)
            resizer.start()
        yield started
    finally:
        for resizer in started:
            resizer.process.stop()
