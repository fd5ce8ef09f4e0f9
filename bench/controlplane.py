"""`python -m bench controlplane [--nodes 16] [--pools 4] [--runs 3] [--settle 30] [--out DIR]`: what the real
control plane costs on this machine.

Each run starts the whole stack on the binaries `make kube` built (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok with `--nodes` nodes, JobSet's controller and webhooks, this
project's webhook and resizer) and measures:
- the warm start: seconds from nothing running to every component ready (nodes Ready, webhooks
  registered), the Go binaries already built;
- the idle footprint: after `--settle` seconds with nothing to do, the resident memory of every process
  of the stack (the kwokctl-started components through their pid files).

Writes `DIR/controlplane.json` (default DIR: .bench, outside git; `make bench-controlplane` writes
bench/results/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.paths import SCRATCH
from bench.probes import RssSampler
from devstack.clusters import KubeCluster
from devstack.controlplane.versions import pinned_versions
from devstack.interrupts import pause
from devstack.shape import ClusterShape
from devstack.stack import Stack, StackOptions

DEFAULT_OUT = SCRATCH


def component_pids(stack: Stack) -> dict[str, int]:
    """Every process of the stack by name: kwokctl's (from its pid files), then devstack's own."""
    assert isinstance(stack.cluster, KubeCluster)
    pids: dict[str, int] = {}
    for pid_file in sorted((stack.cluster.control_plane.cluster_dir / "pids").glob("*.pid")):
        pids[pid_file.stem] = int(pid_file.read_text().strip())
    for process in stack.processes():
        if process.pid is not None:
            pids[process.name] = process.pid
    return pids


def idle_rss(stack: Stack) -> dict[str, float]:
    return {
        name: round(rss, 1)
        for name, pid in component_pids(stack).items()
        if (rss := RssSampler(pid).read()) is not None
    }


def one_run(workdir: Path, nodes: int, pools: int, settle: float) -> dict[str, Any]:
    options = StackOptions(
        cluster=ClusterShape(nodes=nodes, pools=pools),
        workdir=workdir,
        startup_timeout=180,
    )
    started = time.monotonic()
    with Stack(options) as stack:
        ready = time.monotonic() - started
        pause(settle)
        stack.check_alive()
        rss = idle_rss(stack)
    return {
        "start_seconds": round(ready, 2),
        "idle_rss_mb": rss,
        "idle_rss_total_mb": round(sum(rss.values()), 1),
    }


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    starts = [run["start_seconds"] for run in runs]
    totals = [run["idle_rss_total_mb"] for run in runs]
    return {
        "start_seconds_median": statistics.median(starts),
        "start_seconds_max": max(starts),
        "idle_rss_total_mb_median": statistics.median(totals),
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench controlplane", description=__doc__)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--pools", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--settle", type=float, default=30.0, help="idle seconds before memory is read")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    runs = []
    for index in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="bench-controlplane-") as workdir:
            run = one_run(Path(workdir), args.nodes, args.pools, args.settle)
        print(
            f"run {index + 1}: ready in {run['start_seconds']} s, idle {run['idle_rss_total_mb']} MB",
            flush=True,
        )
        runs.append(run)
    result = {
        "control_plane": "kube",
        "versions": pinned_versions().as_dict(),
        "nodes": args.nodes,
        "pools": args.pools,
        "settle_seconds": args.settle,
        "runs": runs,
        **summary(runs),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "controlplane.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
