"""`python -m bench soak [--quick] [--out DIR]`: elastic and scheduling-gate Jobs through faults, on the real
control plane (kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok; devstack.controlplane).

One stack (the real webhook and the real resizer as processes, reaching kube-apiserver through toxiproxy) is
started cleanly; then Jobs of both strategies are submitted while a schedule of faults runs, one every
`fault_interval` seconds, each through the upstream tool that causes it (devstack.faults): answers slowed,
stalled and reset by toxiproxy, every connection dropped, 429s from API Priority and Fairness, the resizer
and the webhook SIGKILLed, a node pool NotReady then deleted, etcd and kube-apiserver restarted, and every
watch expired (etcd compacted, kube-apiserver restarted: 410 Gone). The run converges when every Job has
finished and, on the policy path of pod admission, the resizer has retired it (its pin-followers label
removed: docs/resizer.md).

What is checked (and written to DIR/soak.json):
- every Job reached its target size: it completed with `succeeded == target` and `spec.completions ==
  target`; nothing left pending (Jobs not complete, pods not terminal);
- nothing resized twice: an elastic Job's spec changed exactly once (metadata.generation == 2), a
  scheduling-gate Job's never; the resizer's successful patches of an elastic Job are its resize and, on the
  policy path, its retire;
- zero exclusivity violations, from a replay of every pod event (one Job in two domains at the same time,
  or two Jobs in one domain at the same time);
- every scheduled fault was injected, and the faults are gone at the end.
What the faults did is counted from kube-apiserver's audit log (the 429s and 5xx the webhook and the
resizer were answered, the resizer's Job patches, the pod creations refused) and from the processes' own
`watch_restarts` metrics (watches dropped, ended, expired). Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import ssl
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.paths import SCRATCH
from devstack import faults
from devstack.clusters import KubeCluster
from devstack.commands import LOCAL_HOST
from devstack.controlplane.audit import AuditLog, Request
from devstack.controlplane.kwok import run_time_annotations
from devstack.exclusivity import PodState, node_domains, pod_state
from devstack.interrupts import pause
from devstack.shape import ClusterShape
from devstack.stack import Stack, StackOptions
from devstack.webhooks import PIN_FOLLOWERS_FLAGS, resizer_pin_followers_flag
from kubekit.client import is_conflict
from kubekit.credentials import kubeconfig_credentials
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    GPU_RESOURCE,
    JOB_COMPLETION_INDEX_ANNOTATION,
    PIN_FOLLOWERS_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    STRATEGY_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    Strategy,
)

log = logging.getLogger("bench.soak")

DEFAULT_OUT = SCRATCH
NAMESPACE = "soak"
TOPOLOGY_KEY = GKE_NODEPOOL_LABEL
SOAK_STRATEGIES = (Strategy.ELASTIC, Strategy.SCHEDULING_GATE)
RETRYABLE = frozenset({429, 500, 502, 503, 504})
JOBS_PATH = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
PODS_PATH = f"/api/v1/namespaces/{NAMESPACE}/pods"
CALL_DEADLINE_SECONDS = 180.0
"""How long one API call of the soak's own client is retried (kube-apiserver may be restarting)."""
CATCH_UP_SECONDS = 60.0
"""How long the pod watch may take to show the final list's pod states (it may be mid-relist)."""
TAINT_SECONDS = 120.0
"""How long kube-controller-manager may take to taint a NotReady pool (its node monitor runs every 5 s)."""
FAULT_WINDOW_SECONDS = 6.0
"""How long a fault that lasts (slowed, stalled, reset, rejected answers) stays in place."""
PROCESS_WATCH_RESTARTS = (
    "exclusive_placement_resizer_watch_restarts_total",
    "exclusive_placement_watch_restarts_total",
)


