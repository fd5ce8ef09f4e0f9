"""`python -m bench strategies [--quick] [--out DIR]`: the four strategies side by side on kubesim.

For each scenario one stack (kubesim + the real webhook + the real resizer, as `make run` starts them) is
brought up; then each strategy runs in turn in a fresh namespace, selected per Job by the
`exclusive-placement.io/strategy` annotation on the JobSet's pod template (one webhook process serves all
four, so nothing but the strategy differs between runs). Between runs the previous JobSet is deleted and
its pods are gone before kubesim's counters are reset.

A scenario with a backlog first submits plain, non-exclusive batch Jobs in a second namespace and creates
the measured JobSet once all of their pods exist, so its leaders queue behind what the (throttled)
scheduler has not bound yet; the counters are reset just before the JobSet is created.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.recorder import BacklogTracker, PodRecorder, stop
from bench.scenarios import (
    FULL_SCENARIOS,
    GPUS_PER_NODE,
    QUICK_SCENARIOS,
    TOPOLOGY_KEY,
    Backlog,
    Scenario,
    backlog_jobs,
    jobset_manifest,
)
from devstack.commands import KubesimFlags
from devstack.exclusivity import node_domains
from devstack.stack import Stack, StackOptions
from placement.constants import (
    JOBSET_GROUP,
    JOBSET_VERSION,
    RESIZE_DONE,
    RESIZE_LABEL,
    ROLE_FOLLOWER,
    ROLE_LABEL,
    STRATEGIES,
    Strategy,
)

log = logging.getLogger("bench.strategies")

DEFAULT_OUT = Path(__file__).resolve().parent / "results"
JOBSET_NAME = "bench"
JOBSETS_PATH = f"/apis/{JOBSET_GROUP}/{JOBSET_VERSION}/namespaces/{{namespace}}/jobsets"
BACKLOG_CREATION_TIMEOUT = 120.0
"""Wall seconds for the Job controller to create every backlog pod before the run counts as failed."""


class BenchError(RuntimeError):
    pass


@dataclass(frozen=True)
class RunSettings:
    time_scale: float
    run_timeout: float
    """Wall seconds one strategy run may take before it is recorded as failed."""


def result_from_stats(
    stats: dict[str, Any], seconds: float, violations: int, leader_waits: Sequence[float] = ()
) -> dict[str, Any]:
    """The per-strategy record of strategies.json, from a `/debug/stats` snapshot: the issue's fields,
    plus scheduling cycles, how long leaders waited to be bound (wall seconds, seen on the watch) and the
    request breakdown by verb and resource (where the differences come from)."""
    return {
        "pod_creates_rejected": stats["pods"]["create_rejected"],
        "pod_creates_accepted": stats["pods"]["create_accepted"],
        "api_requests": stats["requests"]["total"],
        "api_writes": stats["requests"]["writes"],
        "admission_calls": stats["admission"]["calls"],
        "job_patches": stats["jobs"]["patched"],
        "pod_patches": stats["pods"]["patched"],
        "scheduler_filter_evaluations": stats["scheduler"]["filter_evaluations"],
        "scheduler_affinity_evaluations": stats["scheduler"]["affinity_evaluations"],
        "seconds_to_all_running": round(seconds, 3),
        "exclusive_violations": violations,
        "scheduler_attempts": stats["scheduler"].get("attempts", 0),
        "leader_wait_mean_seconds": round(statistics.fmean(leader_waits), 3) if leader_waits else None,
        "leader_wait_max_seconds": round(max(leader_waits), 3) if leader_waits else None,
        "api_requests_by_verb_resource": dict(sorted(stats["requests"].get("by_verb_resource", {}).items())),
    }


def strategy_problems(
    strategy: str, jobs: list[dict[str, Any]], pods: list[dict[str, Any]], expected_jobs: int
) -> list[str]:
    """Checks that the run measured what it claims: the Jobs exist and the strategy really applied
    (elastic Jobs were resized; affinity followers carry anti-affinity, the others a nodeSelector)."""
    problems: list[str] = []
    if len(jobs) != expected_jobs:
        problems.append(f"expected {expected_jobs} Jobs, found {len(jobs)}")
    for job in jobs:
        label = (job["metadata"].get("labels") or {}).get(RESIZE_LABEL)
        name = job["metadata"]["name"]
        if strategy == Strategy.ELASTIC and label != RESIZE_DONE:
            problems.append(f"Job {name}: elastic but {RESIZE_LABEL}={label!r} (not resized)")
        if strategy != Strategy.ELASTIC and label is not None:
            problems.append(
                f"Job {name}: strategy {strategy} but the Job was shrunk ({RESIZE_LABEL}={label})"
            )
    for pod in pods:
        if (pod["metadata"].get("labels") or {}).get(ROLE_LABEL) != ROLE_FOLLOWER:
            continue
        spec = pod.get("spec") or {}
        anti = "podAntiAffinity" in (spec.get("affinity") or {})
        pinned = TOPOLOGY_KEY in (spec.get("nodeSelector") or {})
        if strategy == Strategy.AFFINITY and not anti:
            problems.append(f"pod {pod['metadata']['name']}: affinity follower without podAntiAffinity")
        if strategy != Strategy.AFFINITY and (anti or not pinned):
            problems.append(f"pod {pod['metadata']['name']}: {strategy} follower not pinned by nodeSelector")
    return problems[:20]


def backlog_namespace(namespace: str) -> str:
    return f"{namespace[:55]}-backlog"


async def _request(http: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> Any:
    """One API call with a few retries on transport errors (a kept-alive connection the busy API server
    dropped must not cost a whole benchmark run)."""
    for attempt in range(4):
        try:
            response = await http.request(method, path, **kwargs)
            response.raise_for_status()
            return response.json()
        except httpx.TransportError as err:
            if attempt == 3:
                raise BenchError(f"{method} {path} failed 4 times: {err!r}") from err
            await asyncio.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


async def _wait_pods_gone(http: httpx.AsyncClient, namespace: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = (await _request(http, "GET", f"/api/v1/namespaces/{namespace}/pods"))["items"]
        if not pods:
            return
        await asyncio.sleep(0.2)
    raise BenchError(f"pods of namespace {namespace} still present {timeout:.0f}s after deleting the JobSet")


async def run_strategy(
    server: str,
    scenario: Scenario,
    strategy: str,
    *,
    namespace: str,
    nodes: dict[str, str],
    settings: RunSettings,
) -> dict[str, Any]:
    """One measured run: create the JobSet, wait until every pod has run, snapshot the counters, clean up."""
    timeout = httpx.Timeout(30.0, read=None)
    async with httpx.AsyncClient(base_url=server, timeout=timeout, headers={"User-Agent": "bench"}) as http:
        namespaces = [namespace] + ([backlog_namespace(namespace)] if scenario.backlog else [])
        for name in namespaces:
            ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            (await http.post("/api/v1/namespaces", json=ns)).raise_for_status()
        try:
            return await _measure(
                http, scenario, strategy, namespace=namespace, nodes=nodes, settings=settings
            )
        finally:
            # Also after a failed run: the next strategy needs every pool free and an empty queue again.
            await _request(http, "DELETE", f"{JOBSETS_PATH.format(namespace=namespace)}/{JOBSET_NAME}")
            if scenario.backlog:
                await _delete_backlog(http, scenario.backlog, backlog_namespace(namespace))
            for name in namespaces:
                await _wait_pods_gone(http, name, timeout=120)


async def _submit_backlog(http: httpx.AsyncClient, backlog: Backlog, namespace: str) -> None:
    for job in backlog_jobs(backlog, namespace=namespace):
        await _request(http, "POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", json=job)


async def _delete_backlog(http: httpx.AsyncClient, backlog: Backlog, namespace: str) -> None:
    for job in backlog_jobs(backlog, namespace=namespace):
        path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{job['metadata']['name']}"
        try:
            await _request(http, "DELETE", path, params={"propagationPolicy": "Background"})
        except httpx.HTTPStatusError as err:
            if err.response.status_code != 404:  # a run that failed before submitting it
                raise


async def _fill_queue(
    http: httpx.AsyncClient,
    backlog: Backlog,
    namespace: str,
    tracker: BacklogTracker,
    watch: asyncio.Task[None],
) -> None:
    """Submit the backlog and return once all of its pods exist (the measured JobSet goes in behind them)."""
    await asyncio.wait_for(tracker.connected.wait(), 30)
    await _submit_backlog(http, backlog, namespace)
    created = asyncio.create_task(tracker.all_created.wait())
    finished, _ = await asyncio.wait(
        {created, watch}, timeout=BACKLOG_CREATION_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
    )
    if created not in finished:
        created.cancel()
        timed_out = f"timeout after {BACKLOG_CREATION_TIMEOUT:.0f}s"
        reason = "its pod watch ended" if watch in finished else timed_out
        raise BenchError(f"{len(tracker.created)}/{backlog.pods} backlog pods created ({reason})")


async def _measure(
    http: httpx.AsyncClient,
    scenario: Scenario,
    strategy: str,
    *,
    namespace: str,
    nodes: dict[str, str],
    settings: RunSettings,
) -> dict[str, Any]:
    recorder = PodRecorder(nodes, scenario.total_pods)
    watch = asyncio.create_task(recorder.follow(http, namespace))
    backlog = BacklogTracker(scenario.backlog.pods) if scenario.backlog else None
    backlog_watch = (
        asyncio.create_task(backlog.follow(http, backlog_namespace(namespace))) if backlog else None
    )
    backlog_pending = backlog_bound_at_submit = backlog_bound_at_end = 0
    try:
        await asyncio.wait_for(recorder.connected.wait(), 30)
        if scenario.backlog and backlog and backlog_watch:
            await _fill_queue(http, scenario.backlog, backlog_namespace(namespace), backlog, backlog_watch)
            backlog_pending, backlog_bound_at_submit = backlog.pending, len(backlog.bound)
        await _request(http, "POST", "/debug/reset-stats")
        start = time.monotonic()
        manifest = jobset_manifest(scenario, strategy, name=JOBSET_NAME, namespace=namespace)
        (await http.post(JOBSETS_PATH.format(namespace=namespace), json=manifest)).raise_for_status()
        done = asyncio.create_task(recorder.all_running.wait())
        finished, _ = await asyncio.wait(
            {done, watch}, timeout=settings.run_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        stats = await _request(http, "GET", "/debug/stats")
        backlog_bound_at_end = len(backlog.bound) if backlog else 0
        if done not in finished:
            done.cancel()
    finally:
        watch_ended = await stop(watch)
        if backlog_watch:
            await stop(backlog_watch)
    if recorder.all_running_at is None:
        reason = watch_ended or f"timeout after {settings.run_timeout:.0f}s"
        ran = f"{len(recorder.started)}/{scenario.total_pods} pods ran"
        raise BenchError(f"{scenario.name}/{strategy}: {ran} ({reason})")
    seconds = recorder.all_running_at - start
    jobs = (await _request(http, "GET", f"/apis/batch/v1/namespaces/{namespace}/jobs"))["items"]
    pods = (await _request(http, "GET", f"/api/v1/namespaces/{namespace}/pods"))["items"]
    result = result_from_stats(
        stats, seconds, recorder.replay.violations, list(recorder.leader_waits.values())
    )
    if backlog:
        # The window's counters include these backlog pods' binds and kubelet updates (alike per strategy).
        result["backlog_pods_pending_at_submit"] = backlog_pending
        result["backlog_pods_bound_in_window"] = backlog_bound_at_end - backlog_bound_at_submit
    problems = strategy_problems(strategy, jobs, pods, scenario.jobs) + recorder.replay.describe()
    if problems:
        result["problems"] = problems
    return result


def cluster_flags(scenario: Scenario, settings: RunSettings) -> KubesimFlags:
    """The scenario's kubesim: its pools, pod run time, scheduler throughput and (if it has its own) time
    scale; the bench's time scale otherwise."""
    return KubesimFlags(
        nodes=scenario.nodes,
        pools=scenario.pools,
        gpus_per_node=GPUS_PER_NODE,
        time_scale=scenario.time_scale or settings.time_scale,
        pod_run_seconds=scenario.pod_run_seconds,
        scheduler_pods_per_second=scenario.scheduler_pods_per_second,
    )


