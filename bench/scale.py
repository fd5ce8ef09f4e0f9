"""Footprint and latency at scale on the real control plane (`python -m bench scale`).

One stack as devstack starts it on the real cluster (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok's fake nodes; the webhook over TLS registered through the chart's webhook
configurations, one resizer; no JobSet, which this benchmark does not use) with N kwok nodes in pools. A
webhook idle after its caches synced gives the footprint of the nodes; then exclusive Jobs (`elastic`, 2
pods of 8 GPUs each) arrive at a steady rate (default 50/s). Measured: webhook and resizer RSS (sampled
from /proc), the webhook's own admission latency (its histogram, every endpoint), the client-observed
latency of Job creation (through kube-apiserver and the mutating webhook), bind -> resize (a client
watch: leader first seen bound -> Job first seen `resize: done`), the Jobs resized per second, and the CPU
share of every process over the arrivals (which one saturated).

A cluster this size must not spend its two cores on heartbeats: kwok's node Leases last
`SCALE_HEARTBEAT.lease_seconds` (renewed every quarter of it, instead of every 10 s) and
kube-controller-manager's node monitor runs less often with a grace period above two renewals
(devstack.controlplane.cluster.NodeHeartbeat). kube-controller-manager and kube-scheduler get client
limits above upstream's (20 and 50 qps), said on the first line, so that their clients are not what the
benchmark measures.

Targets: webhook RSS < 150 MB and resizer RSS < 200 MB at 15,000 nodes; bind -> resize p99 < 250 ms and
admission p99 < 20 ms at 50 Jobs/s. `--quick` is a small run for the test suite (figures reported, nothing
asserted on them).
"""

from __future__ import annotations

import argparse
import os
import ssl
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from bench.cli import DEFAULT_OUT, Load, add_load_arguments, benchmark_parser, load_from, write_result
from bench.measures import histogram_buckets, histogram_quantile, metric_value, nearest_rank
from bench.probes import ResizeWatch, RssSampler, wait_until
from devstack.clusters import KubeCluster
from devstack.controlplane.cluster import NodeHeartbeat
from devstack.controlplane.components import COMPONENTS, component_pid
from devstack.shape import ClusterShape
from devstack.stack import Stack, StackOptions
from kubekit.credentials import kubeconfig_credentials
from placement.constants import GKE_NODEPOOL_LABEL, GPU_RESOURCE, TOPOLOGY_ANNOTATION

NAMESPACE = "scale"
ADMISSION_HISTOGRAM = "exclusive_placement_admission_duration_seconds"
RESIZER_HISTOGRAM = "exclusive_placement_resizer_bind_to_resize_seconds"
TARGETS = {
    "webhook_rss_mb": 150.0,
    "resizer_rss_mb": 200.0,
    "bind_to_resize_p99_ms": 250.0,
    "admission_p99_ms": 20.0,
    "jobs_per_second": 50.0,
}
SCALE_HEARTBEAT = NodeHeartbeat(lease_seconds=600, monitor_period_seconds=20, monitor_grace_seconds=400)
"""Leases renewed every 150 s: 100 writes/s at 15,000 nodes (1,500/s at upstream's 40 s); a node is
Unknown after 400 s without one (2.7 renewals)."""
CONTROLLER_MANAGER_QPS, CONTROLLER_MANAGER_BURST = 500.0, 1000
SCHEDULER_ARGS = ("kube-scheduler=kube-api-qps=500", "kube-scheduler=kube-api-burst=1000")
CREATE_WORKERS = 8
GPUS_PER_NODE = 8


@dataclass(frozen=True)
class Options:
    nodes: int = 15_000
    pools: int = 2_500
    jobs: int = 2_000
    rate: float = 50.0
    target: int = 2
    gpus_per_pod: int = 8
    timeout: float = 900.0
    out: Path = DEFAULT_OUT
    quick: bool = False


QUICK = Options(nodes=200, pools=50, jobs=30, rate=10.0, timeout=300.0, quick=True)


def mb(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 2)


def load_of(options: Options) -> Load:
    """The command line's view of `options` (`bench.cli`)."""
    return Load(
        nodes=options.nodes,
        pools=options.pools,
        jobs=options.jobs,
        rate=options.rate,
        timeout=options.timeout,
    )


def exclusive_job(name: str, target: int, gpus: int) -> dict[str, Any]:
    """A user's exclusive Indexed Job: `target` pods of `gpus` GPUs in one node pool (the webhook's
    default strategy, `elastic`, shrinks it to its leader and the resizer restores it). Its pods run until
    the cluster goes (no kwok run time)."""
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
                            "resources": {"limits": {GPU_RESOURCE: str(gpus)}},
                        }
                    ],
                }
            },
        },
    }


# --- the cluster and its clients ---------------------------------------------------------------------------