@dataclass(frozen=True)
class SoakPlan:
    jobs_per_strategy: int
    pods_per_job: int
    pools: int
    """Node pools of one 8-GPU node each; one pool is lost to the `fail-pool` fault."""
    pod_run_seconds: float
    """Each pod's run time once Running (kwok's pod-complete Stage): longer than a resizer kill, election and
    resize take, else a leader finishes alone and its Job completes at size 1."""
    faults: tuple[str, ...]
    """Schedule of faults, one every `fault_interval` seconds while Jobs are running."""
    fault_interval: float
    timeout: float
    """Seconds for everything to converge."""
    submit_batch: int = 6

    @property
    def jobs(self) -> int:
        return self.jobs_per_strategy * len(SOAK_STRATEGIES)


FULL = SoakPlan(
    jobs_per_strategy=16,
    pods_per_job=4,
    pools=12,
    pod_run_seconds=90,
    faults=(
        "slow-api",
        "kill-resizer",
        "reject-api",
        "drop-connections",
        "fail-pool",
        "kill-webhook",
        "stalled-api",
        "restart-kube-apiserver",
        "reset-api",
        "kill-resizer",
        "restart-etcd",
        "expire-watches",
    ),
    fault_interval=7.0,
    timeout=900.0,
)
QUICK = SoakPlan(
    jobs_per_strategy=4,
    pods_per_job=3,
    pools=6,
    pod_run_seconds=40,
    faults=("reject-api", "kill-resizer", "drop-connections", "kill-webhook", "expire-watches"),
    fault_interval=5.0,
    timeout=420.0,
    submit_batch=4,
)


class SoakError(RuntimeError):
    def __init__(self, message: str, status: int | None = None) -> None:
        """`status`: the API server's answer, when it gave one that is not worth retrying."""
        super().__init__(message)
        self.status = status


# --- what is submitted --------------------------------------------------------------------------------------


def soak_job(name: str, strategy: str, pods: int, run_seconds: float | None = None) -> dict[str, Any]:
    """An Indexed Job placed exclusively by `TOPOLOGY_KEY`, each pod running `run_seconds` once Running
    (kwok's pod-complete Stage; None: until deleted).

    `podReplacementPolicy: Failed`: a pod lost with its node is replaced only once it is terminal, so a Job
    never runs in its old pool and its new one at once. backoffLimit covers a whole pool failing."""
    notes = {TOPOLOGY_ANNOTATION: TOPOLOGY_KEY, STRATEGY_ANNOTATION: strategy}
    gpu = {GPU_RESOURCE: "1"}
    run_time = run_time_annotations(run_seconds) if run_seconds is not None else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": dict(notes)},
        "spec": {
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "backoffLimit": pods * 4,
            "podReplacementPolicy": "Failed",
            "template": {
                "metadata": {"annotations": {**notes, **run_time}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "worker",
                            "image": "registry.example/worker:1",
                            "resources": {"requests": {"cpu": "1", **gpu}, "limits": gpu},
                        }
                    ],
                },
            },
        },
    }


def job_names(plan: SoakPlan) -> dict[str, str]:
    """Job name -> strategy, interleaved so both strategies are in flight at once."""
    names: dict[str, str] = {}
    for index in range(plan.jobs_per_strategy):
        for strategy in SOAK_STRATEGIES:
            names[f"{'el' if strategy == Strategy.ELASTIC else 'sg'}-{index:04d}"] = strategy
    return names


# --- checks (pure) ------------------------------------------------------------------------------------------


@dataclass
class SimultaneousExclusivity:
    """Pod states in API-server order; a violation is a Job active in two domains at the same time, or two
    Jobs active in one domain at the same time. (A Job moving to a new domain after its pool failed, or a
    domain reused after the previous Job finished, is not.)"""

    node_domain: dict[str, str]
    _active: dict[str, tuple[str, str]] = field(default_factory=dict)
    problems: set[str] = field(default_factory=set)

    def observe(self, state: PodState) -> None:
        if not state.job:
            return
        if not state.active:
            self._active.pop(state.key, None)
            return
        domain = self.node_domain.get(state.node, f"<unknown node {state.node}>")
        for key, (job, other_domain) in self._active.items():
            if key == state.key:
                continue
            if job == state.job and other_domain != domain:
                self.problems.add(f"Job {job} active in {other_domain} and {domain} at once")
            if job != state.job and other_domain == domain:
                first, second = sorted((job, state.job))
                self.problems.add(f"domain {domain} shared by {first} and {second}")
        self._active[state.key] = (state.job, domain)

    @property
    def violations(self) -> int:
        return len(self.problems)