def run_scenario(scenario: Scenario, strategies: tuple[str, ...], settings: RunSettings) -> dict[str, Any]:
    cluster = cluster_flags(scenario, settings)
    results: dict[str, Any] = {}
    with Stack(StackOptions(cluster=cluster, startup_timeout=120)) as stack:
        domains = node_domains(stack.client.list("Node"), TOPOLOGY_KEY)
        for strategy in strategies:
            namespace = f"bench-{scenario.name}-{strategy}".lower()[:63]
            log.info("scenario %s, strategy %s: %s pods", scenario.name, strategy, scenario.total_pods)
            try:
                results[strategy] = asyncio.run(
                    run_strategy(
                        stack.server,
                        scenario,
                        strategy,
                        namespace=namespace,
                        nodes=domains,
                        settings=settings,
                    )
                )
            except (BenchError, httpx.HTTPError) as err:
                log.error("%s/%s failed: %s", scenario.name, strategy, err)
                results[strategy] = {"error": f"{type(err).__name__}: {err}"}
            stack.check_alive()
            log.info("  %s", json.dumps(results[strategy]))
    return {
        "name": scenario.name,
        "jobs": scenario.jobs,
        "pods_per_job": scenario.pods_per_job,
        "pools": scenario.pools,
        "nodes": scenario.nodes,
        "contended": scenario.contended,
        "pod_run_seconds": scenario.pod_run_seconds,
        "scheduler_pods_per_second": scenario.scheduler_pods_per_second,
        "time_scale": cluster.time_scale,
        "backlog_pods": scenario.backlog.pods if scenario.backlog else None,
        "results": results,
    }


