"""`python -m bench soak [--quick] [--out DIR]`: elastic and scheduling-gate Jobs through faults.

One stack (kubesim + the real webhook + the real resizer as processes, as `make run` starts them) is set
up cleanly; then kubesim's faults are switched on (a fraction of API requests answered 429/500, added
latency, watch streams dropped) and Jobs of both strategies are submitted while a schedule of process and
node faults runs: the resizer SIGKILLed and restarted several times, the webhook restarted once, a node pool
failed under a running Job. The run converges when every Job has completed.

What is checked (and written to DIR/soak.json):
- every Job reached its target size: it completed with `succeeded == target` and `spec.completions ==
  target`; nothing left pending (Jobs not complete, pods not terminal);
- nothing resized twice: an elastic Job's spec changed exactly once (metadata.generation == 2), a
  scheduling-gate Job's never, and kubesim counted exactly one successful Job patch per elastic Job;
- zero exclusivity violations, from a replay of every pod event (one Job in two domains at the same time,
  or two Jobs in one domain at the same time).
Exit status 1 when any of these fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.paths import SCRATCH
from devstack.commands import KubesimFlags
from devstack.exclusivity import PodState, node_domains, pod_state
from devstack.stack import Stack, StackOptions
from kubesim.controllers.gang import GANG_ANNOTATION, GANG_SIZE_ANNOTATION
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    GPU_RESOURCE,
    JOB_COMPLETION_INDEX_ANNOTATION,
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
API_FAULTS = "error-rate=0.1,error-codes=429+500,retry-after=1,latency-ms=1-20,drop-watch-after=3-10"
RETRYABLE = frozenset({429, 500, 502, 503, 504})
JOBS_PATH = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
PODS_PATH = f"/api/v1/namespaces/{NAMESPACE}/pods"
CATCH_UP_SECONDS = 30.0
"""How long the pod watch may take to show the final list's pod states (it may be mid-relist)."""


@dataclass(frozen=True)
class SoakPlan:
    jobs_per_strategy: int
    pods_per_job: int
    pools: int
    pod_run_seconds: float
    """Simulated; long enough that a leader outlives a resizer restart (else the Job completes at size 1)."""
    time_scale: float
    faults: tuple[str, ...]
    """Schedule of process/node faults, one every `fault_interval` wall seconds while Jobs are running."""
    fault_interval: float
    timeout: float
    """Wall seconds for everything to converge."""
    submit_batch: int = 10
    seed: int = 7

    @property
    def jobs(self) -> int:
        return self.jobs_per_strategy * len(SOAK_STRATEGIES)


FULL = SoakPlan(
    jobs_per_strategy=110,
    pods_per_job=4,
    pools=60,
    pod_run_seconds=300,
    time_scale=0.05,
    faults=(
        "kill-resizer",
        "fail-pool",
        "kill-resizer",
        "restart-webhook",
        "kill-resizer",
        "kill-resizer",
        "kill-resizer",
    ),
    fault_interval=6.0,
    timeout=900.0,
)
QUICK = SoakPlan(
    jobs_per_strategy=6,
    pods_per_job=3,
    pools=6,
    pod_run_seconds=200,
    time_scale=0.05,
    faults=("kill-resizer", "fail-pool", "restart-webhook", "kill-resizer"),
    fault_interval=4.0,
    timeout=150.0,  # under pytest's 180 s, so a stuck run reports what is stuck
    submit_batch=4,
)


FAULT_COUNTERS = {
    "kill-resizer": "resizer_sigkill",
    "restart-webhook": "webhook_restart",
    "fail-pool": "node_pool_failed",
}


class SoakError(RuntimeError):
    pass


# --- what is submitted --------------------------------------------------------------------------------------