def _condition(job: dict[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def job_outcomes(jobs: list[dict[str, Any]], strategies: dict[str, str], target: int) -> dict[str, list[str]]:
    """Job names by outcome: at_target, pending (not complete), failed, resized_twice, missing."""
    out: dict[str, list[str]] = {
        k: [] for k in ("at_target", "pending", "failed", "resized_twice", "missing")
    }
    seen = {j["metadata"]["name"]: j for j in jobs}
    out["missing"] = sorted(set(strategies) - set(seen))
    for name, job in sorted(seen.items()):
        if name not in strategies:
            continue
        spec, status = job.get("spec") or {}, job.get("status") or {}
        generation = int(job["metadata"].get("generation") or 1)
        elastic = strategies[name] == Strategy.ELASTIC
        resized = (job["metadata"].get("labels") or {}).get(RESIZE_LABEL) == RESIZE_DONE
        if generation > (2 if elastic else 1):
            out["resized_twice"].append(name)
        if _condition(job, "Failed"):
            out["failed"].append(name)
        elif not _condition(job, "Complete"):
            out["pending"].append(name)
        elif (
            spec.get("completions") == target
            and status.get("succeeded") == target
            and (resized or not elastic)
        ):
            out["at_target"].append(name)
    return out


def describe_job(job: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, Any]:
    """What a Job that did not converge looks like at the end: its size, counts, conditions and pods."""
    spec, status, name = job.get("spec") or {}, job.get("status") or {}, job["metadata"]["name"]
    own = [p for p in pods if (p["metadata"].get("labels") or {}).get("job-name") == name]
    return {
        "parallelism": spec.get("parallelism"),
        "completions": spec.get("completions"),
        "resize": (job["metadata"].get("labels") or {}).get(RESIZE_LABEL),
        "counts": {k: status.get(k) for k in ("active", "ready", "succeeded", "failed", "terminating")},
        "conditions": [f"{c.get('type')}={c.get('status')}" for c in status.get("conditions") or []],
        "pods": [
            {
                "name": p["metadata"]["name"],
                "phase": (p.get("status") or {}).get("phase"),
                "node": (p.get("spec") or {}).get("nodeName"),
                "pinned": ((p.get("spec") or {}).get("nodeSelector") or {}).get(TOPOLOGY_KEY),
                "gates": [g.get("name") for g in (p.get("spec") or {}).get("schedulingGates") or []],
                "terminating": bool(p["metadata"].get("deletionTimestamp")),
                "conditions": [
                    f"{c.get('type')}={c.get('status')}:{c.get('reason', '')}"
                    for c in (p.get("status") or {}).get("conditions") or []
                    if c.get("status") != "True" or c.get("type") == "DisruptionTarget"
                ],
            }
            for p in own
        ],
    }


def pending_pods(pods: list[dict[str, Any]]) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in pods
        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    )


# --- the API, through the faults ----------------------------------------------------------------------------


async def call(http: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> Any:
    """One API call, retried through 429/5xx and broken connections (kube-apiserver or etcd restarting)
    for up to `CALL_DEADLINE_SECONDS`, as any client must."""
    deadline = time.monotonic() + CALL_DEADLINE_SECONDS
    last = ""
    while time.monotonic() < deadline:
        try:
            response = await http.request(method, path, **kwargs)
        except httpx.TransportError as err:
            last = repr(err)
        else:
            if response.status_code not in RETRYABLE:
                if response.status_code >= 400:
                    raise SoakError(
                        f"{method} {path}: HTTP {response.status_code} {response.text[:300]}",
                        response.status_code,
                    )
                return response.json()
            last = f"HTTP {response.status_code}"
        await asyncio.sleep(0.5)
    raise SoakError(f"{method} {path} kept failing for {CALL_DEADLINE_SECONDS:.0f}s: {last}")


async def create_job(http: httpx.AsyncClient, job: dict[str, Any]) -> None:
    try:
        await call(http, "POST", JOBS_PATH, json=job)
    except SoakError as err:
        if not is_conflict(err.status):  # an earlier attempt did get through
            raise


class PodFollower:
    """Every pod event of the namespace, in order, through dropped watches (resume from the last
    resourceVersion) and 410 Gone (re-list; pods gone meanwhile are observed as deleted)."""

    def __init__(self, on_state: Callable[[PodState], None]) -> None:
        self.on_state = on_state
        self.known: dict[str, dict[str, Any]] = {}
        self.counts: Counter[str] = Counter()

    def _observe(self, event_type: str, pod: dict[str, Any]) -> None:
        key = pod["metadata"]["name"]
        if event_type == "DELETED":
            self.known.pop(key, None)
        else:
            self.known[key] = pod
        self.on_state(pod_state(pod, deleted=event_type == "DELETED"))

    async def _relist(self, http: httpx.AsyncClient) -> str:
        listing = await call(http, "GET", PODS_PATH)
        current = {p["metadata"]["name"]: p for p in listing["items"]}
        for name in set(self.known) - set(current):
            self._observe("DELETED", self.known[name])
        for pod in current.values():
            self._observe("MODIFIED", pod)
        self.counts["relists"] += 1
        return str(listing["metadata"]["resourceVersion"])

    def unseen(self, pods: list[dict[str, Any]]) -> list[str]:
        """How the replay differs from `pods` (a later list): pods not yet seen at their listed version or
        later, and pods whose deletion it has not seen; empty once it has caught up."""
        listed = {p["metadata"]["name"]: int(p["metadata"]["resourceVersion"]) for p in pods}
        gone = [f"{name} deleted, not seen" for name in sorted(set(self.known) - set(listed))]
        behind = [
            f"{name} at {self._seen_version(name)}, listed at {version}"
            for name, version in sorted(listed.items())
            if self._seen_version(name) < version
        ]
        return gone + behind

    def _seen_version(self, name: str) -> int:
        pod = self.known.get(name)
        return int(pod["metadata"]["resourceVersion"]) if pod is not None else 0

    def has_seen(self, pods: list[dict[str, Any]]) -> bool:
        return not self.unseen(pods)

    async def catch_up(self, pods: list[dict[str, Any]], timeout: float) -> None:
        """Wait until the replay has seen the final list's state of every pod (`unseen` is empty)."""
        deadline = time.monotonic() + timeout
        while not self.has_seen(pods):
            if time.monotonic() > deadline:
                missing = self.unseen(pods)
                raise SoakError(
                    f"the pod watch had not caught up with the final list after {timeout:.0f}s: "
                    f"{len(missing)} pods, e.g. {'; '.join(missing[:5])}"
                )
            await asyncio.sleep(0.05)

    async def follow(self, http: httpx.AsyncClient) -> None:
        version: str | None = None
        while True:
            if version is None:
                version = await self._relist(http)
            params = {"watch": "true", "resourceVersion": version, "allowWatchBookmarks": "true"}
            try:
                async with http.stream("GET", PODS_PATH, params=params) as response:
                    if response.status_code == 410:
                        self.counts["watch_expired"] += 1
                        version = None
                        continue
                    if response.status_code != 200:
                        await asyncio.sleep(0.1)
                        continue
                    async for line in response.aiter_lines():
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            if obj.get("code") == 410:
                                self.counts["watch_expired"] += 1
                                version = None
                            break
                        version = str(obj["metadata"]["resourceVersion"])
                        if event["type"] != "BOOKMARK":
                            self._observe(event["type"], obj)
                self.counts["watch_restarts"] += 1
            except (httpx.HTTPError, SoakError):
                self.counts["watch_errors"] += 1
                await asyncio.sleep(0.5)


# --- faults -------------------------------------------------------------------------------------------------


class ProcessWatchRestarts:
    """The webhook's and the resizers' `watch_restarts` counters by reason, summed over every run of each
    process (sampled before a kill and at the end)."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, int], Counter[str]] = {}

    def sample(self, stack: Stack) -> None:
        pages: list[tuple[str, int | None, str]] = []
        with httpx.Client(timeout=5.0, verify=ssl.create_default_context(cafile=str(stack.ca_file))) as http:
            for index, resizer in enumerate(stack.resizers):
                if resizer.running:
                    url = f"http://{LOCAL_HOST}:{stack.resizer_metrics_ports[index]}/metrics"
                    pages.append((resizer.name, resizer.pid, _page(http, url)))
            webhook = stack.webhook
            if webhook is not None and webhook.running:
                pages.append((webhook.name, webhook.pid, _page(http, f"{stack.webhook_url}/metrics")))
        for name, pid, page in pages:
            if pid is not None and page:
                self._last[(name, pid)] = watch_restart_reasons(page)

    def totals(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for counts in self._last.values():
            total.update(counts)
        return dict(sorted(total.items()))


def _page(http: httpx.Client, url: str) -> str:
    try:
        return http.get(url).text
    except httpx.HTTPError as err:
        log.warning("%s unreachable: %s", url, err)
        return ""


def watch_restart_reasons(page: str) -> Counter[str]:
    """reason -> watches restarted, from one /metrics page (every informer summed)."""
    counts: Counter[str] = Counter()
    for line in page.splitlines():
        if line.startswith(PROCESS_WATCH_RESTARTS) and 'reason="' in line:
            reason = line.split('reason="', 1)[1].split('"', 1)[0]
            counts[reason] += int(float(line.rsplit(" ", 1)[1]))
    return counts


@dataclass
class FaultContext:
    """What a fault needs besides the stack: the pod replay (to pick a busy pool) and the counters."""

    stack: Stack
    follower: PodFollower
    domains: dict[str, str]
    injected: Counter[str] = field(default_factory=Counter)
    watch_restarts: ProcessWatchRestarts = field(default_factory=ProcessWatchRestarts)


def busy_pool(follower: PodFollower, domains: dict[str, str]) -> str:
    """The pool of an elastic Job whose leader is running (so the failure hits a resized Job, not an idle
    pool); not one whose leader has finished: its completion index 0 never runs again."""
    running = sorted(
        (p["metadata"]["name"], p["spec"]["nodeName"])
        for p in list(follower.known.values())
        if (p.get("status") or {}).get("phase") == "Running"
        and p["metadata"]["name"].startswith("el-")
        and (p["metadata"].get("annotations") or {}).get(JOB_COMPLETION_INDEX_ANNOTATION) == "0"
    )
    busy = [domains[node] for _, node in running if node in domains]
    return busy[0] if busy else sorted(set(domains.values()))[0]


def fail_pool(context: FaultContext) -> None:
    """A running Job's pool NotReady (kube-controller-manager taints it), then its Nodes deleted."""
    stack = context.stack
    pool = busy_pool(context.follower, context.domains)
    nodes = faults.node_pool_not_ready(stack, pool)
    deadline = time.monotonic() + TAINT_SECONDS
    while not all(faults.is_tainted_not_ready(stack.client.get("Node", name)) for name in nodes):
        if time.monotonic() > deadline:
            raise SoakError(f"kube-controller-manager did not taint pool {pool} within {TAINT_SECONDS:.0f}s")
        pause(0.5)
    lost = [
        p
        for p in list(context.follower.known.values())
        if (p.get("spec") or {}).get("nodeName") in nodes and pod_state(p).active
    ]
    faults.delete_node_pool(stack, pool)
    context.injected["nodes_failed"] += len(nodes)
    context.injected["running_pods_on_failed_nodes"] += len(lost)


def _lasting(
    fault: Callable[[Stack], contextlib.AbstractContextManager[None]],
) -> Callable[[FaultContext], None]:
    def inject(context: FaultContext) -> None:
        with fault(context.stack):
            pause(FAULT_WINDOW_SECONDS)

    return inject


def _before_kill(kill: Callable[[Stack], None]) -> Callable[[FaultContext], None]:
    def inject(context: FaultContext) -> None:
        context.watch_restarts.sample(context.stack)  # a killed process's counters die with it
        kill(context.stack)

    return inject


FAULTS: dict[str, Callable[[FaultContext], object]] = {
    "slow-api": _lasting(faults.slow_api),
    "stalled-api": _lasting(faults.stalled_api),
    "reset-api": _lasting(faults.reset_api),
    "reject-api": _lasting(faults.rejected_api),
    "drop-connections": lambda context: faults.drop_connections(context.stack),
    "kill-resizer": _before_kill(faults.kill_resizer),
    "kill-webhook": _before_kill(faults.kill_webhook),
    "fail-pool": fail_pool,
    "restart-etcd": lambda context: faults.restart_component(context.stack, "etcd"),
    "restart-kube-apiserver": lambda context: faults.restart_component(context.stack, "kube-apiserver"),
    "expire-watches": lambda context: faults.expire_watches(context.stack),
}


async def run_fault_schedule(context: FaultContext, plan: SoakPlan, done: asyncio.Event) -> None:
    for fault in plan.faults:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), plan.fault_interval)
        if done.is_set():
            log.warning("converged before fault %s could be injected", fault)
            return
        log.info("injecting %s", fault)
        await asyncio.to_thread(FAULTS[fault], context)
        context.injected[fault] += 1


