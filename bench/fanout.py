"""`python -m bench fanout [--jobs 500] [--runs 3] [--out DIR]`: what the resized Jobs of a namespace cost
the policy path of pod admission (docs/webhook.md, "Two paths for pods").

kube-apiserver evaluates the follower MutatingAdmissionPolicy once per param for every pod created in a
namespace; the params are the Jobs of the pod's namespace labelled `exclusive-placement.io/pin-followers`.
One stack on the real control plane (`make kube`'s binaries; 8 kwok nodes in 4 pools, the policy path),
three phases, each placing an elastic JobSet of 4 Jobs x 4 pods `--runs` times:

- `empty`: in a namespace of its own, nothing else in it;
- `pinning`: beside `--jobs` suspended exclusive Jobs labelled as the resize leaves them (`resize: done`,
  `leader-domain`, `pin-followers`): every one a param, as every Job labelled `resize: done`, finished ones
  included, was before finished Jobs were retired;
- `retired`: the same Jobs without `pin-followers`, as the resizer's retire leaves a finished Job.

The labels are written with the resizer's own credentials (the resize-keys and resizer-writes policies
let only it). Per placement: kube-apiserver's CPU seconds (utime + stime from /proc/<pid>/stat) from the
JobSet's creation until all its 16 pods run, and that time. Writes `DIR/fanout.json` (default DIR: .bench,
outside git).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.controlplane import component_pids
from bench.paths import SCRATCH
from bench.probes import RssSampler
from devstack.interrupts import pause
from devstack.kinds import stack_client
from devstack.manifests import exclusive_jobset
from devstack.shape import ClusterShape
from devstack.stack import Stack, StackOptions
from kubekit.generic import GenericClient
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    LEADER_DOMAIN_ANNOTATION,
    PIN_FOLLOWERS,
    PIN_FOLLOWERS_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    TOPOLOGY_ANNOTATION,
    Strategy,
)

DEFAULT_OUT = SCRATCH
SETTLE_SECONDS = 5.0
"""After relabelling: kube-apiserver's own Job informer (the policies' params) catches up."""
PHASES = ("empty", "pinning", "retired")


def parked_job(name: str, namespace: str) -> dict[str, Any]:
    """An exclusive Job that never runs (suspended): the Job webhook admits it elastic, at size 1."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL},
        },
        "spec": {
            "suspend": True,
            "completionMode": "Indexed",
            "completions": 1,
            "parallelism": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "w", "image": "registry.example/worker:1"}],
                }
            },
        },
    }


def resized_labels(pinning: bool) -> dict[str, Any]:
    """The labels a resize leaves (`pinning`: with pin-followers, the Job a param), as a merge patch."""
    labels = {RESIZE_LABEL: RESIZE_DONE, **({PIN_FOLLOWERS_LABEL: PIN_FOLLOWERS} if pinning else {})}
    return {"metadata": {"labels": labels, "annotations": {LEADER_DOMAIN_ANNOTATION: "pool-00"}}}


RETIRE: dict[str, Any] = {"metadata": {"labels": {PIN_FOLLOWERS_LABEL: None}}}
"""What the resizer's retire removes (its own patch `test`s the uid and the label first)."""


def running_pods(client: GenericClient, namespace: str) -> int:
    return sum(
        1
        for pod in client.list("Pod", namespace=namespace)
        if pod.get("status", {}).get("phase") == "Running"
    )


def wait_for(probe: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {timeout:.0f}s")
        pause(0.2)


def place(stack: Stack, apiserver: RssSampler, namespace: str, name: str) -> dict[str, float]:
    """One elastic 4x4 JobSet, created and waited for until its 16 pods run; deleted again after."""
    client = stack.client
    jobset = exclusive_jobset(name, jobs=4, pods_per_job=4, strategy=Strategy.ELASTIC, namespace=namespace)
    cpu_before, started = apiserver.cpu_seconds(), time.monotonic()
    client.create(jobset, namespace=namespace)
    wait_for(lambda: running_pods(client, namespace) == 16, f"JobSet {name} running", 600)
    seconds, cpu_after = time.monotonic() - started, apiserver.cpu_seconds()
    client.delete("JobSet", name, namespace=namespace)
    wait_for(lambda: not client.list("Pod", namespace=namespace), f"the pods of {name} gone", 300)
    if cpu_before is None or cpu_after is None:
        raise RuntimeError("kube-apiserver exited")
    return {"apiserver_cpu_seconds": round(cpu_after - cpu_before, 2), "placed_seconds": round(seconds, 2)}


def park_jobs(stack: Stack, namespace: str, jobs: int) -> list[str]:
    """`jobs` parked Jobs in `namespace`, labelled as resized (and pinning) by the resizer's credentials."""
    names = [f"parked-{n}" for n in range(jobs)]
    for name in names:
        stack.client.create(parked_job(name, namespace), namespace=namespace)
    relabel(stack, namespace, names, resized_labels(pinning=True))
    return names


def relabel(stack: Stack, namespace: str, names: Sequence[str], patch: dict[str, Any]) -> None:
    with stack_client(stack.connection("resizer")) as resizer:
        for name in names:
            resizer.patch("Job", name, patch, namespace=namespace)
    pause(SETTLE_SECONDS)


def summary(runs: Sequence[dict[str, float]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for field in ("apiserver_cpu_seconds", "placed_seconds"):
        values = [run[field] for run in runs]
        result[field] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
    return result


def measure(workdir: Path, jobs: int, runs: int) -> dict[str, Any]:
    options = StackOptions(cluster=ClusterShape(nodes=8, pools=4), workdir=workdir, startup_timeout=300)
    results: dict[str, Any] = {}
    with Stack(options) as stack:
        assert stack.options.pod_admission_path == "policy", "the fan-out is the policy path's"
        apiserver = RssSampler(component_pids(stack)["kube-apiserver"])
        for namespace in ("fanout-empty", "fanout"):
            stack.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        names = park_jobs(stack, "fanout", jobs)
        for phase in PHASES:
            if phase == "retired":
                relabel(stack, "fanout", names, RETIRE)
            namespace = "fanout-empty" if phase == "empty" else "fanout"
            placed = []
            for index in range(runs):
                placed.append(place(stack, apiserver, namespace, f"fan-{phase}-{index}"))
                print(f"{phase} run {index + 1}: {placed[-1]}", flush=True)
            results[phase] = {"runs": placed, **summary(placed)}
            stack.check_alive()
    return results


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench fanout", description=__doc__)
    parser.add_argument("--jobs", type=int, default=500, help="resized Jobs parked in the namespace")
    parser.add_argument("--runs", type=int, default=3, help="placements per phase")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as workdir:
        phases = measure(Path(workdir), args.jobs, args.runs)
    result = {
        "control_plane": "kube",
        "jobs": args.jobs,
        "jobset": "4 Jobs x 4 pods, elastic",
        "phases": phases,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "fanout.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
