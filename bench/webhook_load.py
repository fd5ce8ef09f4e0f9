"""Webhook admission load: the real webhook vs a no-op endpoint on the same server, side by side.

`python -m bench webhook [--duration S] [--rounds N] [--concurrency C] [--rate R] [--tool hey|httpx]`

One webhook process (`python -m bench.webhook_load --serve ...`: the real app from `webhook.server.build`,
TLS, httptools + uvloop, plus `POST /noop` added to the same app) is loaded in alternating rounds with:

- `noop`: reads and parses the review, answers Allowed (the floor any admission endpoint pays), fed a pod
  review (a leader's, 1.5 KB: about the size of every pod review below);
- `noop-job`, `noop-jobset`, `noop-jobset-update`: the same no-op fed the review of `mutate-job`,
  `validate-jobset` and `validate-jobset-update` (3-5.5 times a pod review's size), so that each endpoint
  is also held against the floor of admitting its own request (`ratio_to_same_body_noop`);
- `mutate-job`: `/mutate-jobs` for an exclusive JobSet child Job as JobSet v0.12.0 creates it (shrunk,
  labelled and its pod template annotated; its JobSet read once, before the load, then from memory);
- `validate-jobset`: `/validate-jobsets` for the CREATE of that exclusive JobSet (`kubectl apply`);
- `validate-jobset-update`: `/validate-jobsets` for an UPDATE of it that leaves the project's annotations
  be (a label added): the other case the chart sends that endpoint;
- `mutate-leader`: `/mutate-pods` for a leader pod (labels + affinity patch);
- `mutate-follower`: `/mutate-pods` for a follower whose leader is bound (nodeSelector from the cache);
- `validate-follower`: `/validate-pods` for that follower, already pinned (cache lookup, allowed).

With the default chart pods are admitted by in-API-server policies: the Job and JobSet endpoints are the
ones every cluster calls; the pod endpoints serve clusters without MutatingAdmissionPolicy.

Each endpoint is held to `TARGET_RATIO` of the no-op fed its own review (`ratio_to_same_body_noop`: the
pod endpoints' is `noop`); `ratio_to_noop`, against the pod-review no-op, is reported beside it.

Each endpoint is measured closed-loop (C concurrent workers, max throughput: req/s, p50/p99) and
open-loop at a fixed rate (R req/s: p50/p99). Every lookup must be served from memory: the fake API
server's request counter (list + get) is read before and after, the webhook's leader cache miss counter
must stay at zero and its JobSet lookups must all come from memory. Results go to .bench/webhook.json
(`make bench-webhook`: bench/results/webhook.json).

The load generator is `hey` (Go, cheap per request): the one `make kube` builds from its pin in
cluster/go.mod (github.com/rakyll/hey), else one on PATH (`find_hey`); without either, an async httpx
client. The ratios only mean something while the server, not the generator, is the bottleneck: when the
no-op endpoint (a subset of every real endpoint's work) is not clearly the fastest, or the generator's CPU
was saturated during the max-throughput phases, the report says so and gives no ratio (`generator_bound`).
The httpx client, one Python thread, usually is that bottleneck.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import copy
import csv
import io
import json
import os
import resource
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fastapi import Request
from fastapi.responses import JSONResponse

from bench.admission_objects import (
    JOBS_GVR,
    JOBSET_CONTROLLER,
    JOBSETS_GVR,
    KUBECTL_USER,
    NAMESPACE,
    POOL_KEY,
    child_job,
    child_job_name,
    relabelled_jobset,
    review,
    stored_jobset,
)
from bench.measures import metric_value
from bench.paths import SCRATCH
from certs.files import write_dev_certs
from devstack.controlplane.versions import PinError, current_layout, pinned_versions
from placement.constants import (
    CONTROLLER_UID_LABEL,
    HOSTNAME_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_COMPLETION_INDEX_LABEL,
    JOB_NAME_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_JOB_KEY_LABEL,
    JOBSET_NAME_LABEL,
    RESIZE_LABEL,
    RESIZE_PENDING,
    ROLE_LABEL,
    ROLE_LEADER,
    TARGET_COMPLETIONS_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from placement.jobset_validation import validate_jobset
from placement.objects import job_key
from placement.patch import apply
from tests.support.fake_api import FakeKubeApi
from webhook.review import ADMISSION_API_VERSION, ADMISSION_KIND
from webhook.server import build
from webhook.settings import WebhookSettings

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = SCRATCH / "webhook.json"
JOB = child_job_name(0)
JOB_UID = "3b0e1c5e-8c1a-4a53-9f6d-0d9d3c1f0a11"
NOOP = "noop"
SAME_BODY_NOOPS = {
    "mutate-job": "noop-job",
    "validate-jobset": "noop-jobset",
    "validate-jobset-update": "noop-jobset-update",
}
"""The no-op fed the same review as each endpoint whose review is not a pod's (the others': `NOOP`)."""
NOOPS = (NOOP, *SAME_BODY_NOOPS.values())
FED_TO = {noop: endpoint for endpoint, noop in SAME_BODY_NOOPS.items()}
"""Each same-review no-op → the endpoint whose review it is fed."""
ENDPOINTS = (
    NOOP,
    *SAME_BODY_NOOPS.values(),
    "mutate-job",
    "validate-jobset",
    "validate-jobset-update",
    "mutate-leader",
    "mutate-follower",
    "validate-follower",
)
PATHS = {
    **{name: "/noop" for name in NOOPS},
    "mutate-job": "/mutate-jobs",
    "validate-jobset": "/validate-jobsets",
    "validate-jobset-update": "/validate-jobsets",
    "mutate-leader": "/mutate-pods",
    "mutate-follower": "/mutate-pods",
    "validate-follower": "/validate-pods",
}
REAL_ENDPOINTS = tuple(name for name in ENDPOINTS if name not in NOOPS)
TARGET_RATIO = 0.8
"""Every endpoint the webhook serves keeps at least this share of the max throughput of the no-op fed the
same review (`reference_noop`)."""
NODE_ALLOCATABLE = {"cpu": "95", "memory": "1400Gi", "nvidia.com/gpu": "8", "pods": "110"}
TARGET_P99_MS = 20.0
NOOP_MARGIN = 0.95
"""A real endpoint within 5 % of the no-op's throughput means the server's work did not set the pace."""
GENERATOR_SATURATED = 0.9
"""The generator's CPU share of the cores it can use above which it, not the server, limits throughput."""
INSTALL_HEY = (
    "build hey with `make kube` (github.com/rakyll/hey, pinned in cluster/go.mod), "
    "or put one on PATH (Debian/Ubuntu: apt-get install hey)"
)


