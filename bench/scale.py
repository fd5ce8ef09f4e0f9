"""Footprint and latency at the scale JobSet targets (`python -m bench scale`, issue 16).

Three phases, every component a real process started as devstack starts it (`devstack.Stack`: kubesim,
the webhook over TLS registered through the chart's webhook configurations, one resizer):

1. `load` on the large cluster (default 15,000 nodes in 2,500 node pools): a webhook idle after its caches
   synced gives the footprint of the nodes; then 2,000 exclusive Jobs (`elastic`, 2 pods of 8 GPUs each)
   arrive at a steady rate (default 50/s). Measured: webhook and resizer RSS (sampled from /proc), the
   webhook's own admission latency (its histogram, every endpoint), the client-observed latency of Job
   creation (an API call that goes through the mutating webhook), bind -> resize (a client watch: leader
   first seen bound -> Job first seen `resize: done`, as `python -m bench resizer` measures it), and the
   Jobs resized per second.
2. `baseline`: the same on a small cluster (600 nodes), so that admission latency at scale is read next to
   the small cluster's, in one run.
3. `footprint`: kubesim without controllers, a webhook and a resizer; N Jobs marked `resize: pending` with
   bound leader pods are created in batches up to 5,000, and both RSS are read once each batch is
   cached (webhook) and resized (resizer). A third cluster size (default 7,500 nodes) gives a third node
   count for the webhook's RSS-per-node regression.

Memory per object is the least-squares slope over the sizes: MB per 1,000 nodes (webhook idle RSS at
three node counts) and MB per 1,000 Jobs (webhook and resizer RSS at three Job counts).

Targets: webhook RSS < 150 MB with 15,000 nodes and 2,000 leader pods cached; resizer RSS < 200 MB with
5,000 Jobs; bind -> resize p99 < 250 ms at 50 Jobs/s; admission p99 as on the small cluster.
`--quick` is a small run for the test suite (figures reported, nothing asserted on them).
"""

from __future__ import annotations

import argparse
import contextlib
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from bench.cli import DEFAULT_OUT, Load, add_load_arguments, benchmark_parser, load_from, write_result
from bench.measures import (
    histogram_buckets,
    histogram_quantile,
    metric_value,
    nearest_rank,
    per_thousand,
)
from bench.probes import ResizeWatch, RssSampler, wait_until
from bench.resizer_latency import shrunk_job
from devstack.commands import (
    LOCAL_HOST,
    KubesimFlags,
    certs_command,
    resizer_command,
    webhook_command,
)
from devstack.ports import free_port
from devstack.processes import ManagedProcess
from devstack.readiness import wait_http_ok
from devstack.stack import Stack, StackOptions
from kubesim.testing import KubesimProcess
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_NAME_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    ROLE_LABEL,
    ROLE_LEADER,
    TOPOLOGY_ANNOTATION,
)

NAMESPACE = "default"
ADMISSION_HISTOGRAM = "exclusive_placement_admission_duration_seconds"
RESIZER_HISTOGRAM = "exclusive_placement_resizer_bind_to_resize_seconds"
TARGETS = {
    "webhook_rss_mb": 150.0,
    "resizer_rss_mb": 200.0,
    "resizer_jobs": 5000,
    "bind_to_resize_p99_ms": 250.0,
    "jobs_per_second": 50.0,
}
KUBESIM_TUNING = (
    # A cluster of 15,000 nodes runs its controllers with client QPS well above the defaults (20 for the
    # kube-controller-manager, 50 for the scheduler); at kubesim's defaults the Job controller alone caps
    # the cluster near 5 Jobs/s, which is not what this benchmark measures.
    "--job-controller-api-qps",
    "500",
    "--job-controller-api-burst",
    "1000",
    "--scheduler-api-qps",
    "500",
    "--scheduler-api-burst",
    "1000",
    "--watch-history",
    "50000",
    "--log-level",
    "WARNING",
)


@dataclass(frozen=True)
class Cluster:
    nodes: int
    pools: int
    jobs: int