def leftover_faults(stack: Stack) -> list[str]:
    """Faults still in place after the run: toxics on the proxy, the rejecting priority level."""
    left = [f"toxic {name}" for name in faults.fault_proxy(stack).toxics()]
    names = {o["metadata"]["name"] for o in stack.client.list("FlowSchema")}
    return left + [
        f"FlowSchema {name}" for name in sorted(names & {faults.REJECT_LEVEL, faults.LEADER_ELECTION_SCHEMA})
    ]


# --- what the audit log says --------------------------------------------------------------------------------


def project_answers(requests: Iterable[Request], users: set[str]) -> dict[str, Any]:
    """The answers kube-apiserver gave the webhook and the resizer (by code class), the resizer's successful
    Job patches by Job, and the pod creations in the soak's namespace refused."""
    codes: Counter[str] = Counter()
    patches: Counter[str] = Counter()
    refused = 0
    for request in requests:
        if request.user in users:
            if request.code == 429:
                codes["api_429"] += 1
            elif request.code >= 500:
                codes["api_5xx"] += 1
            if (
                request.resource == "jobs"
                and not request.subresource
                and request.verb == "patch"
                and request.namespace == NAMESPACE
                and 200 <= request.code < 300
            ):
                patches[request.name] += 1
        if (
            request.verb == "create"
            and request.resource == "pods"
            and not request.subresource
            and request.namespace == NAMESPACE
            and request.code >= 400
        ):
            refused += 1
    return {"codes": dict(codes), "job_patches": dict(patches), "pod_creates_refused": refused}


