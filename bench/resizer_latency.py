"""Bind-to-resize latency and resizer RSS while N Jobs go through kubesim (`python -m bench resizer`).

Setup: kubesim as a subprocess, the resizer as a subprocess (`python -m resizer --server ...`), and this
process creating Jobs as the webhook leaves them (1/1, target recorded, `resize: pending`) at a steady
rate. The latency is measured from the outside: one watch on leader pods records when each leader is first
seen bound, one watch on Jobs records when each Job is first seen `resize: done`; both go through the same
path, so the figure is what a client of the cluster observes (the resizer's own histogram, from observing
the bind to the patch being acknowledged, is reported next to it). RSS is sampled from /proc.

Targets (issue 4): p99 < 250 ms at time-scale 1 and RSS < 150 MB with 1,000 Jobs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.paths import SCRATCH
from kubesim.testing import KubesimProcess
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    RESIZE_DONE,
    RESIZE_LABEL,
    RESIZE_PENDING,
    ROLE_LABEL,
    ROLE_LEADER,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
)

DEFAULT_OUT = SCRATCH
TARGET_P99_SECONDS = 0.250
TARGET_RSS_MB = 150.0
POOL_LABEL = GKE_NODEPOOL_LABEL
NAMESPACE = "default"


@dataclass(frozen=True)
class Options:
    jobs: int = 1000
    target: int = 2
    """Size each Job is restored to (followers add scheduler/kubelet load, not resizer load)."""
    rate: float = 20.0
    """Jobs created per second."""
    time_scale: float = 1.0
    nodes: int = 64
    pools: int = 8
    concurrency: int = 4
    timeout: float = 300.0
    out: Path = DEFAULT_OUT
    quick: bool = False


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile (0 < fraction <= 1) of a non-empty list."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def histogram_quantile(buckets: list[tuple[float, float]], fraction: float) -> float | None:
    """Prometheus-style quantile from cumulative (upper bound, count) buckets, linear within a bucket."""
    if not buckets or buckets[-1][1] == 0:
        return None
    rank = fraction * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            share = (rank - lower_count) / (count - lower_count) if count > lower_count else 0.0
            return lower_bound + (bound - lower_bound) * share
        lower_bound, lower_count = bound, count
    return lower_bound


def parse_histogram(metrics_text: str, name: str) -> list[tuple[float, float]]:
    buckets: list[tuple[float, float]] = []
    prefix = f'{name}_bucket{{le="'
    for line in metrics_text.splitlines():
        if line.startswith(prefix):
            bound = line[len(prefix) : line.index('"', len(prefix))]
            buckets.append((float(bound), float(line.rsplit(" ", 1)[1])))
    return sorted(buckets)


def shrunk_job(name: str, target: int, cpu: str = "10m") -> dict[str, Any]:
    """A Job as the webhook leaves it (elastic): 1/1, target recorded, `resize: pending`.

    Without the webhook in the loop, the template labels every pod `role: leader`; the resizer only uses
    completion index 0 as the leader."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {RESIZE_LABEL: RESIZE_PENDING},
            "annotations": {
                TARGET_COMPLETIONS_ANNOTATION: str(target),
                TARGET_PARALLELISM_ANNOTATION: str(target),
                JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: POOL_LABEL,
            },
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": 1,
            "parallelism": 1,
            "template": {
                "metadata": {
                    "labels": {ROLE_LABEL: ROLE_LEADER},
                    "annotations": {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: POOL_LABEL},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
                    ],
                },
            },
        },
    }


class Watcher:
    """First-seen times of a condition per key, from a list+watch over plain HTTP."""

    def __init__(self, url: str, path: str, label_selector: str, seen: dict[str, float], kind: str) -> None:
        self.url, self.path, self.selector, self.seen, self.kind = url, path, label_selector, seen, kind
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"watch-{kind}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _record(self, obj: dict[str, Any], now: float) -> None:
        meta = obj.get("metadata") or {}
        if self.kind == "pods":
            owners = [ref["name"] for ref in meta.get("ownerReferences") or [] if ref.get("kind") == "Job"]
            index = (meta.get("annotations") or {}).get(JOB_COMPLETION_INDEX_ANNOTATION)
            if owners and index == "0" and (obj.get("spec") or {}).get("nodeName"):
                self.seen.setdefault(owners[0], now)
        elif (meta.get("labels") or {}).get(RESIZE_LABEL) == RESIZE_DONE:
            self.seen.setdefault(str(meta.get("name")), now)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=httpx.Timeout(10, read=None)) as client:
            version = ""
            while not self.stop.is_set():
                try:
                    if not version:
                        listed = client.get(self.path, params={"labelSelector": self.selector}).json()
                        now = time.monotonic()
                        for item in listed.get("items") or []:
                            self._record(item, now)
                        version = listed["metadata"]["resourceVersion"]
                    params = {
                        "watch": "true",
                        "resourceVersion": version,
                        "labelSelector": self.selector,
                        "allowWatchBookmarks": "true",
                        "timeoutSeconds": "600",
                    }
                    with client.stream("GET", self.path, params=params) as response:
                        if response.status_code == 410:
                            version = ""
                            continue
                        for line in response.iter_lines():
                            if self.stop.is_set():
                                return
                            if not line:
                                continue
                            event = json.loads(line)
                            obj = event.get("object") or {}
                            if event.get("type") == "ERROR":
                                version = ""
                                break
                            version = (obj.get("metadata") or {}).get("resourceVersion") or version
                            if event.get("type") in ("ADDED", "MODIFIED"):
                                self._record(obj, time.monotonic())
                except (httpx.HTTPError, ValueError, KeyError):
                    time.sleep(0.1)