@dataclass(frozen=True)
class Options:
    large: Cluster = Cluster(nodes=15_000, pools=2_500, jobs=2_000)
    small: Cluster | None = Cluster(nodes=600, pools=300, jobs=250)
    middle_nodes: int | None = 7_500
    footprint_jobs: tuple[int, ...] = (1_000, 3_000, 5_000)
    rate: float = 50.0
    target: int = 2
    gpus_per_pod: int = 8
    time_scale: float = 1.0
    timeout: float = 600.0
    out: Path = DEFAULT_OUT
    quick: bool = False


QUICK = Options(
    large=Cluster(nodes=200, pools=50, jobs=30),
    small=None,
    middle_nodes=None,
    footprint_jobs=(40, 80),
    rate=20.0,
    time_scale=0.2,
    timeout=60.0,
    quick=True,
)


def mb(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 2)


def load_of(options: Options) -> Load:
    """The command line's view of `options` (`bench.cli`)."""
    large = options.large
    return Load(
        nodes=large.nodes, pools=large.pools, jobs=large.jobs, rate=options.rate, timeout=options.timeout
    )


# --- manifests -------------------------------------------------------------------------------------------


def exclusive_job(name: str, target: int, gpus: int) -> dict[str, Any]:
    """A user's exclusive Indexed Job: `target` pods of `gpus` GPUs in one node pool (the webhook's
    default strategy, `elastic`, shrinks it to its leader and the resizer restores it)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": {TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL}},
        "spec": {
            "completionMode": "Indexed",
            "completions": target,
            "parallelism": target,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                        }
                    ],
                }
            },
        },
    }


def bound_leader(job: dict[str, Any], node: str) -> dict[str, Any]:
    """The leader pod of `job` (as created by the Job controller, labelled by the webhook), bound."""
    meta = job["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-0-lead",
            "labels": {ROLE_LABEL: ROLE_LEADER, JOB_NAME_LABEL: meta["name"]},
            "annotations": {
                JOB_COMPLETION_INDEX_ANNOTATION: "0",
                TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL,
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "i"}]},
    }


# --- driving the cluster ---------------------------------------------------------------------------------


def post_paced(
    url: str, path: str, bodies: Sequence[dict[str, Any]], rate: float | None, workers: int = 8
) -> tuple[list[dict[str, Any]], list[float]]:
    """POST every body (at `rate` per second, or as fast as `workers` allow when None); returns the
    created objects and each call's latency in seconds. 429/5xx are retried."""
    start = time.monotonic()
    created: list[dict[str, Any]] = [{} for _ in bodies]
    latencies: list[float] = [0.0 for _ in bodies]

    def post(index: int) -> None:
        if rate is not None:
            delay = start + index / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        for _ in range(50):
            began = time.monotonic()
            response = client.post(path, json=bodies[index])
            if response.status_code < 500 and response.status_code != 429:
                response.raise_for_status()
                latencies[index] = time.monotonic() - began
                created[index] = response.json()
                return
            time.sleep(0.05)
        raise RuntimeError(f"could not create {bodies[index]['metadata']['name']}: {response.text[:200]}")

    limits = httpx.Limits(max_connections=workers, max_keepalive_connections=workers)
    with httpx.Client(base_url=url, timeout=60, limits=limits) as client, ThreadPoolExecutor(workers) as pool:
        list(pool.map(post, range(len(bodies))))
    return created, latencies


def stack_options(cluster: Cluster, options: Options, workdir: Path) -> StackOptions:
    return StackOptions(
        cluster=KubesimFlags(
            nodes=cluster.nodes,
            pools=cluster.pools,
            time_scale=options.time_scale,
            seed=1,
        ),
        default_strategy="elastic",
        kubesim_args=KUBESIM_TUNING,
        workdir=workdir,
        startup_timeout=180.0,
    )


def webhook_metrics(stack: Stack) -> str:
    trust = ssl.create_default_context(cafile=str(stack.ca_file))
    return httpx.get(f"{stack.webhook_url}/metrics", verify=trust, timeout=10).text


