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
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.cli import DEFAULT_OUT, Load, add_load_arguments, benchmark_parser, load_from, write_result
from bench.measures import histogram_buckets, histogram_quantile, nearest_rank
from bench.probes import ResizeWatch, RssSampler, wait_until
from devstack.commands import LOCAL_HOST, resizer_command
from devstack.ports import free_port
from devstack.processes import ManagedProcess
from devstack.readiness import wait_http_ok
from kubesim.testing import KubesimProcess
from placement.admission import mutate_job
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    ROLE_LABEL,
    ROLE_LEADER,
    Strategy,
)
from placement.patch import apply

TARGET_P99_SECONDS = 0.250
TARGET_RSS_MB = 150.0
POOL_LABEL = GKE_NODEPOOL_LABEL
NAMESPACE = "default"
RESIZER_HISTOGRAM = "exclusive_placement_resizer_bind_to_resize_seconds"
FULL = Load(nodes=64, pools=8, jobs=1000, rate=20.0, timeout=300.0)
QUICK = Load(nodes=64, pools=8, jobs=40, rate=40.0, timeout=300.0)


@dataclass(frozen=True)
class Options:
    jobs: int = FULL.jobs
    target: int = 2
    """Size each Job is restored to (followers add scheduler/kubelet load, not resizer load)."""
    rate: float = FULL.rate
    """Jobs created per second."""
    time_scale: float = 1.0
    nodes: int = FULL.nodes
    pools: int = FULL.pools
    concurrency: int = 4
    timeout: float = FULL.timeout
    out: Path = DEFAULT_OUT
    quick: bool = False


def shrunk_job(name: str, target: int, cpu: str = "10m") -> dict[str, Any]:
    """A Job as the webhook leaves it (elastic): an exclusive Indexed Job of `target` (>= 2) pods through
    the Job webhook's own mutation: 1/1, its target recorded on it and on its pod template, `resize: pending`.

    Without the webhook in the loop, the template labels every pod `role: leader`; the resizer only uses
    completion index 0 as the leader."""
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: POOL_LABEL}},
        "spec": {
            "completionMode": "Indexed",
            "completions": target,
            "parallelism": target,
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
    shrunk: dict[str, Any] = apply(job, mutate_job(job, Strategy.ELASTIC, namespace=NAMESPACE).patch)
    return shrunk


@contextlib.contextmanager
def resizer_process(server: str, concurrency: int, workdir: Path) -> Iterator[tuple[ManagedProcess, str]]:
    """One resizer (no election) against `server`, as devstack starts it; with its /metrics URL."""
    port = free_port()
    resizer = ManagedProcess(
        "resizer",
        resizer_command(
            server=server,
            metrics_port=port,
            leader_elect=False,
            extra_args=["--concurrency", str(concurrency)],
        ),
        workdir / "resizer.log",
    )
    try:
        resizer.start()
        wait_http_ok(resizer, f"http://{LOCAL_HOST}:{port}/readyz", 60)
        yield resizer, f"http://{LOCAL_HOST}:{port}/metrics"
    finally:
        resizer.stop()


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
    latencies: list[float],
    resized: int,
    rss: list[float],
    metrics_text: str,
    stats: dict[str, Any],
    elapsed: float,
    cpu_seconds: float = 0.0,
) -> dict[str, Any]:
    histogram = histogram_buckets(metrics_text, RESIZER_HISTOGRAM)
    p99 = nearest_rank(latencies, 0.99)
    rss_max = max(rss, default=None)
    return {
        "benchmark": "resizer",
        "options": {**asdict(options), "out": str(options.out)},
        "jobs_created": options.jobs,
        "jobs_resized": resized,
        "elapsed_seconds": round(elapsed, 2),
        "bind_to_resize_seconds": {
            "observed_from": "a client watch: leader first seen bound -> Job first seen resize=done",
            "count": len(latencies),
            "p50": nearest_rank(latencies, 0.5),
            "p90": nearest_rank(latencies, 0.9),
            "p99": p99,
            "max": max(latencies, default=None),
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
            "jobs": FULL.jobs,
        },
        "met": {
            "p99": p99 is not None and p99 < TARGET_P99_SECONDS,
            "rss": rss_max is not None and rss_max < TARGET_RSS_MB,
            "all_resized": resized == options.jobs,
        },
    }


def run(options: Options) -> dict[str, Any]:
    names = [f"bench-{index:05d}" for index in range(options.jobs)]
    with (
        tempfile.TemporaryDirectory(prefix="bench-resizer-") as tmp,
        KubesimProcess(
            nodes=options.nodes,
            pools=options.pools,
            time_scale=options.time_scale,
            seed=1,
            log_path=Path(tmp) / "kubesim.log",
        ) as sim,
        resizer_process(sim.url, options.concurrency, Path(tmp)) as (resizer, metrics_url),
        ResizeWatch(sim.url, NAMESPACE) as watch,
    ):
        assert resizer.pid is not None
        sampler = RssSampler(resizer.pid)
        sampler.start()
        cpu_before = sampler.cpu_seconds() or 0.0
        started = time.monotonic()
        create_jobs(sim.url, names, options.target, options.rate)
        wait_until(lambda: watch.all_resized(names), started + options.timeout - time.monotonic(), 0.1)
        elapsed = time.monotonic() - started
        cpu = (sampler.cpu_seconds() or 0.0) - cpu_before
        sampler.stop.set()
        metrics_text = httpx.get(metrics_url, timeout=10).text
        stats = sim.stats()
    return summarize(
        options,
        latencies=watch.latencies(names),
        resized=watch.resized(names),
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
    parser = benchmark_parser("python -m bench resizer", __doc__, "resizer.json")
    add_load_arguments(parser, FULL, QUICK)
    defaults = Options()
    parser.add_argument("--target", type=int, default=defaults.target, help="size each Job is restored to")
    parser.add_argument(
        "--time-scale", type=float, default=None, help="kubesim time scale (default 1; quick: 0.1)"
    )
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency, help="resizer --concurrency")
    return parser


def options_from(argv: list[str] | None) -> Options:
    parser = build_parser()
    args = parser.parse_args(argv)
    load = load_from(parser, args, FULL, QUICK)
    time_scale = args.time_scale or (0.1 if args.quick else 1.0)
    if time_scale <= 0 or args.target < 1 or args.concurrency < 1:
        parser.error("--time-scale, --target and --concurrency must be positive")
    return Options(
        jobs=load.jobs,
        target=args.target,
        rate=load.rate,
        time_scale=time_scale,
        nodes=load.nodes,
        pools=load.pools,
        concurrency=args.concurrency,
        timeout=load.timeout,
        out=args.out,
        quick=args.quick,
    )


def main(argv: list[str] | None = None) -> int:
    options = options_from(argv)
    result = run(options)
    return write_result(result, options.out, "resizer.json", format_summary(result))


if __name__ == "__main__":
    sys.exit(main())
