"""`python -m bench strategies [--quick] [--out DIR]`: JobSet and this project's four strategies side by
side on kubesim (and, in the gang scenarios, two of them with all-or-nothing placement per JobSet).

For each scenario a stack (kubesim + the real webhook + the real resizer, as `make run` starts them) is
brought up, and for each strategy of a large scenario a fresh one (`FRESH_STACK_PODS`); each strategy runs
in a namespace of its own on an idle cluster. This project's strategies are selected per Job by the
`exclusive-placement.io/strategy` annotation on the JobSet's pod template (the same webhook binary serves
all four, so nothing but the strategy differs between runs); the `jobset` baseline's namespace is exempt
from this project's webhooks (the chart's `webhook.admission.exemptNamespaces`), so JobSet's own pod
webhooks alone place its pods. Between runs on a shared stack the previous JobSet is deleted and its pods
are gone before kubesim's counters are reset. JobSet's own webhooks are on for every strategy unless the
scenario turns them off: this project's strategies take JobSet's annotation over on the child Jobs' pod
templates, so JobSet's webhooks pass their pods.

A gang scenario creates several JobSets at once, each one kubesim gang (its pods progress only while all
of them run), and follows them until all completed or its deadline passed (a deadlock is a result, not a
failure): `bench.gang` turns the pod watch into the partial-placement figures and the domain timeline.

A scenario with a backlog first submits plain, non-exclusive batch Jobs in a second namespace and creates
the measured JobSet once all of their pods exist, so its leaders queue behind what the (throttled)
scheduler has not bound yet; the counters are reset just before the JobSet is created.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.contenders import (
    CONTENDER_KEYS,
    JOBSET_BASELINE,
    Contender,
    contenders,
    for_scenario,
    placement_problems,
)
from bench.counters import Counters, KubesimCounters, real_control_plane_fields
from bench.gang import gang_outcome
from bench.kube import (
    KUBE_FULL_SCENARIOS,
    KUBE_QUICK_SCENARIOS,
    KUBE_TIME_SCALE,
    Connection,
    check_supported,
    connection,
    kube_counters,
    pod_annotations,
)
from bench.kube import scenario_fields as kube_scenario_fields
from bench.measures import (
    LOOKUP_VERBS,
    RESIZER_CLIENT,
    WEBHOOK_CLIENT,
    client_requests,
    failed_create_messages,
    headline_ratios,
    preemption_fields,
    timeline_fields,
    waste_from_stats,
    workload_requests,
)
from bench.paths import SCRATCH
from bench.recorder import BacklogTracker, GangRecorder, PodRecorder, stop
from bench.rendezvous import play_rendezvous
from bench.scenarios import (
    FULL_SCENARIOS,
    GPUS_PER_NODE,
    LONG_WAIT_TIME_SCALE,
    QUICK_SCENARIOS,
    TOPOLOGY_KEY,
    Backlog,
    Scenario,
    backlog_pods,
    gang_jobset_manifest,
    gang_jobset_names,
    jobset_manifest,
    scenarios_named,
)
from devstack.clusters import CONTROL_PLANES
from devstack.commands import KubesimFlags
from devstack.controlplane.binaries import MissingBinaries, require_built
from devstack.controlplane.versions import pinned_versions
from devstack.exclusivity import node_domains
from devstack.manifests import priority_class
from devstack.stack import Stack, StackOptions
from placement.constants import JOBSET_GROUP, JOBSET_VERSION, Strategy

log = logging.getLogger("bench.strategies")

DEFAULT_OUT = SCRATCH
KUBE_RESULTS_DIR = "kube"
"""The real control plane's results go to a `kube/` directory under `--out`, with the same file names."""
DEFAULT_TIME_SCALE = 0.1
JOBSET_NAME = "bench"
JOBSETS_PATH = f"/apis/{JOBSET_GROUP}/{JOBSET_VERSION}/namespaces/{{namespace}}/jobsets"
PRIORITY_CLASSES_PATH = "/apis/scheduling.k8s.io/v1/priorityclasses"
FULL_RUN_TIMEOUT = 600.0
QUICK_RUN_TIMEOUT = 180.0
"""Wall seconds a quick run may take: every quick run takes under 30 s here; a stuck one fails in time."""
BACKLOG_CREATION_TIMEOUT = 120.0
"""Wall seconds for the Job controller to create every backlog pod before the run counts as failed."""
LOW_PRIORITY, HIGH_PRIORITY = 10, 1000
"""The preemption scenario's PriorityClass values."""
LOW_PRIORITY_MAX_RESTARTS = 5
"""The low-priority JobSet's failurePolicy.maxRestarts: preempted, it restarts and waits for domains. Bounded
because kubesim does not reserve a preemptor's nominated node against lower-priority pods (upstream's
`RunFilterPluginsWithNominatedPods`, docs/kubesim-fidelity.md): where a preemptor waits for its victims
to go, a restarted low-priority pod can take the node back, so the preemption repeats (measured: 92
restarts in 90 s under `jobset` and `affinity` on preemption-4x2) until the low JobSet fails."""
LOW_JOBSET_NAME = "low"
"""Wall seconds for the Job controller to create every backlog pod before the run counts as failed."""