class ProductRss:
    """RSS (and kubesim's CPU) of the stack's processes while Jobs arrive."""

    def __init__(self, stack: Stack) -> None:
        pids = {
            name: None if process is None else process.pid for name, process in self.processes(stack).items()
        }
        missing = [name for name, pid in pids.items() if pid is None]
        if missing:
            raise RuntimeError(f"the stack runs no {', '.join(missing)}")
        self.samplers = {name: RssSampler(pid) for name, pid in pids.items() if pid is not None}
        self.idle = {
            "webhook": self.samplers["webhook"].settled(),
            "resizer": self.samplers["resizer"].read(),
        }
        self.kubesim_cpu = 0.0

    @staticmethod
    def processes(stack: Stack) -> dict[str, ManagedProcess | None]:
        return {"webhook": stack.webhook, "resizer": stack.resizers[0], "kubesim": stack.kubesim}

    def __enter__(self) -> Self:
        for sampler in self.samplers.values():
            sampler.start()
        self.kubesim_cpu = -(self.samplers["kubesim"].cpu_seconds() or 0.0)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.kubesim_cpu += self.samplers["kubesim"].cpu_seconds() or 0.0
        for sampler in self.samplers.values():
            sampler.stop.set()

    def max(self, name: str) -> float | None:
        return mb(max(self.samplers[name].samples, default=None))


@dataclass(frozen=True)
class Arrivals:
    """How the Jobs went in: each creation's latency (s), and when they were all created and resized."""

    create_latencies: list[float]
    created_in: float
    elapsed: float
    jobs_per_second: float


