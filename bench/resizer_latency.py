"""Bind-to-resize latency and resizer RSS while N Jobs go through the real control plane
(`python -m bench resizer`).

The scale benchmark's run (bench.scale: kube-apiserver, kube-controller-manager's Job controller,
kube-scheduler, kwok's nodes, the webhook and one resizer as devstack starts them) at the resizer's load:
N exclusive `elastic` Jobs of 2 one-GPU pods arriving at a steady rate on a cluster with a node pool per
Job. The latency is measured from the outside: one watch on leader pods records when each leader is first
seen bound, one watch on Jobs records when each Job is first seen `resize: done`; both go through the same
path, so the figure is what a client of the cluster observes (the resizer's own histogram, from observing
the bind to the patch being acknowledged, is reported next to it). RSS is sampled from /proc.

Targets (issue 4): p99 < 250 ms and RSS < 150 MB with 1,000 Jobs.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any

from bench import scale
from bench.cli import Load, add_load_arguments, benchmark_parser, load_from, write_result

TARGET_P99_MS = 250.0
TARGET_RSS_MB = 150.0
FULL = Load(nodes=1000, pools=1000, jobs=1000, rate=20.0, timeout=600.0)
QUICK = Load(nodes=40, pools=40, jobs=40, rate=20.0, timeout=300.0)


def options_from(argv: list[str] | None) -> scale.Options:
    parser = build_parser()
    args = parser.parse_args(argv)
    load = load_from(parser, args, FULL, QUICK)
    if load.jobs > load.pools:
        parser.error(f"--jobs ({load.jobs}) cannot exceed --pools ({load.pools}): each Job holds a pool")
    return scale.Options(
        nodes=load.nodes,
        pools=load.pools,
        jobs=load.jobs,
        rate=load.rate,
        gpus_per_pod=1,
        timeout=load.timeout,
        out=args.out,
        quick=args.quick,
    )


def summarize(options: scale.Options, result: dict[str, Any]) -> dict[str, Any]:
    """The resizer's figures of a scale run."""
    load = result["load"]
    latency = load["bind_to_resize_ms"]
    rss_max = result["resizer_rss_mb_max"]
    p99 = latency["p99"]
    return {
        "benchmark": "resizer",
        "control_plane": "kube",
        "options": {**asdict(options), "out": str(options.out)},
        "jobs_created": options.jobs,
        "jobs_resized": result["jobs_resized"],
        "elapsed_seconds": load["elapsed_seconds"],
        "jobs_per_second": result["jobs_per_second"],
        "bind_to_resize_ms": latency,
        "resizer_rss_mb": load["resizer_rss_mb"],
        "resizer_cpu_share": load["cpu_share"].get("resizer"),
        "cpu_share": load["cpu_share"],
        "targets": {"p99_ms": TARGET_P99_MS, "rss_mb": TARGET_RSS_MB, "jobs": FULL.jobs},
        "met": {
            "p99": p99 is not None and p99 < TARGET_P99_MS,
            "rss": rss_max is not None and rss_max < TARGET_RSS_MB,
            "all_resized": result["met"]["all_resized"],
        },
    }


def format_summary(result: dict[str, Any]) -> str:
    latency, rss = result["bind_to_resize_ms"], result["resizer_rss_mb"]
    return "\n".join(
        [
            f"resizer benchmark (kube): {result['jobs_resized']}/{result['jobs_created']} Jobs resized in "
            f"{result['elapsed_seconds']} s ({result['jobs_per_second']} Jobs/s)",
            f"  bind-to-resize (client view): p50 {latency['p50']} ms  p99 {latency['p99']} ms  "
            f"max {latency['max']} ms; resizer histogram p99 {latency['resizer_histogram_p99']} ms",
            f"  resizer RSS: idle {rss['idle']} MB, max {rss['max']} MB; "
            f"CPU share {result['resizer_cpu_share']}",
            f"  targets met: {result['met']}",
        ]
    )


def build_parser() -> argparse.ArgumentParser:
    parser = benchmark_parser("python -m bench resizer", __doc__, "resizer.json")
    add_load_arguments(parser, FULL, QUICK)
    return parser


def main(argv: list[str] | None = None) -> int:
    options = options_from(argv)
    result = summarize(options, scale.run(options))
    return write_result(result, options.out, "resizer.json", format_summary(result))


if __name__ == "__main__":
    sys.exit(main())