class BenchError(RuntimeError):
    pass


@dataclass(frozen=True)
class RunSettings:
    time_scale: float
    run_timeout: float
    """Wall seconds one strategy run may take before it is recorded as failed."""
    control_plane: str = "kubesim"
    """`kubesim`, or `kube`: the real control plane (bench.kube)."""


def result_from_stats(
    stats: dict[str, Any], seconds: float, violations: int, *, namespace: str
) -> dict[str, Any]:
    """The counters of one strategy run, from its `/debug/stats` snapshot: the issue's fields, the
    requests about the measured JobSet's `namespace` (without a backlog's or the nodes'), wasted requests
    (bench.measures.Waste) and their parts, JobSet's webhook calls, what this project's webhook and resizer
    asked of the API server, scheduling cycles, and the request breakdown by verb and resource and by
    client (where the differences come from)."""
    waste = waste_from_stats(stats)
    in_namespace = stats["requests"].get("by_namespace", {}).get(namespace, {"total": 0, "writes": 0})
    admission_calls = stats["admission"]["calls"]
    jobset_webhooks = stats.get("jobset_webhooks", {"calls": 0, "denied": 0})
    return {
        "pod_creates_rejected": stats["pods"]["create_rejected"],
        "pod_creates_accepted": stats["pods"]["create_accepted"],
        "api_requests": stats["requests"]["total"],
        "api_writes": stats["requests"]["writes"],
        "api_requests_in_namespace": in_namespace["total"],
        "api_writes_in_namespace": in_namespace["writes"],
        "admission_calls": admission_calls,
        "jobset_webhook_calls": jobset_webhooks["calls"],
        "jobset_webhook_denied": jobset_webhooks["denied"],
        "all_webhook_calls": admission_calls + jobset_webhooks["calls"],
        "wasted_requests": waste.total,
        "wasted_rejected_creates": waste.rejected_creates,
        "wasted_event_writes": waste.event_writes,
        "wasted_webhook_lookups": waste.webhook_lookups,
        "webhook_lookups": client_requests(stats, WEBHOOK_CLIENT, LOOKUP_VERBS),
        "resizer_requests": workload_requests(stats, RESIZER_CLIENT),
        "job_patches": stats["jobs"]["patched"],
        "pod_patches": stats["pods"]["patched"],
        "scheduler_filter_evaluations": stats["scheduler"]["filter_evaluations"],
        "scheduler_affinity_evaluations": stats["scheduler"]["affinity_evaluations"],
        "seconds_to_all_running": round(seconds, 3),
        "exclusive_violations": violations,
        "scheduler_attempts": stats["scheduler"].get("attempts", 0),
        "api_requests_by_verb_resource": dict(sorted(stats["requests"].get("by_verb_resource", {}).items())),
        "api_requests_by_client": dict(sorted(stats["requests"].get("by_client", {}).items())),
        "api_requests_by_client_verb_resource": {
            client: dict(sorted(counts.items()))
            for client, counts in sorted(stats["requests"].get("by_client_verb_resource", {}).items())
        },
        **real_control_plane_fields(stats),
    }


def long_wait_fields(result: dict[str, Any]) -> dict[str, Any]:
    """Wasted requests per simulated minute a Job spent waiting for its leader to bind."""
    minutes = result["waiting_job_minutes"]
    per_minute = round(result["wasted_requests"] / minutes, 3) if minutes > 0 else None
    return {"wasted_requests_per_waiting_job_minute": per_minute}


def baseline_problems(contender: Contender, result: dict[str, Any]) -> list[str]:
    """The `jobset` baseline is JobSet alone: JobSet's webhooks answered, this project's webhook was never
    called (its namespace is exempt) and the resizer asked nothing of the API server."""
    if contender.uses_project_webhooks:
        return []
    problems = []
    if result["jobset_webhook_calls"] == 0:
        problems.append("JobSet's pod webhooks were never called: the baseline is not JobSet")
    if result["admission_calls"]:
        problems.append(f"this project's webhook was called {result['admission_calls']} times")
    if result["resizer_requests"]:
        problems.append(f"the resizer made {result['resizer_requests']} requests")
    return problems