def stack_options(options: Options) -> StackOptions:
    return StackOptions(
        cluster=ClusterShape(nodes=options.nodes, pools=options.pools, gpus_per_node=GPUS_PER_NODE),
        default_strategy="elastic",
        controller_manager_qps=CONTROLLER_MANAGER_QPS,
        controller_manager_burst=CONTROLLER_MANAGER_BURST,
        control_plane_args=SCHEDULER_ARGS,
        node_heartbeat=SCALE_HEARTBEAT,
        jobset=False,
        startup_timeout=max(180.0, options.nodes / 20),
    )


def admin_client_options(stack: Stack) -> dict[str, Any]:
    """`httpx.Client` arguments for the cluster admin (client certificate, the cluster's CA)."""
    _, credentials = kubeconfig_credentials(stack.kubeconfig)
    return {"verify": credentials.ssl_context()}


def post_paced(
    stack: Stack, path: str, bodies: Sequence[dict[str, Any]], rate: float
) -> tuple[list[dict[str, Any]], list[float]]:
    """POST every body at `rate` per second as the admin; returns the created objects and each call's
    latency in seconds. 429/5xx are retried."""
    start = time.monotonic()
    created: list[dict[str, Any]] = [{} for _ in bodies]
    latencies: list[float] = [0.0 for _ in bodies]

    def post(index: int) -> None:
        delay = start + index / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # the arrival schedule
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

    limits = httpx.Limits(max_connections=CREATE_WORKERS, max_keepalive_connections=CREATE_WORKERS)
    with (
        httpx.Client(
            base_url=stack.server, timeout=60, limits=limits, **admin_client_options(stack)
        ) as client,
        ThreadPoolExecutor(CREATE_WORKERS) as pool,
    ):
        list(pool.map(post, range(len(bodies))))
    return created, latencies


def create_namespace(stack: Stack) -> None:
    stack.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    wait_until(lambda: _has_default_service_account(stack), 60)


def _has_default_service_account(stack: Stack) -> bool:
    return any(
        sa["metadata"]["name"] == "default" for sa in stack.client.list("ServiceAccount", namespace=NAMESPACE)
    )


def webhook_metrics(stack: Stack) -> str:
    trust = ssl.create_default_context(cafile=str(stack.ca_file))
    return httpx.get(f"{stack.webhook_url}/metrics", verify=trust, timeout=10).text


# --- what the processes use --------------------------------------------------------------------------------


def process_pids(stack: Stack) -> dict[str, int]:
    """The webhook, the resizer and every control-plane component, by name."""
    cluster = stack.cluster
    if not isinstance(cluster, KubeCluster):
        raise RuntimeError("bench scale runs on the real control plane")
    pids = {name: component_pid(cluster.control_plane.cluster_dir, name) for name in COMPONENTS}
    for name, process in (("webhook", stack.webhook), ("resizer", stack.resizers[0])):
        if process is None or process.pid is None:
            raise RuntimeError(f"the stack runs no {name}")
        pids[name] = process.pid
    return pids


class Usage:
    """RSS (sampled) of every process while Jobs arrive, and the CPU seconds each used meanwhile."""

    def __init__(self, stack: Stack) -> None:
        self.samplers = {name: RssSampler(pid) for name, pid in process_pids(stack).items()}
        self.idle = {
            "webhook": self.samplers["webhook"].settled(),
            "resizer": self.samplers["resizer"].read(),
        }
        self.cpu: dict[str, float] = {}
        self.load_average = (0.0, 0.0, 0.0)

    def __enter__(self) -> Self:
        for name, sampler in self.samplers.items():
            sampler.start()
            self.cpu[name] = -(sampler.cpu_seconds() or 0.0)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for name, sampler in self.samplers.items():
            self.cpu[name] += sampler.cpu_seconds() or 0.0
            sampler.stop.set()
        self.load_average = os.getloadavg()

    def max(self, name: str) -> float | None:
        return mb(max(self.samplers[name].samples, default=None))

    def cpu_shares(self, seconds: float) -> dict[str, float]:
        """CPU seconds per wall second of each process (1.0 = one core), busiest first."""
        shares = {name: round(cpu / max(1e-9, seconds), 2) for name, cpu in self.cpu.items()}
        return dict(sorted(shares.items(), key=lambda item: -item[1]))


