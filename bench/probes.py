"""What the load benchmarks observe from outside the processes they measure.

- `RssSampler`: a process's RSS (sampled) and CPU time, from /proc.
- `FirstSeen`: when each object first met a condition, from a list + watch over plain HTTP (a client's
  view of the cluster, not the component's).
- `ResizeWatch`: bind -> resize as a client sees it: each leader first seen bound, each Job first seen
  `resize: done`, both on the same path.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from placement.constants import RESIZE_DONE, RESIZE_LABEL, ROLE_LABEL, ROLE_LEADER
from placement.objects import Obj, is_leader, job_ref_of_pod, labels_of, metadata, node_name

WATCH_SECONDS = 600


class RssSampler:
    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid, self.interval = pid, interval
        self.samples: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="rss", daemon=True)

    def read(self) -> float | None:
        """RSS now, in MB; None once the process is gone."""
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        except OSError:
            return None
        return None

    def settled(self, seconds: float = 1.0) -> float | None:
        """RSS after a short pause (the informer threads finish applying what they just received)."""
        self.stop.wait(seconds)
        return self.read()

    def cpu_seconds(self) -> float | None:
        """utime + stime of the process so far."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            value = self.read()
            if value is not None:
                self.samples.append(value)

    def start(self) -> None:
        self.thread.start()


class FirstSeen:
    """First-seen times (monotonic) by key, of the objects on `path` for which `key_of` gives a key."""

    def __init__(
        self,
        url: str,
        path: str,
        label_selector: str,
        key_of: Callable[[Obj], str | None],
        name: str,
        *,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.url, self.path, self.selector, self.key_of = url, path, label_selector, key_of
        self.client_options = dict(client_options or {})
        """More `httpx.Client` arguments: the credentials of a real API server (`verify`, `headers`)."""
        self.seen: dict[str, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"watch-{name}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _record(self, obj: Obj, now: float) -> None:
        key = self.key_of(obj)
        if key is not None:
            self.seen.setdefault(key, now)

    def _run(self) -> None:
        timeout = httpx.Timeout(10, read=None)
        with httpx.Client(base_url=self.url, timeout=timeout, **self.client_options) as client:
            version = ""
            while not self.stop.is_set():
                try:
                    version = version or self._list(client)
                    version = self._follow(client, version)
                except (httpx.HTTPError, ValueError, KeyError):
                    self.stop.wait(0.1)

    def _list(self, client: httpx.Client) -> str:
        listed = client.get(self.path, params={"labelSelector": self.selector}).json()
        now = time.monotonic()
        for item in listed.get("items") or []:
            self._record(item, now)
        return str(listed["metadata"]["resourceVersion"])

    def _follow(self, client: httpx.Client, version: str) -> str:
        """Follow one watch from `version`; the version to go on from ("" to list again)."""
        params = {
            "watch": "true",
            "resourceVersion": version,
            "labelSelector": self.selector,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        with client.stream("GET", self.path, params=params) as response:
            if response.status_code == 410:
                return ""
            for line in response.iter_lines():
                if self.stop.is_set():
                    break
                if not line:
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    return ""
                version = str(metadata(obj).get("resourceVersion") or version)
                if event.get("type") in ("ADDED", "MODIFIED"):
                    self._record(obj, time.monotonic())
        return version


def bound_leader_job(pod: Obj) -> str | None:
    """The name of the Job whose leader `pod` is, once it is bound."""
    owner = job_ref_of_pod(pod)
    return owner.name if owner is not None and is_leader(pod) and node_name(pod) else None


def resized_job(job: Obj) -> str | None:
    """The Job's name once it is `resize: done`."""
    return str(metadata(job).get("name")) if labels_of(job).get(RESIZE_LABEL) == RESIZE_DONE else None


class ResizeWatch:
    """Bind -> resize of the Jobs in `namespace`, as a client watching the API server sees it."""

    def __init__(self, url: str, namespace: str, client_options: Mapping[str, Any] | None = None) -> None:
        self.bound = FirstSeen(
            url,
            f"/api/v1/namespaces/{namespace}/pods",
            f"{ROLE_LABEL}={ROLE_LEADER}",
            bound_leader_job,
            "pods",
            client_options=client_options,
        )
        # Only the Jobs entering `resize: done` (one event each): a watch on every Job change made this
        # client, not the resizer, fall a second behind at 50 Jobs/s.
        self.done = FirstSeen(
            url,
            f"/apis/batch/v1/namespaces/{namespace}/jobs",
            f"{RESIZE_LABEL}={RESIZE_DONE}",
            resized_job,
            "jobs",
            client_options=client_options,
        )

    def __enter__(self) -> Self:
        self.bound.start()
        self.done.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.bound.stop.set()
        self.done.stop.set()

    def resized(self, names: Iterable[str]) -> int:
        return sum(1 for name in names if name in self.done.seen)

    def all_resized(self, names: Iterable[str]) -> bool:
        return all(name in self.done.seen for name in names)

    def latencies(self, names: Iterable[str]) -> list[float]:
        """Seconds from each Job's leader first seen bound to the Job first seen resized."""
        bound, done = self.bound.seen, self.done.seen
        return [max(0.0, done[name] - bound[name]) for name in names if name in bound and name in done]


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.2) -> bool:
    """Poll `condition` until it holds or `timeout` s pass; whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()