def arrive(stack: Stack, names: Sequence[str], watch: ResizeWatch, options: Options) -> Arrivals:
    """Create the exclusive Jobs at `options.rate` per second and wait until each is resized."""
    started = time.monotonic()
    jobs = [exclusive_job(name, options.target, options.gpus_per_pod) for name in names]
    _, latencies = post_paced(stack.server, f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", jobs, options.rate)
    created_in = time.monotonic() - started
    wait_until(lambda: watch.all_resized(names), options.timeout)
    elapsed = time.monotonic() - started
    resized = watch.resized(names)
    last_done = max(watch.done.seen.values(), default=started)
    rate = round(resized / max(1e-9, last_done - started), 2) if resized else 0.0
    return Arrivals(latencies, created_in, elapsed, rate)


def admission_fields(webhook_text: str) -> dict[str, Any]:
    buckets = histogram_buckets(webhook_text, ADMISSION_HISTOGRAM)
    return {
        "observed_from": "the webhook's histogram, every endpoint (bucket-interpolated)",
        "count": metric_value(webhook_text, f"{ADMISSION_HISTOGRAM}_count"),
        "p50": ms(histogram_quantile(buckets, 0.5)),
        "p99": ms(histogram_quantile(buckets, 0.99)),
    }


def bind_to_resize_fields(latencies: list[float], resizer_text: str) -> dict[str, Any]:
    return {
        "observed_from": "a client watch: leader first seen bound -> Job first seen resize=done",
        "count": len(latencies),
        "p50": ms(nearest_rank(latencies, 0.5)),
        "p99": ms(nearest_rank(latencies, 0.99)),
        "max": ms(max(latencies, default=None)),
        "resizer_histogram_p99": ms(
            histogram_quantile(histogram_buckets(resizer_text, RESIZER_HISTOGRAM), 0.99)
        ),
    }


def run_load(cluster: Cluster, options: Options, workdir: Path) -> dict[str, Any]:
    """One cluster under a steady arrival of exclusive Jobs (phase 1, and 2 on the small cluster)."""
    names = [f"scale-{index:05d}" for index in range(cluster.jobs)]
    started_stack = time.monotonic()
    with Stack(stack_options(cluster, options, workdir)) as stack:
        stack_seconds = time.monotonic() - started_stack
        with ProductRss(stack) as rss, ResizeWatch(stack.server, NAMESPACE) as watch:
            arrivals = arrive(stack, names, watch, options)
        webhook_text = webhook_metrics(stack)
        resizer_text = "\n".join(stack.resizer_metrics())
        stats = httpx.get(f"{stack.server}/debug/stats", timeout=10).json()
    return {
        "nodes": cluster.nodes,
        "domains": cluster.pools,
        "jobs": cluster.jobs,
        "jobs_resized": watch.resized(names),
        "stack_start_seconds": round(stack_seconds, 1),
        "arrival_rate": options.rate,
        "arrival_seconds": round(arrivals.created_in, 2),
        "elapsed_seconds": round(arrivals.elapsed, 2),
        "jobs_per_second": arrivals.jobs_per_second,
        "webhook_rss_mb": {
            "idle": mb(rss.idle["webhook"]),
            "max": rss.max("webhook"),
            "leaders_cached": metric_value(
                webhook_text, "exclusive_placement_cache_objects", {"kind": "pods"}
            ),
        },
        "resizer_rss_mb": {"idle": mb(rss.idle["resizer"]), "max": rss.max("resizer")},
        "kubesim": {
            "rss_mb_max": rss.max("kubesim"),
            "cpu_seconds": round(rss.kubesim_cpu, 1),
            "cpu_share": round(rss.kubesim_cpu / max(1e-9, arrivals.elapsed), 2),
            "pods_bound": stats.get("pods", {}).get("bound"),
            "admission_calls": stats.get("admission_calls"),
        },
        "admission_ms": admission_fields(webhook_text),
        "job_create_ms": {
            "observed_from": "the client: POST of a Job (through the mutating webhook) to its 201",
            "p50": ms(nearest_rank(arrivals.create_latencies, 0.5)),
            "p99": ms(nearest_rank(arrivals.create_latencies, 0.99)),
        },
        "bind_to_resize_ms": bind_to_resize_fields(watch.latencies(names), resizer_text),
    }


# --- phase 3: footprint per object -----------------------------------------------------------------------


@dataclass(frozen=True)
class Product:
    webhook: ManagedProcess
    resizer: ManagedProcess
    webhook_metrics: str
    resizer_metrics: str
    ca_file: Path

    def cached_leaders(self) -> float:
        trust = ssl.create_default_context(cafile=str(self.ca_file))
        text = httpx.get(self.webhook_metrics, verify=trust, timeout=10).text
        return metric_value(text, "exclusive_placement_cache_objects", {"kind": "pods"})

    def resizes(self) -> float:
        text = httpx.get(self.resizer_metrics, timeout=10).text
        return metric_value(text, "exclusive_placement_resizer_resizes_total")


@contextlib.contextmanager
def product_processes(server: str, workdir: Path) -> Iterator[Product]:
    """The webhook (TLS, not registered: it only caches) and one resizer, pointed at `server`."""
    cert_dir = workdir / "certs"
    subprocess.run(certs_command(cert_dir), check=True, capture_output=True, timeout=60)
    webhook_port, resizer_port = free_port(), free_port()
    webhook = ManagedProcess(
        "webhook",
        webhook_command(port=webhook_port, cert_dir=cert_dir, server=server),
        workdir / "logs" / "webhook.log",
    )
    resizer = ManagedProcess(
        "resizer",
        resizer_command(server=server, metrics_port=resizer_port, leader_elect=False),
        workdir / "logs" / "resizer.log",
    )
    try:
        webhook.start()
        resizer.start()
        wait_http_ok(webhook, f"https://{LOCAL_HOST}:{webhook_port}/readyz", 180, ca_file=cert_dir / "ca.crt")
        wait_http_ok(resizer, f"http://{LOCAL_HOST}:{resizer_port}/readyz", 180)
        yield Product(
            webhook,
            resizer,
            f"https://{LOCAL_HOST}:{webhook_port}/metrics",
            f"http://{LOCAL_HOST}:{resizer_port}/metrics",
            cert_dir / "ca.crt",
        )
    finally:
        resizer.stop()
        webhook.stop()


def idle_webhook_rss(nodes: int, workdir: Path) -> float | None:
    """The webhook's RSS once its caches hold `nodes` nodes and nothing else."""
    with (
        KubesimProcess(nodes=nodes, pools=max(1, nodes // 6), controllers=False, startup_timeout=180) as sim,
        product_processes(sim.url, workdir) as product,
    ):
        assert product.webhook.pid is not None
        return RssSampler(product.webhook.pid).settled(2.0)


def run_footprint(options: Options, workdir: Path) -> dict[str, Any]:
    """Webhook and resizer RSS at growing numbers of live Jobs (bound leaders, each Job resized once)."""
    points: list[dict[str, Any]] = []
    with (
        KubesimProcess(nodes=64, pools=8, controllers=False, startup_timeout=180) as sim,
        product_processes(sim.url, workdir) as product,
    ):
        assert product.webhook.pid is not None
        assert product.resizer.pid is not None
        webhook_rss, resizer_rss = RssSampler(product.webhook.pid), RssSampler(product.resizer.pid)
        node_names = [
            item["metadata"]["name"] for item in httpx.get(f"{sim.url}/api/v1/nodes").json()["items"]
        ]
        created = 0
        for size in options.footprint_jobs:
            names = [f"fp-{index:05d}" for index in range(created, size)]
            jobs, _ = post_paced(
                sim.url,
                f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs",
                [shrunk_job(name, options.target) for name in names],
                None,
            )
            leaders = [
                bound_leader(job, node_names[index % len(node_names)]) for index, job in enumerate(jobs)
            ]
            post_paced(sim.url, f"/api/v1/namespaces/{NAMESPACE}/pods", leaders, None)
            created = size

            def caught_up(count: int = size) -> bool:
                return product.cached_leaders() >= count and product.resizes() >= count

            synced = wait_until(caught_up, options.timeout, interval=0.5)
            points.append(
                {
                    "jobs": size,
                    "caught_up": synced,
                    "webhook_rss_mb": mb(webhook_rss.settled()),
                    "resizer_rss_mb": mb(resizer_rss.read()),
                }
            )
        done = httpx.get(
            f"{sim.url}/apis/batch/v1/namespaces/{NAMESPACE}/jobs",
            params={"labelSelector": f"{RESIZE_LABEL}={RESIZE_DONE}"},
        ).json()
    return {"points": points, "jobs_resized": len(done.get("items") or [])}


# --- the whole benchmark ---------------------------------------------------------------------------------


def node_points(results: dict[str, Any]) -> list[tuple[float, float]]:
    points = []
    for phase in ("baseline", "load"):
        run = results.get(phase)
        if run and run["webhook_rss_mb"]["idle"] is not None:
            points.append((float(run["nodes"]), float(run["webhook_rss_mb"]["idle"])))
    for entry in results.get("middle", []):
        if entry["webhook_rss_mb"] is not None:
            points.append((float(entry["nodes"]), float(entry["webhook_rss_mb"])))
    return sorted(points)


def summarize(options: Options, results: dict[str, Any]) -> dict[str, Any]:
    load, footprint = results["load"], results["footprint"]
    baseline = results.get("baseline")
    job_points = footprint["points"]
    largest = job_points[-1] if job_points else {}
    webhook_max = load["webhook_rss_mb"]["max"]
    resizer_max = max(
        [
            value
            for value in (load["resizer_rss_mb"]["max"], largest.get("resizer_rss_mb"))
            if value is not None
        ],
        default=None,
    )
    p99 = load["bind_to_resize_ms"]["p99"]
    admission = load["admission_ms"]["p99"]
    small_admission = baseline["admission_ms"]["p99"] if baseline else None
    return {
        "benchmark": "scale",
        "options": {**asdict(options), "out": str(options.out)},
        "nodes": load["nodes"],
        "domains": load["domains"],
        "jobs": load["jobs"],
        "jobs_resized": load["jobs_resized"],
        "webhook_rss_mb_max": webhook_max,
        "resizer_rss_mb_max": resizer_max,
        "resizer_rss_mb_at_footprint_jobs": largest.get("resizer_rss_mb"),
        "footprint_jobs": largest.get("jobs"),
        "admission_p99_ms": admission,
        "admission_p99_ms_small_cluster": small_admission,
        "job_create_p99_ms": load["job_create_ms"]["p99"],
        "bind_to_resize_p99_ms": p99,
        "jobs_per_second": load["jobs_per_second"],
        "arrival_rate": options.rate,
        "memory_per_thousand": {
            "webhook_mb_per_1000_nodes": per_thousand(node_points(results)),
            "webhook_mb_per_1000_jobs": per_thousand(
                [(p["jobs"], p["webhook_rss_mb"]) for p in job_points if p["webhook_rss_mb"] is not None]
            ),
            "resizer_mb_per_1000_jobs": per_thousand(
                [(p["jobs"], p["resizer_rss_mb"]) for p in job_points if p["resizer_rss_mb"] is not None]
            ),
            "node_points": node_points(results),
            "job_points": job_points,
        },
        "targets": TARGETS,
        "met": {
            "webhook_rss": webhook_max is not None and webhook_max < TARGETS["webhook_rss_mb"],
            "resizer_rss": resizer_max is not None and resizer_max < TARGETS["resizer_rss_mb"],
            "bind_to_resize_p99": p99 is not None and p99 < TARGETS["bind_to_resize_p99_ms"],
            "all_resized": load["jobs_resized"] == load["jobs"],
        },
        "phases": results,
    }


def run(options: Options) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        workdir = Path(tmp)
        if options.small is not None:
            results["baseline"] = run_load(options.small, options, workdir / "baseline")
        results["load"] = run_load(options.large, options, workdir / "load")
        if options.middle_nodes is not None:
            results["middle"] = [
                {
                    "nodes": options.middle_nodes,
                    "webhook_rss_mb": mb(idle_webhook_rss(options.middle_nodes, workdir / "middle")),
                }
            ]
        results["footprint"] = run_footprint(options, workdir / "footprint")
    return summarize(options, results)


def format_summary(result: dict[str, Any]) -> str:
    memory = result["memory_per_thousand"]
    return "\n".join(
        [
            f"scale: {result['jobs_resized']}/{result['jobs']} Jobs resized on {result['nodes']} nodes "
            f"({result['domains']} domains), {result['jobs_per_second']} Jobs/s "
            f"(arrivals {result['arrival_rate']}/s)",
            f"  webhook RSS max {result['webhook_rss_mb_max']} MB; "
            f"resizer RSS max {result['resizer_rss_mb_max']} MB "
            f"({result['resizer_rss_mb_at_footprint_jobs']} MB with {result['footprint_jobs']} Jobs)",
            f"  admission p99 {result['admission_p99_ms']} ms (small cluster "
            f"{result['admission_p99_ms_small_cluster']} ms); "
            f"Job create p99 {result['job_create_p99_ms']} ms",
            f"  bind -> resize p99 {result['bind_to_resize_p99_ms']} ms",
            f"  memory: webhook {memory['webhook_mb_per_1000_nodes']} MB/1k nodes, "
            f"{memory['webhook_mb_per_1000_jobs']} MB/1k Jobs; "
            f"resizer {memory['resizer_mb_per_1000_jobs']} MB/1k Jobs",
            f"  targets met: {result['met']}",
        ]
    )


def build_parser() -> argparse.ArgumentParser:
    parser = benchmark_parser("python -m bench scale", __doc__, "scale.json")
    add_load_arguments(parser, load_of(Options()), load_of(QUICK))
    parser.add_argument(
        "--footprint-jobs",
        default=None,
        help="comma-separated Job counts of the footprint phase (default 1000,3000,5000)",
    )
    return parser


def options_from(argv: list[str] | None) -> Options:
    parser = build_parser()
    args = parser.parse_args(argv)
    options = QUICK if args.quick else Options()
    load = load_from(parser, args, load_of(Options()), load_of(QUICK))
    try:
        footprint = (
            tuple(int(value) for value in args.footprint_jobs.split(","))
            if args.footprint_jobs
            else options.footprint_jobs
        )
    except ValueError:
        parser.error(f"--footprint-jobs: comma-separated Job counts, got {args.footprint_jobs!r}")
    if min(footprint) < 1:
        parser.error("--footprint-jobs: every count must be positive")
    return replace(
        options,
        large=Cluster(nodes=load.nodes, pools=load.pools, jobs=load.jobs),
        rate=load.rate,
        footprint_jobs=footprint,
        timeout=load.timeout,
        out=args.out,
    )


def main(argv: list[str] | None = None) -> int:
    options = options_from(argv)
    result = run(options)
    return write_result(result, options.out, "scale.json", format_summary(result))


if __name__ == "__main__":
    sys.exit(main())