def find_hey() -> str | None:
    """The hey `make kube` built from the repository's pin, else one on PATH, else None."""
    built = _built_hey()
    return str(built) if built is not None and os.access(built, os.X_OK) else shutil.which("hey")


def hey_origin(command: str) -> str:
    """Which hey a report's figures came from: the pinned build or whatever PATH had."""
    built = _built_hey()
    if built is not None and Path(command) == built:
        return f"github.com/rakyll/hey {pinned_versions().hey} (make kube)"
    return "PATH (version unknown: hey prints none)"


def _built_hey() -> Path | None:
    try:
        return current_layout().binary("hey")
    except PinError:
        return None


# --- the cluster the webhook sees, and the reviews it is sent ----------------------------------------------


def pod(index: int, *, name: str = "", node: str | None = None, leader_label: bool = False) -> dict[str, Any]:
    labels = {
        JOB_NAME_LABEL: JOB,
        CONTROLLER_UID_LABEL: JOB_UID,
        JOB_COMPLETION_INDEX_LABEL: str(index),
        JOBSET_NAME_LABEL: "trainer",
        JOBSET_JOB_KEY_LABEL: job_key(NAMESPACE, JOB),
    }
    if leader_label:
        labels[ROLE_LABEL] = ROLE_LEADER
    metadata: dict[str, Any] = {
        "generateName": f"{JOB}-{index}-",
        "namespace": NAMESPACE,
        "labels": labels,
        "annotations": {
            JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: POOL_KEY,
            JOB_COMPLETION_INDEX_ANNOTATION: str(index),
        },
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": JOB, "uid": JOB_UID, "controller": True}
        ],
    }
    if name:
        metadata["name"] = name
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "worker", "image": "trainer:1", "resources": {"requests": {"cpu": "1"}}}],
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def node(index: int, pools: int) -> dict[str, Any]:
    """A GPU node of pool `index % pools`, as the node informer lists it (its allocatable is what the
    capacity warnings count)."""
    labels = {POOL_KEY: f"pool-{index % pools}", HOSTNAME_LABEL: f"node-{index}"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{index}", "labels": labels},
        "spec": {},
        "status": {"allocatable": dict(NODE_ALLOCATABLE), "capacity": dict(NODE_ALLOCATABLE)},
    }