# --- the run ------------------------------------------------------------------------------------------------


async def wait_converged(http: httpx.AsyncClient, names: dict[str, str], timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        jobs = (await call(http, "GET", JOBS_PATH))["items"]
        finished = [
            j
            for j in jobs
            if (_condition(j, "Complete") or _condition(j, "Failed"))
            and PIN_FOLLOWERS_LABEL not in (j["metadata"].get("labels") or {})
        ]
        if len(jobs) == len(names) and len(finished) == len(names):
            return time.monotonic() - started
        await asyncio.sleep(2.0)
    raise SoakError(f"not converged within {timeout:.0f}s")


def admin_http(stack: Stack) -> httpx.AsyncClient:
    """The soak's own client: the cluster admin, straight to kube-apiserver (not through the proxy)."""
    server, credentials = kubeconfig_credentials(stack.kubeconfig)
    return httpx.AsyncClient(
        base_url=server,
        verify=credentials.ssl_context(),
        timeout=httpx.Timeout(30.0, read=60.0),
        headers={"User-Agent": "soak"},
    )


async def soak(stack: Stack, plan: SoakPlan) -> dict[str, Any]:
    names = job_names(plan)
    domains = node_domains(stack.client.list("Node"), TOPOLOGY_KEY)
    replay = SimultaneousExclusivity(domains)
    follower = PodFollower(replay.observe)
    context = FaultContext(stack, follower, domains)
    cluster = stack.cluster
    assert isinstance(cluster, KubeCluster)
    audit = AuditLog(cluster.control_plane.audit_log)
    users = {identity.username for identity in cluster.identities.values()}
    async with admin_http(stack) as http:
        await call(http, "POST", "/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
        await _wait_default_service_account(http)
        since = audit.mark()
        watch = asyncio.create_task(follower.follow(http))
        done = asyncio.Event()
        schedule = asyncio.create_task(run_fault_schedule(context, plan, done))
        started = time.monotonic()
        converged_after: float | None = None
        error = ""
        try:
            items = list(names.items())
            for offset in range(0, len(items), plan.submit_batch):
                batch = items[offset : offset + plan.submit_batch]
                await asyncio.gather(
                    *(
                        create_job(http, soak_job(n, s, plan.pods_per_job, plan.pod_run_seconds))
                        for n, s in batch
                    )
                )
            await wait_converged(http, names, plan.timeout - (time.monotonic() - started))
            converged_after = time.monotonic() - started
        except SoakError as err:
            error = str(err)
            log.error("soak did not converge: %s", err)
        finally:
            done.set()
            try:
                await schedule
            except Exception as err:  # a fault that could not be injected is a failed run, not a crash
                error = "; ".join(filter(None, (error, f"fault schedule: {err!r}")))
        context.watch_restarts.sample(stack)
        jobs = (await call(http, "GET", JOBS_PATH))["items"]
        pods = (await call(http, "GET", PODS_PATH))["items"]
        try:
            await follower.catch_up(pods, CATCH_UP_SECONDS)
        except SoakError as err:
            error = "; ".join(filter(None, (error, str(err))))
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
    stack.check_alive()
    answers = project_answers(audit.requests(since=since), users)
    retires = resizer_pin_followers_flag(stack.chart_objects) == PIN_FOLLOWERS_FLAGS[0]
    return report(
        plan,
        retires=retires,
        names=names,
        jobs=jobs,
        pods=pods,
        answers=answers,
        context=context,
        replay=replay,
        follower=follower,
        converged_after=converged_after,
        error=error,
        leftovers=leftover_faults(stack),
    )


async def _wait_default_service_account(http: httpx.AsyncClient) -> None:
    """kube-controller-manager adds a namespace's default ServiceAccount; until then pods are refused."""
    path = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default"
    deadline = time.monotonic() + 60.0
    while (await http.get(path)).status_code != 200:
        if time.monotonic() > deadline:
            raise SoakError(f"no default ServiceAccount in {NAMESPACE} after 60s")
        await asyncio.sleep(0.2)


def report(
    plan: SoakPlan,
    *,
    names: dict[str, str],
    jobs: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    answers: dict[str, Any],
    context: FaultContext,
    replay: SimultaneousExclusivity,
    follower: PodFollower,
    converged_after: float | None,
    error: str,
    leftovers: list[str],
    retires: bool = False,
) -> dict[str, Any]:
    outcomes = job_outcomes(jobs, names, plan.pods_per_job)
    elastic = sorted(n for n, s in names.items() if s == Strategy.ELASTIC)
    patches: dict[str, int] = answers["job_patches"]
    injected = context.injected
    result: dict[str, Any] = {
        "control_plane": "kube",
        "jobs": len(names),
        "jobs_by_strategy": dict(Counter(names.values())),
        "pods_per_job": plan.pods_per_job,
        "node_pools": plan.pools,
        "faults_injected": {fault: injected[fault] for fault in sorted(set(plan.faults))},
        "fault_effects": {
            **{k: v for k, v in injected.items() if k not in FAULTS},
            **answers["codes"],
            "process_watch_restarts": context.watch_restarts.totals(),
        },
        "jobs_at_target": len(outcomes["at_target"]),
        "jobs_resized_twice": len(outcomes["resized_twice"]),
        "jobs_pending": len(outcomes["pending"]) + len(outcomes["missing"]),
        "jobs_failed": len(outcomes["failed"]),
        "pods_pending": len(pending_pods(pods)),
        "job_patches": sum(patches.values()),
        # the resize, and the retire when the resizer labels pin-followers (the policy path)
        "elastic_jobs_patched_once": sum(1 for n in elastic if patches.get(n) == 1 + retires),
        "elastic_jobs": len(elastic),
        "pod_creates_refused": answers["pod_creates_refused"],
        "exclusive_violations": replay.violations,
        "seconds_to_converge": round(converged_after, 1) if converged_after is not None else None,
        "pod_watch": dict(follower.counts),
        "plan": {k: v for k, v in asdict(plan).items() if k != "faults"}
        | {"fault_schedule": list(plan.faults)},
    }
    problems = [error] if error else []
    problems += [f"Job {n} not at target" for n in sorted(set(names) - set(outcomes["at_target"]))][:20]
    problems += [f"Job {n} resized twice" for n in outcomes["resized_twice"]]
    problems += [f"pod {n} still pending" for n in pending_pods(pods)][:20]
    problems += sorted(replay.problems)[:20]
    problems += [f"elastic Job {n} never patched by the resizer" for n in elastic if not patches.get(n)][:20]
    problems += [f"fault still in place at the end: {left}" for left in leftovers]
    for fault in sorted(set(plan.faults)):
        if injected[fault] != plan.faults.count(fault):
            problems.append(f"{fault}: {injected[fault]} injected, {plan.faults.count(fault)} scheduled")
    if problems:
        result["problems"] = problems
        by_name = {j["metadata"]["name"]: j for j in jobs}
        stuck = sorted(set(names) - set(outcomes["at_target"]) - set(outcomes["missing"]))[:5]
        result["stuck_jobs"] = {n: describe_job(by_name[n], pods) for n in stuck}
    return result


def stack_options(plan: SoakPlan) -> StackOptions:
    return StackOptions(
        cluster=ClusterShape(nodes=plan.pools, pools=plan.pools, gpus_per_node=8),
        fault_proxy=True,
        control_plane_args=faults.SURVIVES_RESTARTS,
        jobset=False,
        startup_timeout=120,
    )


def run(plan: SoakPlan) -> dict[str, Any]:
    with Stack(stack_options(plan)) as stack:
        return asyncio.run(soak(stack, plan))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench soak", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK.jobs} Jobs, {len(QUICK.faults)} faults (instead of {FULL.jobs}, {len(FULL.faults)})",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="directory for soak.json (default: %(default)s)"
    )
    parser.add_argument("--timeout", type=float, help="seconds to converge (default: the plan's)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    plan = QUICK if args.quick else FULL
    if args.timeout is not None:
        if args.timeout <= 0:
            print("error: --timeout must be > 0", file=sys.stderr)
            return 2
        plan = SoakPlan(**{**asdict(plan), "timeout": args.timeout})
    result = run(plan)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "soak.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("plan", "problems")}, indent=2))
    print(f"wrote {path}")
    if result.get("problems"):
        print("FAILED:\n  " + "\n  ".join(result["problems"]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