# --- the run -----------------------------------------------------------------------------------------------


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
    _, latencies = post_paced(stack, f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", jobs, options.rate)
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


def run(options: Options) -> dict[str, Any]:
    names = [f"scale-{index:05d}" for index in range(options.jobs)]
    started_stack = time.monotonic()
    with Stack(stack_options(options)) as stack:
        stack_seconds = time.monotonic() - started_stack
        create_namespace(stack)
        usage = Usage(stack)
        watch = ResizeWatch(stack.server, NAMESPACE, client_options=admin_client_options(stack))
        with usage, watch:
            arrivals = arrive(stack, names, watch, options)
        webhook_text = webhook_metrics(stack)
        resizer_text = "\n".join(stack.resizer_metrics())
    load = {
        "stack_start_seconds": round(stack_seconds, 1),
        "arrival_seconds": round(arrivals.created_in, 2),
        "elapsed_seconds": round(arrivals.elapsed, 2),
        "webhook_rss_mb": {
            "idle": mb(usage.idle["webhook"]),
            "max": usage.max("webhook"),
            "leaders_cached": metric_value(
                webhook_text, "exclusive_placement_cache_objects", {"kind": "pods"}
            ),
        },
        "resizer_rss_mb": {"idle": mb(usage.idle["resizer"]), "max": usage.max("resizer")},
        "control_plane_rss_mb_max": {name: usage.max(name) for name in COMPONENTS},
        "cpu_share": usage.cpu_shares(arrivals.elapsed),
        "load_average": [round(value, 2) for value in usage.load_average],
        "admission_ms": admission_fields(webhook_text),
        "job_create_ms": {
            "observed_from": "the client: POST of a Job (through the mutating webhook) to its 201",
            "p50": ms(nearest_rank(arrivals.create_latencies, 0.5)),
            "p99": ms(nearest_rank(arrivals.create_latencies, 0.99)),
        },
        "bind_to_resize_ms": bind_to_resize_fields(watch.latencies(names), resizer_text),
    }
    return summarize(options, load, resized=watch.resized(names), jobs_per_second=arrivals.jobs_per_second)


def summarize(
    options: Options, load: dict[str, Any], *, resized: int, jobs_per_second: float
) -> dict[str, Any]:
    webhook_max, resizer_max = load["webhook_rss_mb"]["max"], load["resizer_rss_mb"]["max"]
    p99, admission = load["bind_to_resize_ms"]["p99"], load["admission_ms"]["p99"]
    return {
        "benchmark": "scale",
        "control_plane": "kube",
        "pod_admission": stack_options(options).pod_admission_path,
        "options": {**asdict(options), "out": str(options.out)},
        "nodes": options.nodes,
        "domains": options.pools,
        "jobs": options.jobs,
        "jobs_resized": resized,
        "node_heartbeat": asdict(SCALE_HEARTBEAT)
        | {"lease_renewals_per_second": round(options.nodes / SCALE_HEARTBEAT.renew_seconds, 1)},
        "webhook_rss_mb_max": webhook_max,
        "resizer_rss_mb_max": resizer_max,
        "admission_p99_ms": admission,
        "job_create_p99_ms": load["job_create_ms"]["p99"],
        "bind_to_resize_p99_ms": p99,
        "jobs_per_second": jobs_per_second,
        "arrival_rate": options.rate,
        "busiest_process": next(iter(load["cpu_share"]), None),
        "targets": TARGETS,
        "met": {
            "webhook_rss": webhook_max is not None and webhook_max < TARGETS["webhook_rss_mb"],
            "resizer_rss": resizer_max is not None and resizer_max < TARGETS["resizer_rss_mb"],
            "bind_to_resize_p99": p99 is not None and p99 < TARGETS["bind_to_resize_p99_ms"],
            "admission_p99": admission is not None and admission < TARGETS["admission_p99_ms"],
            "all_resized": resized == options.jobs,
        },
        "load": load,
    }


def format_summary(result: dict[str, Any]) -> str:
    load = result["load"]
    return "\n".join(
        [
            f"scale (kube): {result['jobs_resized']}/{result['jobs']} Jobs resized on {result['nodes']} kwok "
            f"nodes ({result['domains']} domains), {result['jobs_per_second']} Jobs/s "
            f"(arrivals {result['arrival_rate']}/s)",
            f"  webhook RSS max {result['webhook_rss_mb_max']} MB; "
            f"resizer RSS max {result['resizer_rss_mb_max']} MB",
            f"  admission p99 {result['admission_p99_ms']} ms; "
            f"Job create p99 {result['job_create_p99_ms']} ms",
            f"  bind -> resize p99 {result['bind_to_resize_p99_ms']} ms",
            f"  CPU share (cores) {load['cpu_share']}; load average {load['load_average']}",
            f"  targets met: {result['met']}",
        ]
    )


def build_parser() -> argparse.ArgumentParser:
    parser = benchmark_parser("python -m bench scale", __doc__, "scale.json")
    add_load_arguments(parser, load_of(Options()), load_of(QUICK))
    return parser


def options_from(argv: list[str] | None) -> Options:
    parser = build_parser()
    args = parser.parse_args(argv)
    options = QUICK if args.quick else Options()
    load = load_from(parser, args, load_of(Options()), load_of(QUICK))
    if load.jobs > load.pools:
        parser.error(f"--jobs ({load.jobs}) cannot exceed --pools ({load.pools}): each Job holds a pool")
    return replace(
        options,
        nodes=load.nodes,
        pools=load.pools,
        jobs=load.jobs,
        rate=load.rate,
        timeout=load.timeout,
        out=args.out,
    )


def main(argv: list[str] | None = None) -> int:
    options = options_from(argv)
    result = run(options)
    return write_result(result, options.out, "scale.json", format_summary(result))


if __name__ == "__main__":
    sys.exit(main())