def backlog_namespace(namespace: str) -> str:
    return f"{namespace[:55]}-backlog"


def low_priority_namespace(namespace: str) -> str:
    return f"{namespace[:59]}-low"


def priority_class_names(namespace: str) -> tuple[str, str]:
    """(low, high): the run's own PriorityClasses (cluster-scoped, so named after its namespace)."""
    return f"{namespace}-low", f"{namespace}-high"


def jobset_namespaces(scenario: Scenario, namespace: str) -> list[str]:
    """The namespaces a run's JobSets go in: its own and, under preemption, the low-priority one's."""
    return [namespace] + ([low_priority_namespace(namespace)] if scenario.preemption else [])


def side_namespaces(scenario: Scenario, namespace: str) -> list[str]:
    """The namespaces a run uses besides its own: the backlog's, the low-priority JobSet's."""
    return ([backlog_namespace(namespace)] if scenario.backlog else []) + (
        [low_priority_namespace(namespace)] if scenario.preemption else []
    )


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


@dataclass(frozen=True)
class Run:
    """One strategy run: what it measures, where, on which cluster."""

    scenario: Scenario
    contender: Contender
    namespace: str
    nodes: dict[str, str]
    """node name → its topology domain."""
    time_scale: float
    """The time scale kubesim runs at (the scenario's own, else the bench's)."""
    jobset_webhooks: bool
    run_timeout: float
    connection: Connection
    counters: Counters
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    """On every measured pod template: kwok's run time on the real control plane."""
    rendezvous_seconds: float | None = None
    """Real control plane, gang scenario: the benchmark plays the gangs' rendezvous (bench.rendezvous)."""

    @property
    def namespaces(self) -> list[str]:
        return [self.namespace, *side_namespaces(self.scenario, self.namespace)]


async def run_strategy(run: Run, *, clean_up: bool) -> dict[str, Any]:
    """One measured run: create the JobSet, wait until every pod has run, snapshot the counters; with
    `clean_up`, delete what it created and wait until its pods are gone (the stack serves another run)."""
    timeout = httpx.Timeout(30.0, read=None)
    connection = run.connection
    headers = {"User-Agent": "bench", **connection.headers}
    async with httpx.AsyncClient(
        base_url=connection.server, timeout=timeout, headers=headers, verify=connection.verify
    ) as http:
        backlog = run.scenario.backlog
        namespaces = run.namespaces
        for name in namespaces:
            ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            (await http.post("/api/v1/namespaces", json=ns)).raise_for_status()
        try:
            result = await _measure_scenario(http, run)
            result["failed_create_messages"] = await _failed_create_messages(http, namespaces)
            return result
        finally:
            # Also after a failed run: the next strategy needs every pool free and an empty queue again.
            if clean_up:
                for name in measured_jobsets(run.scenario):
                    await _delete_jobset(http, run.namespace, name)
                if backlog:
                    await _delete_backlog(http, backlog, backlog_namespace(run.namespace))
                if run.scenario.preemption:
                    await _delete_jobset(http, low_priority_namespace(run.namespace), LOW_JOBSET_NAME)
                for name in namespaces:
                    await _wait_pods_gone(http, name, timeout=120)


async def _measure_scenario(http: httpx.AsyncClient, run: Run) -> dict[str, Any]:
    if run.scenario.preemption:
        return await _measure_preemption(http, run)
    if run.scenario.gang:
        return await _measure_gang(http, run)
    return await _measure(http, run)


async def _failed_create_messages(http: httpx.AsyncClient, namespaces: Sequence[str]) -> dict[str, int]:
    """Why the run's pod creations were refused (after its window: not counted)."""
    events: list[dict[str, Any]] = []
    for namespace in namespaces:
        events += (await _request(http, "GET", f"/api/v1/namespaces/{namespace}/events"))["items"]
    return failed_create_messages(events)


def measured_jobsets(scenario: Scenario) -> list[str]:
    return gang_jobset_names(scenario) if scenario.gang else [JOBSET_NAME]


async def _delete_jobset(http: httpx.AsyncClient, namespace: str, name: str) -> None:
    try:
        await _request(http, "DELETE", f"{JOBSETS_PATH.format(namespace=namespace)}/{name}")
    except httpx.HTTPStatusError as err:
        if err.response.status_code != 404:  # a run that failed before creating it
            raise