def soak_job(name: str, strategy: str, pods: int) -> dict[str, Any]:
    """An Indexed Job placed exclusively by `TOPOLOGY_KEY`; backoffLimit covers a whole pool failing.

    Its pods are one kubesim gang: they progress only while all of them run, as a training program's
    workers do. Pods that each ran a fixed time alone let a leader finish before the Job controller, at its
    20 qps, had created its followers, stranding them (docs/design.md, "A finished leader")."""
    notes = {TOPOLOGY_ANNOTATION: TOPOLOGY_KEY, STRATEGY_ANNOTATION: strategy}
    gang = {GANG_ANNOTATION: name, GANG_SIZE_ANNOTATION: str(pods)}
    gpu = {GPU_RESOURCE: "1"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": dict(notes)},
        "spec": {
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "backoffLimit": pods * 4,
            "template": {
                "metadata": {"annotations": {**notes, **gang}},
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
    """One API call, retried through injected 429/5xx and dropped connections (as any client must)."""
    last = ""
    for _ in range(60):
        try:
            response = await http.request(method, path, **kwargs)
        except httpx.TransportError as err:
            last = repr(err)
        else:
            if response.status_code not in RETRYABLE:
                if response.status_code >= 400:
                    raise SoakError(f"{method} {path}: HTTP {response.status_code} {response.text[:300]}")
                return response.json()
            last = f"HTTP {response.status_code}"
        await asyncio.sleep(0.2)
    raise SoakError(f"{method} {path} kept failing: {last}")


async def create_job(http: httpx.AsyncClient, job: dict[str, Any]) -> None:
    try:
        await call(http, "POST", JOBS_PATH, json=job)
    except SoakError as err:
        if "HTTP 409" not in str(err):  # an earlier attempt did get through
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
                            version = None if obj.get("code") == 410 else version
                            break
                        version = str(obj["metadata"]["resourceVersion"])
                        if event["type"] != "BOOKMARK":
                            self._observe(event["type"], obj)
                self.counts["watch_restarts"] += 1
            except httpx.HTTPError:
                self.counts["watch_errors"] += 1
                await asyncio.sleep(0.1)


# --- faults -------------------------------------------------------------------------------------------------


async def fail_busy_pool(
    http: httpx.AsyncClient, follower: PodFollower, domains: dict[str, str]
) -> dict[str, Any]:
    """Fail the node pool of an elastic Job whose leader is running (so the failure hits a resized Job,
    not an idle pool). Not one whose leader has finished: its completion index 0 never runs again, so its
    failed followers can only return to that same, failed pool (docs/design.md, "A finished leader")."""
    running = sorted(
        (p["metadata"]["name"], p["spec"]["nodeName"])
        for p in follower.known.values()
        if (p.get("status") or {}).get("phase") == "Running"
        and p["metadata"]["name"].startswith("el-")
        and (p["metadata"].get("annotations") or {}).get(JOB_COMPLETION_INDEX_ANNOTATION) == "0"
    )
    busy = [domains[node] for _, node in running if node in domains]
    if not busy:
        busy = sorted(set(domains.values()))
    pool = busy[0]
    result: dict[str, Any] = await call(
        http, "POST", "/debug/fail-nodes", params={"labelSelector": f"{TOPOLOGY_KEY}={pool}"}
    )
    log.info("failed node pool %s: %s", pool, result)
    return {"pool": pool, **result}


async def run_fault_schedule(
    stack: Stack,
    *,
    http: httpx.AsyncClient,
    follower: PodFollower,
    domains: dict[str, str],
    plan: SoakPlan,
    injected: Counter[str],
    done: asyncio.Event,
) -> None:
    for fault in plan.faults:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), plan.fault_interval)
        if done.is_set():
            log.warning("converged before fault %s could be injected", fault)
            return
        log.info("injecting %s", fault)
        if fault == "kill-resizer":
            await asyncio.to_thread(stack.restart_resizer, 0, kill=True)
        elif fault == "restart-webhook":
            await asyncio.to_thread(stack.restart_webhook)
        elif fault == "fail-pool":
            result = await fail_busy_pool(http, follower, domains)
            injected["nodes_failed"] += int(result.get("nodes", 0))
            injected["pods_failed_by_node_loss"] += int(result.get("pods", 0))
        else:
            raise SoakError(f"unknown fault {fault!r}")
        injected[FAULT_COUNTERS[fault]] += 1


# --- the run ------------------------------------------------------------------------------------------------


async def wait_converged(http: httpx.AsyncClient, names: dict[str, str], timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        jobs = (await call(http, "GET", JOBS_PATH))["items"]
        finished = [j for j in jobs if _condition(j, "Complete") or _condition(j, "Failed")]
        if len(jobs) == len(names) and len(finished) == len(names):
            return time.monotonic() - started
        await asyncio.sleep(1.0)
    raise SoakError(f"not converged within {timeout:.0f}s")


async def soak(stack: Stack, plan: SoakPlan) -> dict[str, Any]:
    names = job_names(plan)
    domains = node_domains(stack.client.list("Node"), TOPOLOGY_KEY)
    replay = SimultaneousExclusivity(domains)
    follower = PodFollower(replay.observe)
    injected: Counter[str] = Counter()
    timeout = httpx.Timeout(30.0, read=60.0)
    async with httpx.AsyncClient(
        base_url=stack.server, timeout=timeout, headers={"User-Agent": "soak"}
    ) as http:
        await call(http, "POST", "/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
        await call(http, "POST", "/debug/reset-stats")
        watch = asyncio.create_task(follower.follow(http))
        await call(http, "POST", "/debug/faults", json={"faults": API_FAULTS})
        done = asyncio.Event()
        faults = asyncio.create_task(
            run_fault_schedule(
                stack, http=http, follower=follower, domains=domains, plan=plan, injected=injected, done=done
            )
        )
        started = time.monotonic()
        converged_after: float | None = None
        error = ""
        try:
            items = list(names.items())
            for offset in range(0, len(items), plan.submit_batch):
                batch = items[offset : offset + plan.submit_batch]
                await asyncio.gather(*(create_job(http, soak_job(n, s, plan.pods_per_job)) for n, s in batch))
            await wait_converged(http, names, plan.timeout - (time.monotonic() - started))
            converged_after = time.monotonic() - started
        except SoakError as err:
            error = str(err)
            log.error("soak did not converge: %s", err)
        finally:
            done.set()
            await faults
        await call(http, "POST", "/debug/faults", json={"faults": ""})
        stats = await call(http, "GET", "/debug/stats")
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
    return report(
        plan,
        names=names,
        jobs=jobs,
        pods=pods,
        stats=stats,
        injected=injected,
        replay=replay,
        follower=follower,
        converged_after=converged_after,
        error=error,
    )


def report(
    plan: SoakPlan,
    *,
    names: dict[str, str],
    jobs: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    stats: dict[str, Any],
    injected: Counter[str],
    replay: SimultaneousExclusivity,
    follower: PodFollower,
    converged_after: float | None,
    error: str,
) -> dict[str, Any]:
    outcomes = job_outcomes(jobs, names, plan.pods_per_job)
    elastic = sum(1 for s in names.values() if s == Strategy.ELASTIC)
    faults = stats.get("faults") or {}
    api_faults = {f"api_{code}": n for code, n in (faults.get("injected") or {}).items()}
    result: dict[str, Any] = {
        "jobs": len(names),
        "jobs_by_strategy": dict(Counter(names.values())),
        "pods_per_job": plan.pods_per_job,
        "node_pools": plan.pools,
        "faults_injected": {
            **api_faults,
            "watch_streams_dropped": faults.get("watch_streams_dropped", 0),
            **dict(injected),
        },
        "jobs_at_target": len(outcomes["at_target"]),
        "jobs_resized_twice": len(outcomes["resized_twice"]),
        "jobs_pending": len(outcomes["pending"]) + len(outcomes["missing"]),
        "jobs_failed": len(outcomes["failed"]),
        "pods_pending": len(pending_pods(pods)),
        "job_patches": stats["jobs"]["patched"],
        "expected_job_patches": elastic,
        "pod_creates_rejected": stats["pods"]["create_rejected"],
        "exclusive_violations": replay.violations,
        "seconds_to_converge": round(converged_after, 1) if converged_after is not None else None,
        "pod_watch": dict(follower.counts),
        "plan": {k: v for k, v in asdict(plan).items() if k != "faults"}
        | {"fault_schedule": list(plan.faults)},
        "api_faults": API_FAULTS,
    }
    problems = [error] if error else []
    problems += [f"Job {n} not at target" for n in sorted(set(names) - set(outcomes["at_target"]))][:20]
    problems += [f"Job {n} resized twice" for n in outcomes["resized_twice"]]
    problems += [f"pod {n} still pending" for n in pending_pods(pods)][:20]
    problems += sorted(replay.problems)[:20]
    if result["job_patches"] != elastic:
        problems.append(f"{result['job_patches']} Job patches for {elastic} elastic Jobs (expected one each)")
    for fault, counter in FAULT_COUNTERS.items():
        if injected[counter] != plan.faults.count(fault):
            problems.append(f"{fault}: {injected[counter]} injected, {plan.faults.count(fault)} scheduled")
    if problems:
        result["problems"] = problems
        by_name = {j["metadata"]["name"]: j for j in jobs}
        stuck = sorted(set(names) - set(outcomes["at_target"]) - set(outcomes["missing"]))[:5]
        result["stuck_jobs"] = {n: describe_job(by_name[n], pods) for n in stuck}
    return result


def run(plan: SoakPlan) -> dict[str, Any]:
    cluster = KubesimFlags(
        nodes=plan.pools,
        pools=plan.pools,
        gpus_per_node=8,
        time_scale=plan.time_scale,
        pod_run_seconds=plan.pod_run_seconds,
        seed=plan.seed,
    )
    with Stack(StackOptions(cluster=cluster, startup_timeout=120)) as stack:
        return asyncio.run(soak(stack, plan))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench soak", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK.jobs} Jobs instead of {FULL.jobs} (~1 min)"
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="directory for soak.json (default: %(default)s)"
    )
    parser.add_argument("--timeout", type=float, help="wall seconds to converge (default: the plan's)")
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