class RssSampler:
    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid, self.interval = pid, interval
        self.samples: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="rss", daemon=True)

    def read(self) -> float | None:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        except OSError:
            return None
        return None

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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def resizer_process(
    server: str, port: int, concurrency: int, log_path: Path
) -> Iterator[subprocess.Popen[bytes]]:
    argv = [
        sys.executable,
        "-m",
        "resizer",
        "--server",
        server,
        "--no-leader-elect",
        "--metrics-host",
        "127.0.0.1",
        "--metrics-port",
        str(port),
        "--concurrency",
        str(concurrency),
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"resizer exited {process.returncode}: {log_path.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            time.sleep(0.1)
        else:
            raise RuntimeError("resizer not ready within 60 s")
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)


def create_jobs(url: str, names: list[str], target: int, rate: float) -> None:
    """Create the Jobs at `rate` per second (a few in flight at once, each start paced)."""
    start = time.monotonic()

    def create(item: tuple[int, str]) -> None:
        index, name = item
        delay = start + index / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        for _ in range(20):
            response = client.post(
                f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", json=shrunk_job(name, target)
            )
            if response.status_code < 500 and response.status_code != 429:
                response.raise_for_status()
                return
            time.sleep(0.05)
        raise RuntimeError(f"could not create Job {name}")

    with httpx.Client(base_url=url, timeout=30) as client, ThreadPoolExecutor(4) as pool:
        list(pool.map(create, enumerate(names)))


def summarize(
    options: Options,
    *,
    bound: dict[str, float],
    done: dict[str, float],
    names: list[str],
    rss: list[float],
    metrics_text: str,
    stats: dict[str, Any],
    elapsed: float,
    cpu_seconds: float = 0.0,
) -> dict[str, Any]:
    latencies = [max(0.0, done[name] - bound[name]) for name in names if name in bound and name in done]
    histogram = parse_histogram(metrics_text, "exclusive_placement_resizer_bind_to_resize_seconds")
    p50 = percentile(latencies, 0.5) if latencies else None
    p99 = percentile(latencies, 0.99) if latencies else None
    rss_max = max(rss) if rss else None
    return {
        "benchmark": "resizer",
        "options": {**asdict(options), "out": str(options.out)},
        "jobs_created": len(names),
        "jobs_resized": sum(1 for name in names if name in done),
        "elapsed_seconds": round(elapsed, 2),
        "bind_to_resize_seconds": {
            "observed_from": "a client watch: leader first seen bound -> Job first seen resize=done",
            "count": len(latencies),
            "p50": p50,
            "p90": percentile(latencies, 0.9) if latencies else None,
            "p99": p99,
            "max": max(latencies) if latencies else None,
        },
        "resizer_histogram_seconds": {
            "observed_from": "inside the resizer: bind observed -> patch acknowledged (bucket-interpolated)",
            "count": histogram[-1][1] if histogram else 0,
            "p50": histogram_quantile(histogram, 0.5),
            "p99": histogram_quantile(histogram, 0.99),
        },
        "resizer_rss_mb": {"max": rss_max, "final": rss[-1] if rss else None, "samples": len(rss)},
        "resizer_cpu_seconds": round(cpu_seconds, 2),
        "kubesim": {
            "jobs_patched": stats.get("jobs", {}).get("patched"),
            "pods_bound": stats.get("pods", {}).get("bound"),
        },
        "targets": {
            "p99_seconds": TARGET_P99_SECONDS,
            "rss_mb": TARGET_RSS_MB,
            "time_scale": 1.0,
            "jobs": 1000,
        },
        "met": {
            "p99": p99 is not None and p99 < TARGET_P99_SECONDS,
            "rss": rss_max is not None and rss_max < TARGET_RSS_MB,
            "all_resized": all(name in done for name in names),
        },
    }