def run_benchmark(
    scenarios: tuple[Scenario, ...], strategies: tuple[str, ...], settings: RunSettings
) -> dict[str, Any]:
    return {
        "scenarios": [run_scenario(s, strategies, settings) for s in scenarios],
        "time_scale": settings.time_scale,
    }


def failures(report: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for scenario in report["scenarios"]:
        for strategy, result in scenario["results"].items():
            for problem in ([result["error"]] if "error" in result else []) + result.get("problems", []):
                out.append(f"{scenario['name']}/{strategy}: {problem}")
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench strategies",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small scenarios (4x8, contended 6x4 on 2 pools, 4x8 with a 60 pods/s scheduler): ~1 min",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="output directory for strategies.json, strategies.md and the plots (default: %(default)s)",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=0.1,
        help="kubesim real seconds per simulated second (default: %(default)s); throttled-scheduler "
        "scenarios always run at 1.0 so their throttle, not the Python control plane, is the bottleneck",
    )
    parser.add_argument(
        "--strategies",
        default=",".join(STRATEGIES),
        help="comma-separated subset of strategies (default: all four)",
    )
    parser.add_argument(
        "--run-timeout",
        type=float,
        default=600.0,
        help="wall seconds per strategy run before it counts as failed (default: %(default)s)",
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    strategies = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown or not strategies:
        print(f"error: unknown strategies {unknown}; valid: {', '.join(STRATEGIES)}", file=sys.stderr)
        return 2
    if args.time_scale <= 0:
        print("error: --time-scale must be > 0", file=sys.stderr)
        return 2
    from bench.report import write_outputs

    started = time.monotonic()
    report = run_benchmark(
        QUICK_SCENARIOS if args.quick else FULL_SCENARIOS,
        strategies,
        RunSettings(args.time_scale, args.run_timeout),
    )
    paths = write_outputs(report, args.out, plots=not args.no_plots)
    print((args.out / "strategies.md").read_text())
    print(f"wrote {', '.join(str(p) for p in paths)} in {time.monotonic() - started:.0f}s")
    problems = failures(report)
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