BACKLOG_CREATES_IN_FLIGHT = 50


async def _submit_backlog(http: httpx.AsyncClient, backlog: Backlog, namespace: str) -> None:
    """Create the backlog's pods, up to BACKLOG_CREATES_IN_FLIGHT at a time (faster than the throttled
    scheduler binds them, so they queue)."""
    pods = backlog_pods(backlog, namespace=namespace)
    path = f"/api/v1/namespaces/{namespace}/pods"
    for offset in range(0, len(pods), BACKLOG_CREATES_IN_FLIGHT):
        chunk = pods[offset : offset + BACKLOG_CREATES_IN_FLIGHT]
        await asyncio.gather(*(_request(http, "POST", path, json=pod) for pod in chunk))


async def _delete_backlog(http: httpx.AsyncClient, backlog: Backlog, namespace: str) -> None:
    for pod in backlog_pods(backlog, namespace=namespace):
        path = f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}"
        try:
            await _request(http, "DELETE", path)
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


async def _measure(http: httpx.AsyncClient, run: Run) -> dict[str, Any]:
    scenario = run.scenario
    recorder = PodRecorder(run.nodes, scenario.total_pods)
    watch = asyncio.create_task(recorder.follow(http, run.namespace))
    backlog = BacklogTracker(scenario.backlog.pods) if scenario.backlog else None
    backlog_watch = (
        asyncio.create_task(backlog.follow(http, backlog_namespace(run.namespace))) if backlog else None
    )
    backlog_pending = backlog_bound_at_submit = backlog_bound_at_end = 0
    try:
        await asyncio.wait_for(recorder.connected.wait(), 30)
        if scenario.backlog and backlog and backlog_watch:
            await _fill_queue(
                http, scenario.backlog, backlog_namespace(run.namespace), backlog, backlog_watch
            )
            backlog_pending, backlog_bound_at_submit = backlog.pending, len(backlog.bound)
        await run.counters.reset(http)
        start = time.monotonic()
        manifest = jobset_manifest(
            scenario,
            run.contender.strategy,
            name=JOBSET_NAME,
            namespace=run.namespace,
            pod_annotations=run.pod_annotations,
        )
        (await http.post(JOBSETS_PATH.format(namespace=run.namespace), json=manifest)).raise_for_status()
        done = asyncio.create_task(recorder.all_running.wait())
        finished, _ = await asyncio.wait(
            {done, watch}, timeout=run.run_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        stats = await run.counters.snapshot(http, run.namespaces)
        backlog_bound_at_end = len(backlog.bound) if backlog else 0
        if done not in finished:
            done.cancel()
    finally:
        watch_ended = await stop(watch)
        if backlog_watch:
            await stop(backlog_watch)
    if recorder.all_running_at is None:
        reason = watch_ended or f"timeout after {run.run_timeout:.0f}s"
        ran = f"{len(recorder.started)}/{scenario.total_pods} pods ran"
        raise BenchError(f"{scenario.name}/{run.contender.key}: {ran} ({reason})")
    jobs = (await _request(http, "GET", f"/apis/batch/v1/namespaces/{run.namespace}/jobs"))["items"]
    pods = (await _request(http, "GET", f"/api/v1/namespaces/{run.namespace}/pods"))["items"]
    result = result_from_stats(
        stats, recorder.all_running_at - start, recorder.replay.violations, namespace=run.namespace
    )
    result["jobset_webhooks"] = run.jobset_webhooks
    result.update(timeline_fields(recorder.timelines, scenario.pods_per_job, run.time_scale))
    if scenario.long_wait:
        result.update(long_wait_fields(result))
    if backlog:
        # The window's counters include these backlog pods' binds and kubelet updates (alike per strategy).
        result["backlog_pods_pending_at_submit"] = backlog_pending
        result["backlog_pods_bound_in_window"] = backlog_bound_at_end - backlog_bound_at_submit
    problems = (
        placement_problems(run.contender, jobs, pods, expected_jobs=scenario.jobs, topology_key=TOPOLOGY_KEY)
        + baseline_problems(run.contender, result)
        + recorder.replay.describe()
    )
    if problems:
        result["problems"] = problems
    return result


async def _wait_for(event: asyncio.Event, watch: asyncio.Task[None], timeout: float) -> bool:
    """True once `event` is set; False if the watch feeding it ended or `timeout` passed first."""
    done = asyncio.create_task(event.wait())
    finished, _ = await asyncio.wait({done, watch}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    if done not in finished:
        done.cancel()
    return done in finished


async def _measure_preemption(http: httpx.AsyncClient, run: Run) -> dict[str, Any]:
    """Fill every pool with the low-priority JobSet, then measure the high-priority one preempting it."""
    scenario, low_ns = run.scenario, low_priority_namespace(run.namespace)
    low_class, high_class = priority_class_names(run.namespace)
    for name, value in ((low_class, LOW_PRIORITY), (high_class, HIGH_PRIORITY)):
        await _request(http, "POST", PRIORITY_CLASSES_PATH, json=priority_class(name, value))
    high, low = PodRecorder(run.nodes, scenario.total_pods), PodRecorder(run.nodes, scenario.total_pods)
    high_watch = asyncio.create_task(high.follow(http, run.namespace))
    low_watch = asyncio.create_task(low.follow(http, low_ns))
    strategy = run.contender.strategy
    try:
        await asyncio.wait_for(asyncio.gather(high.connected.wait(), low.connected.wait()), 30)
        low_manifest = jobset_manifest(
            scenario,
            strategy,
            name=LOW_JOBSET_NAME,
            namespace=low_ns,
            priority_class_name=low_class,
            max_restarts=LOW_PRIORITY_MAX_RESTARTS,
            pod_annotations=run.pod_annotations,
        )
        await _request(http, "POST", JOBSETS_PATH.format(namespace=low_ns), json=low_manifest)
        if not await _wait_for(low.all_running, low_watch, run.run_timeout):
            ran = f"{len(low.started)}/{scenario.total_pods} low-priority pods ran"
            raise BenchError(f"{scenario.name}/{run.contender.key}: {ran} before the high-priority JobSet")
        await run.counters.reset(http)
        start = time.monotonic()
        manifest = jobset_manifest(
            scenario,
            strategy,
            name=JOBSET_NAME,
            namespace=run.namespace,
            priority_class_name=high_class,
            pod_annotations=run.pod_annotations,
        )
        await _request(http, "POST", JOBSETS_PATH.format(namespace=run.namespace), json=manifest)
        await _wait_for(high.all_running, high_watch, run.run_timeout)
        stats = await run.counters.snapshot(http, run.namespaces)
    finally:
        high_ended = await stop(high_watch)
        await stop(low_watch)
        for name in (low_class, high_class):
            with contextlib.suppress(httpx.HTTPStatusError):  # not created if the run failed first
                await _request(http, "DELETE", f"{PRIORITY_CLASSES_PATH}/{name}")
    low_jobset = await _request(http, "GET", f"{JOBSETS_PATH.format(namespace=low_ns)}/{LOW_JOBSET_NAME}")
    low_pods = (await _request(http, "GET", f"/api/v1/namespaces/{low_ns}/pods"))["items"]
    low_running = sum(1 for pod in low_pods if (pod.get("status") or {}).get("phase") == "Running")
    seconds = None if high.all_running_at is None else high.all_running_at - start
    violations = high.replay.violations + low.replay.violations
    result = result_from_stats(stats, seconds or 0.0, violations, namespace=run.namespace)
    result.update(preemption_fields(stats, low_jobset, low_running, scenario.total_pods))
    result.update(
        high_priority_outcome(seconds, len(high.started), scenario.total_pods, high_ended or run.run_timeout)
    )
    result["jobset_webhooks"] = run.jobset_webhooks
    result.update(timeline_fields(high.timelines, scenario.pods_per_job, run.time_scale))
    jobs = (await _request(http, "GET", f"/apis/batch/v1/namespaces/{run.namespace}/jobs"))["items"]
    pods = (await _request(http, "GET", f"/api/v1/namespaces/{run.namespace}/pods"))["items"]
    problems = (
        placement_problems(run.contender, jobs, pods, expected_jobs=scenario.jobs, topology_key=TOPOLOGY_KEY)
        + baseline_problems(run.contender, result)
        + [f"high priority: {p}" for p in high.replay.describe()]
        + [f"low priority: {p}" for p in low.replay.describe()]
    )
    if problems:
        result["problems"] = problems
    return result


async def _measure_gang(http: httpx.AsyncClient, run: Run) -> dict[str, Any]:
    """Create every JobSet of the gang scenario at once (concurrent requests) and follow them until all
    completed or the scenario's deadline passed (a deadlock ends there, as a result, not an error)."""
    scenario = run.scenario
    names = gang_jobset_names(scenario)
    sizes = dict.fromkeys(names, scenario.jobset_pods)
    recorder = GangRecorder(run.nodes, sizes)
    watch = asyncio.create_task(recorder.follow(http, run.namespace))
    deadline = min(float(scenario.gang_deadline_seconds or 0.0) * run.time_scale, run.run_timeout)
    path = JOBSETS_PATH.format(namespace=run.namespace)
    manifests = [
        gang_jobset_manifest(
            scenario,
            run.contender.strategy,
            name=name,
            namespace=run.namespace,
            all_or_nothing=run.contender.all_or_nothing,
        )
        for name in names
    ]
    rendezvous = _rendezvous(http, run)
    try:
        await asyncio.wait_for(recorder.connected.wait(), 30)
        if rendezvous:
            await asyncio.wait_for(rendezvous.connected.wait(), 30)
        await run.counters.reset(http)
        start = time.monotonic()
        await asyncio.gather(*(_request(http, "POST", path, json=manifest) for manifest in manifests))
        await _wait_for(recorder.all_complete, watch, deadline)
        ended = time.monotonic()
        stats = await run.counters.snapshot(http, run.namespaces)
    finally:
        watch_ended = await stop(watch) or (await stop(rendezvous.task) if rendezvous else "")
    if watch_ended:
        raise BenchError(f"{scenario.name}/{run.contender.key}: {watch_ended}")
    jobs = (await _request(http, "GET", f"/apis/batch/v1/namespaces/{run.namespace}/jobs"))["items"]
    pods = (await _request(http, "GET", f"/api/v1/namespaces/{run.namespace}/pods"))["items"]
    all_running = None if recorder.all_running_at is None else recorder.all_running_at - start
    result = result_from_stats(stats, all_running or 0.0, recorder.replay.violations, namespace=run.namespace)
    result["seconds_to_all_running"] = None if all_running is None else round(all_running, 3)
    result["jobset_webhooks"] = run.jobset_webhooks
    result.update(timeline_fields(recorder.timelines, scenario.pods_per_job, run.time_scale))
    result.update(gang_outcome(recorder.relative_to(start), sizes, ended - start).fields())
    result["deadline_seconds"] = round(deadline, 3)
    problems = (
        placement_problems(
            run.contender,
            jobs,
            pods,
            expected_jobs=scenario.jobs * scenario.jobsets,
            topology_key=TOPOLOGY_KEY,
            only_placed=True,
        )
        + baseline_problems(run.contender, result)
        + recorder.replay.describe()
    )
    if problems:
        result["problems"] = problems
    return result


@dataclass(frozen=True)
class _RendezvousTask:
    task: asyncio.Task[None]
    connected: asyncio.Event


def _rendezvous(http: httpx.AsyncClient, run: Run) -> _RendezvousTask | None:
    """On the real control plane, the benchmark playing the gangs' rendezvous (bench.rendezvous)."""
    if run.rendezvous_seconds is None:
        return None
    connected = asyncio.Event()
    task = asyncio.create_task(play_rendezvous(http, run.namespace, run.rendezvous_seconds, connected))
    return _RendezvousTask(task, connected)


def high_priority_outcome(
    seconds: float | None, pods_ran: int, expected_pods: int, stopped_by: str | float
) -> dict[str, Any]:
    """Whether the high-priority JobSet preempted its way in: its time to all Running, or, if it did not
    within the run, how many of its pods ran and what ended the wait (a timeout or the pod watch)."""
    if seconds is not None:
        return {
            "high_priority_all_running": True,
            "high_priority_seconds_to_all_running": round(seconds, 3),
            "high_priority_pods_running": expected_pods,
        }
    reason = stopped_by if isinstance(stopped_by, str) else f"timeout after {stopped_by:.0f}s"
    return {
        "high_priority_all_running": False,
        "high_priority_seconds_to_all_running": None,
        "seconds_to_all_running": None,
        "high_priority_pods_running": pods_ran,
        "high_priority_not_running_because": f"{pods_ran}/{expected_pods} pods ran ({reason})",
    }


def cluster_flags(scenario: Scenario, settings: RunSettings, *, jobset_webhooks: bool) -> KubesimFlags:
    """The scenario's kubesim: its pools, pod run time, scheduler throughput, JobSet's webhooks and (if it
    has its own) time scale; the bench's time scale otherwise."""
    return KubesimFlags(
        nodes=scenario.nodes,
        pools=scenario.pools,
        gpus_per_node=GPUS_PER_NODE,
        time_scale=scenario.time_scale or settings.time_scale,
        pod_run_seconds=scenario.pod_run_seconds,
        scheduler_pods_per_second=scenario.scheduler_pods_per_second,
        jobset_webhooks=jobset_webhooks,
    )


def run_namespace(scenario: Scenario, contender: Contender) -> str:
    return f"bench-{scenario.name}-{contender.key}".lower().replace("+", "-")[:63]


FRESH_STACK_PODS = 200
"""Above this many pods (backlog included) each strategy run gets a fresh stack: deleting a JobSet of
1,024 pods takes the Job controller over a minute at its 20 qps (a finalizer patch per pod), longer than
starting a stack (~6 s). Smaller scenarios share one stack and wait until the previous run's pods are
gone. Either way a run starts on an idle cluster with its counters reset."""


def fresh_stack_per_strategy(scenario: Scenario) -> bool:
    backlog_pods = scenario.backlog.pods if scenario.backlog else 0
    return scenario.total_pods + backlog_pods > FRESH_STACK_PODS


def _run_contenders(scenario: Scenario, group: Sequence[Contender], settings: RunSettings) -> dict[str, Any]:
    """Every contender of `scenario`, one after the other (`FRESH_STACK_PODS`), JobSet's webhooks on or
    off as the scenario says (this project's strategies take JobSet's annotation over on their child Jobs'
    pod templates, so they coexist with JobSet's webhooks; `jobset_webhook_denied` shows it)."""
    if fresh_stack_per_strategy(scenario):
        return {c.key: _run_on_stack(scenario, [c], settings)[c.key] for c in group}
    return _run_on_stack(scenario, group, settings)


def _run_on_stack(scenario: Scenario, group: Sequence[Contender], settings: RunSettings) -> dict[str, Any]:
    jobset_webhooks = scenario.jobset_webhooks
    cluster = cluster_flags(scenario, settings, jobset_webhooks=jobset_webhooks)
    # The namespaces JobSet alone places: exempt from this project's webhooks, as a user would exempt them.
    exempt = tuple(
        namespace
        for c in group
        if not c.uses_project_webhooks
        for namespace in jobset_namespaces(scenario, run_namespace(scenario, c))
    )
    results: dict[str, Any] = {}
    kube = settings.control_plane == "kube"
    options = StackOptions(
        cluster=cluster, control_plane=settings.control_plane, startup_timeout=120, exempt_namespaces=exempt
    )
    with Stack(options) as stack:
        domains = node_domains(stack.client.list("Node"), TOPOLOGY_KEY)
        counters: Counters = kube_counters(stack) if kube else KubesimCounters()
        for index, contender in enumerate(group):
            run = Run(
                scenario,
                contender,
                run_namespace(scenario, contender),
                domains,
                time_scale=KUBE_TIME_SCALE if kube else cluster.time_scale,
                jobset_webhooks=jobset_webhooks,
                run_timeout=settings.run_timeout,
                connection=connection(stack),
                counters=counters,
                pod_annotations=pod_annotations(scenario) if kube else {},
                rendezvous_seconds=scenario.pod_run_seconds if kube and scenario.gang else None,
            )
            log.info("scenario %s, strategy %s: %s pods", scenario.name, contender.key, scenario.total_pods)
            clean_up = index < len(group) - 1
            try:
                results[contender.key] = asyncio.run(run_strategy(run, clean_up=clean_up))
            except (BenchError, httpx.HTTPError) as err:
                log.error("%s/%s failed: %s", scenario.name, contender.key, err)
                results[contender.key] = {"error": f"{type(err).__name__}: {err}"}
            stack.check_alive()
            log.info("  %s", json.dumps(results[contender.key]))
    return results


def run_scenario(scenario: Scenario, chosen: Sequence[Contender], settings: RunSettings) -> dict[str, Any]:
    contenders = for_scenario(chosen, gang=scenario.gang)
    results = _run_contenders(scenario, contenders, settings) if contenders else {}
    if settings.control_plane == "kube":
        record = kube_scenario_fields(scenario)
    else:
        record = scenario.fields(scenario.time_scale or settings.time_scale)
    record["jobset_webhooks"] = scenario.jobset_webhooks
    record["results"] = {c.key: results[c.key] for c in contenders}
    if scenario.long_wait:
        minutes = [r["waiting_job_minutes"] for r in results.values() if "waiting_job_minutes" in r]
        record["waiting_job_minutes"] = round(statistics.fmean(minutes), 1) if minutes else None
    record["elastic_vs_jobset"] = headline_ratios(record["results"], baseline=JOBSET_BASELINE)
    record["elastic_vs_gate"] = headline_ratios(record["results"], baseline=Strategy.GATE)
    return record


def run_benchmark(
    scenarios: tuple[Scenario, ...], contenders: Sequence[Contender], settings: RunSettings
) -> dict[str, Any]:
    report: dict[str, Any] = {"control_plane": settings.control_plane}
    if settings.control_plane == "kube":
        report["versions"] = pinned_versions().as_dict()
    report["scenarios"] = [run_scenario(s, contenders, settings) for s in scenarios]
    report["time_scale"] = KUBE_TIME_SCALE if settings.control_plane == "kube" else settings.time_scale
    return report


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
        help="small scenarios (4x8 with a 60 pods/s scheduler, a long wait of 4x4 on 2 pools, "
        "preemption 4x2, 3 gang JobSets racing for 4 pools): ~3.5 min",
    )
    parser.add_argument(
        "--control-plane",
        choices=CONTROL_PLANES,
        default="kubesim",
        help="kubesim (default) or kube: the real control plane built by `make kube` (bench/kube.py: real "
        "seconds, counters from the audit log; --quick: 4x8 alone, ~1.5 min; full: ~35-40 min)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output directory for strategies.json, strategies.md and the plots (default: "
        f"{DEFAULT_OUT}, {DEFAULT_OUT / KUBE_RESULTS_DIR} with --control-plane kube)",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=None,
        help=f"kubesim real seconds per simulated second (default: {DEFAULT_TIME_SCALE}) of scenarios "
        "without their own: throttled-scheduler scenarios run at 1.0 so their throttle, not the Python "
        f"control plane, is the bottleneck; long-wait ones at {LONG_WAIT_TIME_SCALE} so their hours of "
        "waves fit in a minute; not with --control-plane kube (real time)",
    )
    parser.add_argument(
        "--strategies",
        default=",".join(CONTENDER_KEYS),
        help="comma-separated subset of strategies (default: all: %(default)s); each scenario runs those "
        "that apply to it: a gang scenario jobset, elastic, scheduling-gate and their +all-or-nothing "
        "variants, any other the first five",
    )
    parser.add_argument(
        "--run-timeout",
        type=float,
        default=None,
        help=f"wall seconds per strategy run before it counts as failed (default: {FULL_RUN_TIMEOUT:g}, "
        f"{QUICK_RUN_TIMEOUT:g} with --quick)",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        dest="scenarios",
        metavar="NAME",
        help="run only this scenario (repeatable; any of the full, quick and large ones, e.g. 64x64)",
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    return parser


def chosen_scenarios(args: argparse.Namespace) -> tuple[Scenario, ...]:
    """The scenarios the command line asks for on its control plane; ValueError for a bad choice,
    MissingBinaries when the real control plane is asked for and not built."""
    if args.time_scale is not None and args.time_scale <= 0:
        raise ValueError("--time-scale must be > 0")
    if args.control_plane != "kube":
        if args.scenarios:
            return scenarios_named(args.scenarios)
        return QUICK_SCENARIOS if args.quick else FULL_SCENARIOS
    if args.time_scale is not None:
        raise ValueError("--time-scale applies to kubesim only: the real control plane runs in real time")
    require_built()
    names = args.scenarios or (KUBE_QUICK_SCENARIOS if args.quick else KUBE_FULL_SCENARIOS)
    scenarios = scenarios_named(names)
    for scenario in scenarios:
        check_supported(scenario)
    return scenarios


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        chosen = contenders([s.strip() for s in args.strategies.split(",") if s.strip()])
        scenarios = chosen_scenarios(args)
    except (ValueError, MissingBinaries) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from bench.report import write_outputs

    started = time.monotonic()
    report = run_benchmark(
        scenarios,
        chosen,
        RunSettings(
            args.time_scale or DEFAULT_TIME_SCALE,
            args.run_timeout or (QUICK_RUN_TIMEOUT if args.quick else FULL_RUN_TIMEOUT),
            args.control_plane,
        ),
    )
    report["wall_seconds"] = round(time.monotonic() - started)
    out = args.out or (DEFAULT_OUT / KUBE_RESULTS_DIR if args.control_plane == "kube" else DEFAULT_OUT)
    paths = write_outputs(report, out, plots=not args.no_plots)
    print((out / "strategies.md").read_text())
    print(f"wrote {', '.join(str(p) for p in paths)} in {report['wall_seconds']}s")
    problems = failures(report)
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