def run(options: Options) -> dict[str, Any]:
    names = [f"bench-{index:05d}" for index in range(options.jobs)]
    bound: dict[str, float] = {}
    done: dict[str, float] = {}
    with (
        tempfile.TemporaryDirectory(prefix="bench-resizer-") as workdir,
        KubesimProcess(
            nodes=options.nodes,
            pools=options.pools,
            time_scale=options.time_scale,
            seed=1,
            log_path=Path(workdir) / "kubesim.log",
        ) as sim,
    ):
        port = _free_port()
        with resizer_process(sim.url, port, options.concurrency, Path(workdir) / "resizer.log") as process:
            watchers = [
                Watcher(
                    sim.url,
                    f"/api/v1/namespaces/{NAMESPACE}/pods",
                    f"{ROLE_LABEL}={ROLE_LEADER}",
                    bound,
                    "pods",
                ),
                # Only Jobs entering `resize: done`: a watch on every Job change made this client, not the
                # resizer, fall a second behind at 50 Jobs/s.
                Watcher(
                    sim.url,
                    f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs",
                    f"{RESIZE_LABEL}={RESIZE_DONE}",
                    done,
                    "jobs",
                ),
            ]
            sampler = RssSampler(process.pid)
            for watcher in watchers:
                watcher.start()
            sampler.start()
            cpu_before = sampler.cpu_seconds() or 0.0
            started = time.monotonic()
            create_jobs(sim.url, names, options.target, options.rate)
            deadline = started + options.timeout
            while time.monotonic() < deadline and not all(name in done for name in names):
                time.sleep(0.1)
            elapsed = time.monotonic() - started
            cpu = (sampler.cpu_seconds() or 0.0) - cpu_before
            metrics_text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
            for watcher in watchers:
                watcher.stop.set()
            sampler.stop.set()
            stats = sim.stats()
    return summarize(
        options,
        bound=bound,
        done=done,
        names=names,
        rss=sampler.samples,
        metrics_text=metrics_text,
        stats=stats,
        elapsed=elapsed,
        cpu_seconds=cpu,
    )


def format_summary(result: dict[str, Any]) -> str:
    latency, inside, rss = (
        result["bind_to_resize_seconds"],
        result["resizer_histogram_seconds"],
        result["resizer_rss_mb"],
    )

    def ms(value: float | None) -> str:
        return "n/a" if value is None else f"{value * 1000:.1f} ms"

    return "\n".join(
        [
            f"resizer benchmark: {result['jobs_resized']}/{result['jobs_created']} Jobs resized in "
            f"{result['elapsed_seconds']} s (time scale {result['options']['time_scale']})",
            f"  bind-to-resize (client view): p50 {ms(latency['p50'])}  p90 {ms(latency['p90'])}  "
            f"p99 {ms(latency['p99'])}  max {ms(latency['max'])}",
            f"  bind-to-resize (resizer histogram): p50 {ms(inside['p50'])}  p99 {ms(inside['p99'])}",
            f"  resizer RSS: max {rss['max'] and round(rss['max'], 1)} MB; "
            f"CPU {result['resizer_cpu_seconds']} s over {result['elapsed_seconds']} s",
            f"  targets met: {result['met']}",
        ]
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench resizer",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    defaults = Options()
    parser.add_argument(
        "--jobs", type=int, default=None, help=f"Jobs to create (default {defaults.jobs}; quick: 40)"
    )
    parser.add_argument("--target", type=int, default=defaults.target, help="size each Job is restored to")
    parser.add_argument(
        "--rate", type=float, default=None, help=f"Jobs created per second (default {defaults.rate})"
    )
    parser.add_argument(
        "--time-scale", type=float, default=None, help="kubesim time scale (default 1; quick: 0.1)"
    )
    parser.add_argument("--nodes", type=int, default=defaults.nodes)
    parser.add_argument("--pools", type=int, default=defaults.pools)
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency, help="resizer --concurrency")
    parser.add_argument(
        "--timeout", type=float, default=defaults.timeout, help="seconds to wait for every resize"
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="directory for resizer.json (default: %(default)s)"
    )
    parser.add_argument("--quick", action="store_true", help="a small run for the test suite")
    return parser


def options_from(argv: list[str] | None) -> Options:
    args = build_parser().parse_args(argv)
    if args.quick:
        jobs, rate, time_scale = args.jobs or 40, args.rate or 40.0, args.time_scale or 0.1
    else:
        jobs, rate, time_scale = args.jobs or 1000, args.rate or 20.0, args.time_scale or 1.0
    if jobs < 1 or rate <= 0 or time_scale <= 0 or args.target < 1:
        raise SystemExit("--jobs, --rate, --time-scale and --target must be positive")
    return Options(
        jobs=jobs,
        target=args.target,
        rate=rate,
        time_scale=time_scale,
        nodes=args.nodes,
        pools=args.pools,
        concurrency=args.concurrency,
        timeout=args.timeout,
        out=args.out,
        quick=args.quick,
    )


def write_result(result: dict[str, Any], out: Path, name: str, summary: str) -> int:
    """Write `result` to out/name, print the summary; exit status 0 when every Job was resized."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(summary)
    print(f"wrote {path}")
    return 0 if result["met"]["all_resized"] else 1


def main(argv: list[str] | None = None) -> int:
    options = options_from(argv)
    result = run(options)
    return write_result(result, options.out, "resizer.json", format_summary(result))


if __name__ == "__main__":
    sys.exit(main())