def seed_cluster(api: FakeKubeApi, nodes: int, pools: int) -> None:
    for i in range(nodes):
        api.put("nodes", node(i, pools))
    leader = pod(0, name=f"{JOB}-0-x7k2p", node="node-3", leader_label=True)
    leader["status"] = {"phase": "Running"}
    api.put("pods", leader)
    api.put("jobsets", stored_jobset())


def reference_noop(name: str) -> str:
    """The no-op an endpoint is held against: the one fed the same review (a no-op is its own)."""
    if name in NOOPS:
        return name
    return SAME_BODY_NOOPS.get(name, NOOP)


def reviews() -> dict[str, dict[str, Any]]:
    follower = pod(5)
    pinned = copy.deepcopy(follower)
    pinned["spec"]["nodeSelector"] = {POOL_KEY: "pool-3"}
    jobset = stored_jobset()
    real = {
        "mutate-job": review(
            "00000000-0000-4000-8000-000000000004", child_job(0), gvr=JOBS_GVR, username=JOBSET_CONTROLLER
        ),
        "validate-jobset": review(
            "00000000-0000-4000-8000-000000000005", jobset, gvr=JOBSETS_GVR, username=KUBECTL_USER
        ),
        "validate-jobset-update": review(
            "00000000-0000-4000-8000-000000000006",
            relabelled_jobset(),
            gvr=JOBSETS_GVR,
            operation="UPDATE",
            username=KUBECTL_USER,
            old=jobset,
        ),
        "mutate-leader": review("00000000-0000-4000-8000-000000000001", pod(0)),
        "mutate-follower": review("00000000-0000-4000-8000-000000000002", follower),
        "validate-follower": review("00000000-0000-4000-8000-000000000003", pinned),
    }
    noops = {NOOP: review("00000000-0000-4000-8000-000000000000", pod(0))}
    noops.update({noop: real[endpoint] for endpoint, noop in SAME_BODY_NOOPS.items()})
    return {**noops, **real}


def bodies() -> dict[str, bytes]:
    return {name: json.dumps(r).encode() for name, r in reviews().items()}


# --- the server process -----------------------------------------------------------------------------------


def serve(port: int, cert_dir: Path, server: str) -> None:
    """The webhook as `python -m webhook` builds it, plus the no-op endpoint on the same app and server."""
    webhook = build(
        WebhookSettings(host="127.0.0.1", port=port, cert_dir=cert_dir, server=server, log_level="WARNING")
    )

    @webhook.app.post("/noop")
    async def noop(request: Request) -> JSONResponse:
        parsed = json.loads(await request.body())
        answer = {"uid": parsed["request"]["uid"], "allowed": True}
        return JSONResponse({"apiVersion": ADMISSION_API_VERSION, "kind": ADMISSION_KIND, "response": answer})

    webhook.server().run()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def webhook_process(cert_dir: Path, api_url: str) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, "-m", "bench.webhook_load", "--serve", "--port", str(port)]
    command += ["--cert-dir", str(cert_dir), "--api", api_url]
    process = subprocess.Popen(command, cwd=ROOT)
    base = f"https://127.0.0.1:{port}"
    trust = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/readyz", verify=trust).status_code == 200:
                    break
            if process.poll() is not None:
                raise RuntimeError(f"webhook exited with {process.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError("webhook did not become ready")
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- load generation ----------------------------------------------------------------------------------------


@dataclass
class Sample:
    latencies_s: list[float] = field(default_factory=list)
    seconds: float = 0.0
    errors: int = 0
    generator_cpu_seconds: float = 0.0
    """CPU time the load generator itself used while producing this sample."""

    def add(self, other: Sample) -> None:
        self.latencies_s.extend(other.latencies_s)
        self.seconds += other.seconds
        self.errors += other.errors
        self.generator_cpu_seconds += other.generator_cpu_seconds

    def summary(self) -> dict[str, float | int]:
        lat = sorted(self.latencies_s)
        return {
            "requests": len(lat),
            "errors": self.errors,
            "rps": round(len(lat) / self.seconds, 1) if self.seconds else 0.0,
            "p50_ms": round(percentile(lat, 50) * 1000, 2),
            "p99_ms": round(percentile(lat, 99) * 1000, 2),
            "mean_ms": round(statistics.fmean(lat) * 1000, 2) if lat else 0.0,
            "max_ms": round(lat[-1] * 1000, 2) if lat else 0.0,
        }


def percentile(sorted_values: list[float], pct: float) -> float:
    if not sorted_values:
        return 0.0
    rank = max(0, min(len(sorted_values) - 1, round(pct / 100 * len(sorted_values)) - 1))
    return sorted_values[rank]


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _httpx_sample(
    url: str, body: bytes, duration: float, concurrency: int, *, rate: float | None, trust: ssl.SSLContext
) -> Sample:
    """One httpx load phase in this process; its CPU time is this process's (the client is all it runs)."""
    before = time.process_time()
    sample = asyncio.run(_httpx_load(url, body, duration, concurrency, rate=rate, trust=trust))
    sample.generator_cpu_seconds = time.process_time() - before
    return sample


def run_hey(
    hey: str, url: str, body_file: Path, duration: float, concurrency: int, *, rate_per_worker: float | None
) -> Sample:
    command = [hey, "-z", f"{duration}s", "-c", str(concurrency), "-m", "POST", "-T", "application/json"]
    command += ["-D", str(body_file), "-o", "csv"]
    if rate_per_worker is not None:
        command += ["-q", f"{rate_per_worker:g}"]
    before = _children_cpu_seconds()
    out = subprocess.run([*command, url], capture_output=True, text=True, check=True).stdout
    # hey -z sends for exactly this long; it is the only child reaped meanwhile (the server runs on)
    sample = Sample(seconds=duration, generator_cpu_seconds=_children_cpu_seconds() - before)
    for row in csv.DictReader(io.StringIO(out)):
        if row.get("status-code") == "200":
            sample.latencies_s.append(float(row["response-time"]))
        else:
            sample.errors += 1
    return sample


async def _httpx_load(
    url: str, body: bytes, duration: float, concurrency: int, *, rate: float | None, trust: ssl.SSLContext
) -> Sample:
    sample = Sample()
    headers = {"Content-Type": "application/json"}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(verify=trust, limits=limits, timeout=10) as client:

        async def one() -> None:
            started = time.perf_counter()
            try:
                response = await client.post(url, content=body, headers=headers)
                ok = response.status_code == 200
            except httpx.HTTPError:
                ok = False
            if ok:
                sample.latencies_s.append(time.perf_counter() - started)
            else:
                sample.errors += 1

        begin = time.perf_counter()
        deadline = begin + duration
        if rate is None:

            async def worker() -> None:
                while time.perf_counter() < deadline:
                    await one()

            await asyncio.gather(*(worker() for _ in range(concurrency)))
        else:
            tasks: list[asyncio.Task[None]] = []
            interval = 1.0 / rate
            next_at = begin
            while next_at < deadline:
                await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
                tasks.append(asyncio.create_task(one()))
                next_at += interval
            await asyncio.gather(*tasks)
        sample.seconds = time.perf_counter() - begin
    return sample


@dataclass
class LoadPlan:
    duration: float
    rounds: int
    concurrency: int
    rate: float
    tool: str
    hey: str = "hey"
    """The hey command, when `tool` is hey (`find_hey`)."""


def measure(base: str, plan: LoadPlan, body_files: dict[str, Path], trust: ssl.SSLContext) -> dict[str, Any]:
    closed = {name: Sample() for name in ENDPOINTS}
    paced = {name: Sample() for name in ENDPOINTS}
    rate_workers = 4
    for _ in range(plan.rounds):
        for name in ENDPOINTS:  # alternate endpoints every round so neighbours' noise hits all alike
            url = base + PATHS[name]
            if plan.tool == "hey":
                closed[name].add(
                    run_hey(
                        plan.hey, url, body_files[name], plan.duration, plan.concurrency, rate_per_worker=None
                    )
                )
                paced[name].add(
                    run_hey(
                        plan.hey,
                        url,
                        body_files[name],
                        plan.duration,
                        rate_workers,
                        rate_per_worker=plan.rate / rate_workers,
                    )
                )
            else:
                body = body_files[name].read_bytes()
                closed[name].add(
                    _httpx_sample(url, body, plan.duration, plan.concurrency, rate=None, trust=trust)
                )
                paced[name].add(
                    _httpx_sample(url, body, plan.duration, plan.concurrency, rate=plan.rate, trust=trust)
                )
    max_rps = {name: float(closed[name].summary()["rps"]) for name in ENDPOINTS}
    generator = GeneratorLoad(
        cpu_seconds=sum(sample.generator_cpu_seconds for sample in closed.values()),
        wall_seconds=sum(sample.seconds for sample in closed.values()),
        cores=generator_cores(plan.tool),
    )
    reasons = generator_bound_reasons(max_rps, generator)
    results: dict[str, Any] = {}
    for name in ENDPOINTS:
        same_body = max_rps[reference_noop(name)] or 1.0
        results[name] = {
            "max_throughput": closed[name].summary(),
            "ratio_to_noop": None if reasons else round(max_rps[name] / (max_rps[NOOP] or 1.0), 3),
            "ratio_to_same_body_noop": None if reasons else round(max_rps[name] / same_body, 3),
            f"at_{plan.rate:g}_rps": paced[name].summary(),
        }
    return {
        "endpoints": results,
        "generator": {"cpu_share": round(generator.share, 3), "cores": generator.cores},
        "generator_bound": reasons,
    }


@dataclass(frozen=True)
class GeneratorLoad:
    """The load generator's CPU use over the max-throughput phases."""

    cpu_seconds: float
    wall_seconds: float
    cores: int
    """Cores it can use: 1 for the asyncio httpx client (one Python thread), every core for hey."""

    @property
    def share(self) -> float:
        return self.cpu_seconds / self.wall_seconds / self.cores if self.wall_seconds else 0.0


def generator_cores(tool: str) -> int:
    return _cpus() if tool == "hey" else 1


def generator_bound_reasons(max_rps: dict[str, float], generator: GeneratorLoad) -> list[str]:
    """Why the throughputs measure the load generator rather than the server ([] when they do not).

    A no-op does a subset of the work of every real endpoint fed the same review, so a server-bound run
    has each no-op clearly faster than the endpoints held against it (`reference_noop`); a generator that
    cannot send faster makes every endpoint equally fast (or the order random). A generator using
    GENERATOR_SATURATED of the cores it can use is the bottleneck itself."""
    reasons = []
    for noop in NOOPS:
        if noop not in max_rps:
            continue
        floor = max_rps[noop]
        close = {
            name: rps
            for name, rps in max_rps.items()
            if name not in NOOPS and reference_noop(name) == noop and rps >= NOOP_MARGIN * floor
        }
        if close:
            shown = ", ".join(f"{name} {rps / floor:.2f}x" for name, rps in sorted(close.items()))
            fed = "" if noop == NOOP else f" fed {FED_TO[noop]}'s review"
            which = f"the no-op endpoint{fed}"
            reasons.append(
                f"{which} ({floor:.0f} req/s) was not clearly the fastest ({shown} its throughput)"
            )
    if generator.share >= GENERATOR_SATURATED:
        reasons.append(
            f"the load generator used {generator.share:.0%} of the {generator.cores} core(s) it can use"
        )
    return reasons


# --- checks around the load ---------------------------------------------------------------------------


def check_answers(base: str, payloads: dict[str, bytes], trust: ssl.SSLContext) -> None:
    """One request per endpoint before the load: each must answer what the benchmark claims to measure."""
    headers = {"Content-Type": "application/json"}
    with httpx.Client(verify=trust) as client:
        answers = {
            n: client.post(base + PATHS[n], content=payloads[n], headers=headers).json()["response"]
            for n in ENDPOINTS
        }
    for name, answer in answers.items():
        if answer.get("allowed") is not True or answer.get("warnings"):
            raise RuntimeError(f"{name}: expected allowed without a warning, got {answer}")
    for name in ("mutate-job", "mutate-leader", "mutate-follower"):
        if "patch" not in answers[name]:
            raise RuntimeError(f"{name}: expected a patch")
    follower_patch = json.loads(base64.b64decode(answers["mutate-follower"]["patch"]))
    if {"op": "add", "path": "/spec/nodeSelector", "value": {POOL_KEY: "pool-3"}} not in follower_patch:
        raise RuntimeError(f"mutate-follower: leader's domain not applied: {follower_patch}")
    sent = {name: json.loads(payloads[name])["request"] for name in ENDPOINTS}
    check_job_shrunk(sent["mutate-job"]["object"], answers["mutate-job"])
    for name, reason in (("validate-jobset", "valid"), ("validate-jobset-update", "unchanged")):
        check_jobset_case(name, sent[name], reason)


def check_job_shrunk(job: dict[str, Any], answer: dict[str, Any]) -> None:
    """The child Job's patch shrinks it to its leader, records its size and takes JobSet's annotation over."""
    size = job["spec"]["completions"]
    shrunk = apply(job, json.loads(base64.b64decode(answer["patch"])))
    template_annotations = shrunk["spec"]["template"]["metadata"]["annotations"]
    found = {
        "size": (shrunk["spec"]["completions"], shrunk["spec"]["parallelism"]),
        "resize": shrunk["metadata"]["labels"].get(RESIZE_LABEL),
        "target": shrunk["metadata"]["annotations"].get(TARGET_COMPLETIONS_ANNOTATION),
        "topology": template_annotations.get(TOPOLOGY_ANNOTATION),
        "jobset_annotation": template_annotations.get(JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION),
    }
    expected = {
        "size": (1, 1),
        "resize": RESIZE_PENDING,
        "target": str(size),
        "topology": POOL_KEY,
        "jobset_annotation": None,
    }
    if found != expected:
        raise RuntimeError(f"mutate-job: expected the Job shrunk and taken over ({expected}), got {found}")


def check_jobset_case(name: str, request: dict[str, Any], reason: str) -> None:
    """The JobSet review is the case it is named for: the whole validation of an exclusive JobSet
    (`valid`), or an UPDATE that leaves its annotations be (`unchanged`)."""
    verdict = validate_jobset(
        request["object"], default_all_or_nothing=False, old=request["oldObject"] or None
    )
    if verdict.reason != reason:
        raise RuntimeError(f"{name}: expected a JobSet validated as {reason!r}, got {verdict}")


def run(plan: LoadPlan, out: Path | None) -> dict[str, Any]:
    payloads = bodies()
    with tempfile.TemporaryDirectory(prefix="webhook-bench-") as tmp, FakeKubeApi() as api:
        tmp_dir = Path(tmp)
        write_dev_certs(
            tmp_dir / "certs", "exclusive-placement-webhook", "bench", ["localhost"], ["127.0.0.1"]
        )
        seed_cluster(api, nodes=64, pools=8)
        body_files = {}
        for name, payload in payloads.items():
            body_files[name] = tmp_dir / f"{name}.json"
            body_files[name].write_bytes(payload)
        trust = ssl.create_default_context(cafile=str(tmp_dir / "certs" / "ca.crt"))
        with webhook_process(tmp_dir / "certs", api.url) as base:
            check_answers(base, payloads, trust)
            before = api.requests["list"] + api.requests["get"]
            before_watch = api.requests["watch"]
            measured = measure(base, plan, body_files, trust)
            results = measured["endpoints"]
            api_calls = api.requests["list"] + api.requests["get"] - before
            metrics_text = httpx.get(f"{base}/metrics", verify=trust).text
        watch_reconnects = api.requests["watch"] - before_watch
    rate_key = f"at_{plan.rate:g}_rps"

    def served(names: tuple[str, ...]) -> int:
        return sum(
            int(results[n]["max_throughput"]["requests"]) + int(results[n][rate_key]["requests"])
            for n in names
        )

    lookups = served(("mutate-follower", "validate-follower"))
    admissions = served(REAL_ENDPOINTS)
    hits = metric_value(metrics_text, "exclusive_placement_leader_cache_total", {"result": "hit"})
    misses = metric_value(metrics_text, "exclusive_placement_leader_cache_total", {"result": "miss"})
    jobset_lookups = {
        result: metric_value(metrics_text, "exclusive_placement_jobset_lookups_total", {"result": result})
        for result in ("memory", "live", "not_found", "error")
    }
    report: dict[str, Any] = {
        "tool": plan.tool,
        "hey": hey_origin(plan.hey) if plan.tool == "hey" else None,
        "settings": {
            "duration_s": plan.duration,
            "rounds": plan.rounds,
            "concurrency": plan.concurrency,
            "rate_rps": plan.rate,
            "server": "uvicorn httptools+uvloop, TLS 1.2+, 1 process",
            "cpus": _cpus(),
        },
        "endpoints": results,
        "generator": measured["generator"],
        "generator_bound": measured["generator_bound"],
        "admissions": admissions,
        "follower_lookups": lookups,
        "api_calls_during_load": api_calls,
        "api_calls_per_admission": round(api_calls / admissions, 6) if admissions else 0.0,
        "watch_reconnects_during_load": watch_reconnects,
        "webhook_cache": {"hits": hits, "misses": misses},
        "jobset_lookups": jobset_lookups,
        "body_bytes": {name: len(payload) for name, payload in payloads.items()},
        "targets": {
            "ratio_to_same_body_noop_min": TARGET_RATIO,
            f"p99_ms_max_{rate_key}": TARGET_P99_MS,
            "api_calls_per_admission": 0,
        },
    }
    report["met"] = {name: _met(results[name], rate_key) for name in REAL_ENDPOINTS}
    # The one live JobSet read is check_answers' first child Job, before the load.
    jobsets_from_memory = (
        jobset_lookups["live"] == 1 and jobset_lookups["not_found"] == jobset_lookups["error"] == 0
    )
    report["met"]["zero_api_calls"] = api_calls == 0 and misses == 0 and jobsets_from_memory
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
    return report


def _met(result: dict[str, Any], rate_key: str) -> dict[str, bool | None]:
    """The targets one endpoint met; the ratio's is None when no ratio could be measured."""
    ratio = result["ratio_to_same_body_noop"]
    return {
        "ratio": None if ratio is None else ratio >= TARGET_RATIO,
        "p99": result[rate_key]["p99_ms"] < TARGET_P99_MS,
    }


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


def print_report(report: dict[str, Any], rate: float) -> None:
    rate_key = f"at_{rate:g}_rps"
    print(f"tool={report['tool']} {report['settings']}")
    print(
        f"{'endpoint':<22} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'ratio':>6} {'same':>6} | "
        f"{rate_key:>12} p50 / p99 ms"
    )
    for name, r in report["endpoints"].items():
        m, p = r["max_throughput"], r[rate_key]
        ratio = "n/a" if r["ratio_to_noop"] is None else r["ratio_to_noop"]
        same = "n/a" if r["ratio_to_same_body_noop"] is None else r["ratio_to_same_body_noop"]
        print(
            f"{name:<22} {m['rps']:>8} {m['p50_ms']:>7} {m['p99_ms']:>7} {ratio:>6} {same:>6} | "
            f"{p['rps']:>12} {p['p50_ms']} / {p['p99_ms']}"
        )
    print(
        "ratio: to the no-op fed a pod review; same: to the no-op fed the endpoint's own review (the target)"
    )
    print(
        f"API calls during load: {report['api_calls_during_load']} for {report['admissions']} admissions "
        f"({report['follower_lookups']} follower lookups); webhook cache {report['webhook_cache']}; "
        f"JobSet lookups {report['jobset_lookups']}"
    )
    print(f"targets met: {report['met']}")
    if report["generator_bound"]:
        advice = INSTALL_HEY if report["tool"] != "hey" else "run it on a machine with more idle cores"
        print(
            f"NO RATIO: the load generator ({report['tool']}), not the webhook, was the bottleneck: "
            f"{'; '.join(report['generator_bound'])}. The throughputs above measure the generator; "
            f"latencies at the fixed rate still hold. To measure the ratio, {advice}.",
            file=sys.stderr,
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench webhook", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--duration", type=float, default=5.0, help="seconds per endpoint per phase per round"
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds over all endpoints")
    parser.add_argument("--concurrency", type=int, default=16, help="closed-loop workers")
    parser.add_argument("--rate", type=float, default=200.0, help="open-loop request rate (req/s)")
    parser.add_argument("--tool", choices=("auto", "hey", "httpx"), default="auto", help="load generator")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="JSON results file (default: %(default)s)"
    )
    parser.add_argument("--quick", action="store_true", help="0.5 s x 1 round smoke run (tests)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cert-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--api", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.serve:
        serve(args.port, args.cert_dir, args.api)
        return 0
    tool = args.tool
    hey = find_hey() if tool in ("auto", "hey") else None
    if tool == "auto":
        tool = "hey" if hey else "httpx"
        if tool == "httpx":
            print(f"hey is not available, using the httpx client instead: {INSTALL_HEY}", file=sys.stderr)
    elif tool == "hey" and hey is None:
        print(f"error: hey is not available: {INSTALL_HEY}; or use --tool httpx", file=sys.stderr)
        return 2
    if args.quick:
        plan = LoadPlan(duration=0.5, rounds=1, concurrency=4, rate=50.0, tool=tool, hey=hey or "hey")
    else:
        plan = LoadPlan(args.duration, args.rounds, args.concurrency, args.rate, tool, hey or "hey")
    if plan.duration <= 0 or plan.rounds < 1 or plan.concurrency < 1 or plan.rate <= 0:
        print("error: --duration, --rate must be > 0 and --rounds, --concurrency >= 1", file=sys.stderr)
        return 2
    report = run(plan, args.out)
    print_report(report, plan.rate)
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
