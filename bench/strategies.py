"""`python -m bench strategies [--quick] [--long-wait | --kueue] [--repeat N] [--out DIR]`: JobSet and this
project's four strategies side by side on the real control plane (bench.kube), and, in the gang
scenarios, two of them with all-or-nothing placement per JobSet; with `--kueue`, JobSet, `gate` and
`elastic` next to Kueue instead.

For each scenario a stack is brought up, and for each strategy run of a large scenario a fresh one
(`FRESH_STACK_PODS`); each run has a namespace of its own on an idle cluster. This project's strategies
are selected per Job by the `exclusive-placement.io/strategy` annotation on the JobSet's pod template (the
same webhook binary serves all four, so nothing but the strategy differs between runs); the `jobset`
baseline's namespace is exempt from this project's webhooks (the chart's
`webhook.admission.exemptNamespaces`), so JobSet's own pod webhooks alone place its pods. JobSet's webhooks
are registered for every strategy: this project's strategies take JobSet's annotation over on the child
Jobs' pod templates, so JobSet's webhooks pass their pods. Between runs on a shared stack the previous
JobSet is deleted and its pods are gone before the next run's window opens.

With `--repeat N` every contender runs N times, the contenders taking turns (run 1 of each, then run 2 of
each, ...): every figure is reported as its median, min and max, and every ratio over the paired runs
(bench.repeats).

A gang scenario creates several JobSets at once, each one gang (bench.rendezvous), and follows them until
all completed or its deadline passed (a deadlock is a result, not a failure): `bench.gang` turns the pod
watch into the partial-placement figures and the domain timeline.

A Kueue scenario (`--kueue`) gives each run's namespace a LocalQueue of the stack's ClusterQueue, whose
GPU quota fits one JobSet, creates its JobSets at once, and follows them (a JobSet watch beside the pod
watch) until all of them completed: Kueue admits them one after the other. Kueue's requests and webhook
calls are counted apart (bench.queued). Under Kueue `elastic` is elastic: the child Jobs of a
JobSet Kueue queues are admitted at size 1 and resized once their leader binds (docs/kueue.md, bench.queued).

A scenario with a backlog first submits plain, non-exclusive pods in a second namespace and creates the
measured JobSet once all of them exist, so its leaders queue behind what the scheduler has not bound yet;
the window opens just before the JobSet is created.
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

from bench.apiserver_profile import ProfiledCounters, ProfileError, ProfileTarget
from bench.contenders import (
    CONTENDER_KEYS,
    JOBSET_BASELINE,
    Contender,
    contenders,
    for_scenario,
    placement_problems,
)
from bench.counters import WindowCounters, WindowCounts
from bench.gang import gang_outcome
from bench.kube import (
    Connection,
    connection,
    kube_counters,
    pod_annotations,
    stack_options,
    wait_nodes_settled,
)
from bench.measures import (
    HEADLINE_METRICS,
    LOOKUP_VERBS,
    RESIZER_CLIENT,
    WEBHOOK_CLIENT,
    failed_create_messages,
    failed_scheduling_messages,
    per_job_fields,
    preemption_fields,
    timeline_fields,
    waste_of,
    workload_requests,
)
from bench.paths import SCRATCH
from bench.queued import (
    KUEUE_HEADLINE_METRICS,
    JobSetRecorder,
    elastic_fallback_jobs,
    fallback_problems,
    kueue_fields,
    queue_problems,
    queued_fields,
)
from bench.recorder import BacklogTracker, GangRecorder, PodRecorder, stop
from bench.rendezvous import play_rendezvous
from bench.repeats import aggregate, paired_ratios
from bench.scenarios import (
    FULL_SCENARIOS,
    KUEUE_LOCAL_QUEUE,
    KUEUE_QUICK_SCENARIOS,
    KUEUE_SCENARIOS,
    LONG_WAIT_SCENARIOS,
    QUICK_SCENARIOS,
    TOPOLOGY_KEY,
    Backlog,
    Scenario,
    backlog_pods,
    gang_jobset_manifest,
    gang_jobset_names,
    jobset_manifest,
    queued_jobset_manifest,
    queued_jobset_names,
    scenarios_named,
)
from devstack.controlplane import kueue
from devstack.controlplane.binaries import MissingBinaries, require_built
from devstack.controlplane.choice import CONTROL_PLANE, add_control_plane_argument
from devstack.controlplane.versions import pinned_versions
from devstack.exclusivity import node_domains
from devstack.manifests import priority_class
from devstack.stack import Stack
from kubekit.client import is_not_found
from placement.constants import JOBSET_GROUP, JOBSET_VERSION, Strategy

log = logging.getLogger("bench.strategies")

DEFAULT_OUT = SCRATCH
JOBSET_NAME = "bench"
JOBSETS_PATH = f"/apis/{JOBSET_GROUP}/{JOBSET_VERSION}/namespaces/{{namespace}}/jobsets"
PRIORITY_CLASSES_PATH = "/apis/scheduling.k8s.io/v1/priorityclasses"
LOCAL_QUEUES_PATH = f"/apis/{kueue.API_VERSION}/namespaces/{{namespace}}/localqueues"
LOCAL_QUEUE_ACTIVE_TIMEOUT = 60.0
"""Seconds for Kueue to report a run's new LocalQueue Active before the run counts as failed."""
FULL_RUN_TIMEOUT = 600.0
QUICK_RUN_TIMEOUT = 180.0
"""Wall seconds a quick run may take: a quick run takes seconds, even loaded; a stuck one fails in time."""
BACKLOG_CREATION_TIMEOUT = 120.0
"""Wall seconds for every backlog pod to be created before the run counts as failed."""
LOW_PRIORITY, HIGH_PRIORITY = 10, 1000
"""The preemption scenario's PriorityClass values."""
LOW_PRIORITY_MAX_RESTARTS = 5
"""The low-priority JobSet's failurePolicy.maxRestarts: preempted, it restarts and waits for domains;
bounded so that a preemption that keeps repeating ends with the JobSet failed, not with a stuck run."""
LOW_JOBSET_NAME = "low"
MAX_REPEAT = 20


class BenchError(RuntimeError):
    pass


@dataclass(frozen=True)
class RunSettings:
    run_timeout: float
    """Wall seconds one strategy run may take before it is recorded as failed."""
    repeat: int = 1
    """Runs per contender and scenario."""
    warm_up: bool = True
    """Before a stack's first measured run, one unmeasured `WARM_UP` JobSet per contender of its runs."""
    profile_dir: Path | None = None
    """Where to write kube-apiserver's CPU profile of every measured window (bench.apiserver_profile)."""

    def __post_init__(self) -> None:
        if not 1 <= self.repeat <= MAX_REPEAT:
            raise ValueError(f"--repeat must be 1 to {MAX_REPEAT}, got {self.repeat}")
        if self.run_timeout <= 0:
            raise ValueError("--run-timeout must be > 0")


def result_from_counts(
    counts: WindowCounts, seconds: float, violations: int, *, namespace: str
) -> dict[str, Any]:
    """The counters of one strategy run: the issue's fields, the requests about the measured JobSet's
    `namespace` (without a backlog's or the nodes'), wasted requests (bench.measures.Waste) and their
    parts, both projects' webhook calls, what this project's webhook and resizer asked of the API server,
    kube-apiserver's CPU seconds, scheduling attempts, and the requests by verb and resource, by client,
    and by client, verb, resource and code (where the differences come from)."""
    requests = counts.requests
    waste = waste_of(counts)
    admission = counts.admission
    return {
        "pod_creates_rejected": requests.pod_creates_rejected,
        "pod_creates_accepted": requests.pod_creates_accepted,
        "pod_creates_rejected_by_code": requests.rejected_by_code(),
        "api_requests": requests.total,
        "api_writes": requests.writes,
        "api_requests_in_namespace": requests.in_namespace(namespace),
        "api_writes_in_namespace": requests.in_namespace(namespace, writes=True),
        "admission_calls": admission.project,
        "jobset_webhook_calls": admission.jobset_pods,
        "jobset_webhook_denied": admission.jobset_pods_denied,
        "jobset_object_webhook_calls": admission.jobset_objects,
        "all_webhook_calls": admission.project + admission.jobset_pods,
        "admission_calls_by_webhook": dict(admission.by_webhook),
        "apiserver_cpu_seconds": counts.apiserver_cpu_seconds,
        "admission_policy_seconds": round(sum(counts.admission_policy_seconds.values()), 3),
        "admission_policy_seconds_by_policy": dict(counts.admission_policy_seconds),
        "wasted_requests": waste.total,
        "wasted_rejected_creates": waste.rejected_creates,
        "wasted_event_writes": waste.event_writes,
        "wasted_webhook_lookups": waste.webhook_lookups,
        "webhook_lookups": requests.client_requests(WEBHOOK_CLIENT, LOOKUP_VERBS),
        "resizer_requests": workload_requests(counts, RESIZER_CLIENT),
        "job_patches": requests.patched("jobs"),
        "job_create_attempts": requests.create_attempts("jobs"),
        "pod_patches": requests.patched("pods"),
        "seconds_to_all_running": round(seconds, 3),
        "exclusive_violations": violations,
        "scheduler_attempts": counts.scheduler.attempts,
        "scheduler_unschedulable": counts.scheduler.unschedulable,
        "scheduler_queue_moves_by_event": dict(counts.scheduler.queue_moves_by_event),
        "event_writes_by_reason": counts.event_writes_by_reason(),
        "api_requests_by_verb_resource": requests.by(lambda key: key.verb_resource),
        "api_requests_by_client": requests.by(lambda key: key.client),
        "api_requests_by_client_verb_resource_code": requests.by(str),
        "background_requests": dict(sorted(requests.background.items())),
        "window_seconds": round(counts.seconds, 3),
    }


def long_wait_fields(result: dict[str, Any]) -> dict[str, Any]:
    """Wasted requests per minute a Job spent waiting for its leader to bind."""
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
    return f"{namespace}-backlog"


def low_priority_namespace(namespace: str) -> str:
    return f"{namespace}-low"


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
    run_timeout: float
    connection: Connection
    counters: WindowCounters
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    """On every measured pod template: kwok's run time."""
    rendezvous_seconds: float | None = None
    """Gang scenario: the benchmark plays the gangs' rendezvous (bench.rendezvous)."""

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
        if run.scenario.kueue:
            await _create_local_queue(http, run.namespace)
        try:
            result = await _measure_scenario(http, run)
            events = await _events(http, namespaces)
            result["failed_create_messages"] = failed_create_messages(events)
            result["failed_scheduling_messages"] = failed_scheduling_messages(events)
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


def local_queue(namespace: str) -> dict[str, Any]:
    """The run's LocalQueue `KUEUE_LOCAL_QUEUE` of the stack's ClusterQueue."""
    return {
        "apiVersion": kueue.API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": KUEUE_LOCAL_QUEUE, "namespace": namespace},
        "spec": {"clusterQueue": kueue.CLUSTER_QUEUE},
    }


def local_queue_active(queue: dict[str, Any]) -> bool:
    conditions = (queue.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Active" and c.get("status") == "True" for c in conditions)


async def _create_local_queue(http: httpx.AsyncClient, namespace: str) -> None:
    """Create the run's LocalQueue and wait until Kueue reports it Active (before the window opens: a JobSet
    naming a LocalQueue Kueue has not seen yet would wait for it)."""
    path = LOCAL_QUEUES_PATH.format(namespace=namespace)
    await _request(http, "POST", path, json=local_queue(namespace))
    deadline = time.monotonic() + LOCAL_QUEUE_ACTIVE_TIMEOUT
    while not local_queue_active(await _request(http, "GET", f"{path}/{KUEUE_LOCAL_QUEUE}")):
        if time.monotonic() > deadline:
            raise BenchError(
                f"LocalQueue {namespace}/{KUEUE_LOCAL_QUEUE} not Active after {LOCAL_QUEUE_ACTIVE_TIMEOUT:g}s"
            )
        await asyncio.sleep(0.2)


async def _measure_scenario(http: httpx.AsyncClient, run: Run) -> dict[str, Any]:
    if run.scenario.kueue:
        return await _measure_queued(http, run)
    if run.scenario.preemption:
        return await _measure_preemption(http, run)
    if run.scenario.gang:
        return await _measure_gang(http, run)
    return await _measure(http, run)


async def _events(http: httpx.AsyncClient, namespaces: Sequence[str]) -> list[dict[str, Any]]:
    """The run's Events, read after its window (not counted): why creations were refused, why the
    scheduler could not place pods."""
    events: list[dict[str, Any]] = []
    for namespace in namespaces:
        events += (await _request(http, "GET", f"/api/v1/namespaces/{namespace}/events"))["items"]
    return events


def measured_jobsets(scenario: Scenario) -> list[str]:
    if scenario.kueue:
        return queued_jobset_names(scenario)
    return gang_jobset_names(scenario) if scenario.gang else [JOBSET_NAME]


async def _delete_jobset(http: httpx.AsyncClient, namespace: str, name: str) -> None:
    try:
        await _request(http, "DELETE", f"{JOBSETS_PATH.format(namespace=namespace)}/{name}")
    except httpx.HTTPStatusError as err:
        if not is_not_found(err.response.status_code):  # a run that failed before creating it
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
            if not is_not_found(err.response.status_code):  # a run that failed before submitting it
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
        counts = await run.counters.snapshot(http, run.namespaces)
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
    result = result_from_counts(
        counts, recorder.all_running_at - start, recorder.replay.violations, namespace=run.namespace
    )
    result.update(timeline_fields(recorder.timelines, scenario.pods_per_job))
    if scenario.long_wait:
        result.update(long_wait_fields(result))
        result.update(per_job_fields(recorder.timelines, scenario.pods_per_job, counts, start))
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
        counts = await run.counters.snapshot(http, run.namespaces)
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
    result = result_from_counts(counts, seconds or 0.0, violations, namespace=run.namespace)
    result.update(preemption_fields(counts.scheduler, low_jobset, low_running, scenario.total_pods))
    result.update(
        high_priority_outcome(seconds, len(high.started), scenario.total_pods, high_ended or run.run_timeout)
    )
    result.update(timeline_fields(high.timelines, scenario.pods_per_job))
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
    deadline = min(float(scenario.gang_deadline_seconds or 0.0), run.run_timeout)
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
        counts = await run.counters.snapshot(http, run.namespaces)
    finally:
        watch_ended = await stop(watch) or (await stop(rendezvous.task) if rendezvous else "")
    if watch_ended:
        raise BenchError(f"{scenario.name}/{run.contender.key}: {watch_ended}")
    jobs = (await _request(http, "GET", f"/apis/batch/v1/namespaces/{run.namespace}/jobs"))["items"]
    pods = (await _request(http, "GET", f"/api/v1/namespaces/{run.namespace}/pods"))["items"]
    all_running = None if recorder.all_running_at is None else recorder.all_running_at - start
    result = result_from_counts(
        counts, all_running or 0.0, recorder.replay.violations, namespace=run.namespace
    )
    result["seconds_to_all_running"] = None if all_running is None else round(all_running, 3)
    result.update(timeline_fields(recorder.timelines, scenario.pods_per_job))
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


async def _measure_queued(http: httpx.AsyncClient, run: Run) -> dict[str, Any]:
    """Create every JobSet of the Kueue scenario at once, each naming the run's LocalQueue, and follow them
    until all completed (Kueue admitting them one at a time); a timeout fails the run."""
    scenario, namespace = run.scenario, run.namespace
    names = queued_jobset_names(scenario)
    sizes = dict.fromkeys(names, scenario.jobset_pods)
    pods, jobsets = GangRecorder(run.nodes, sizes), JobSetRecorder(names)
    path = JOBSETS_PATH.format(namespace=namespace)
    pod_watch = asyncio.create_task(pods.follow(http, namespace))
    jobset_watch = asyncio.create_task(jobsets.follow(http, path))
    manifests = [
        queued_jobset_manifest(
            scenario,
            run.contender.strategy,
            name=name,
            namespace=namespace,
            pod_annotations=run.pod_annotations,
        )
        for name in names
    ]
    try:
        await asyncio.wait_for(asyncio.gather(pods.connected.wait(), jobsets.connected.wait()), 30)
        await run.counters.reset(http)
        start = time.monotonic()
        await asyncio.gather(*(_request(http, "POST", path, json=manifest) for manifest in manifests))
        finished = await _wait_for(jobsets.all_finished, jobset_watch, run.run_timeout)
        ended = time.monotonic()
        counts = await run.counters.snapshot(http, run.namespaces)
    finally:
        ended_pods, ended_jobsets = await stop(pod_watch), await stop(jobset_watch)
    watch_ended = ended_pods or ended_jobsets
    times = jobsets.relative_to(start)
    if watch_ended or not finished:
        done = sum(1 for t in times.values() if t.finished is not None)
        reason = watch_ended or f"timeout after {run.run_timeout:.0f}s"
        raise BenchError(
            f"{scenario.name}/{run.contender.key}: {done}/{len(names)} JobSets finished ({reason})"
        )
    jobs = (await _request(http, "GET", f"/apis/batch/v1/namespaces/{namespace}/jobs"))["items"]
    pod_items = (await _request(http, "GET", f"/api/v1/namespaces/{namespace}/pods"))["items"]
    all_running = None if pods.all_running_at is None else pods.all_running_at - start
    result = result_from_counts(counts, all_running or 0.0, pods.replay.violations, namespace=namespace)
    result["seconds_to_all_running"] = None if all_running is None else round(all_running, 3)
    result.update(timeline_fields(pods.timelines, scenario.pods_per_job))
    result.update(kueue_fields(counts, namespace))
    outcome = gang_outcome(pods.relative_to(start), sizes, ended - start)
    result.update(queued_fields(times, outcome.whole_at))
    result["elastic_fallback_jobs"] = elastic_fallback_jobs(jobs)
    problems = (
        placement_problems(
            run.contender,
            jobs,
            pod_items,
            expected_jobs=scenario.jobs * scenario.jobsets,
            topology_key=TOPOLOGY_KEY,
        )
        + fallback_problems(jobs)
        + baseline_problems(run.contender, result)
        + queue_problems(times, names)
        + pods.replay.describe()
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


RUN_NAMESPACE_PREFIX_LENGTH = 45
"""A run's namespace is `bench-<scenario>-<contender>` cut to this length, then `-r<run>`: short enough
for its backlog's and low-priority JobSet's namespaces (`-backlog`, `-low`) to stay valid names."""


def run_namespace(scenario: Scenario, contender: Contender, repetition: int = 1) -> str:
    base = f"bench-{scenario.name}-{contender.key}".lower().replace("+", "-")[:RUN_NAMESPACE_PREFIX_LENGTH]
    return f"{base.rstrip('-')}-r{repetition}"


FRESH_STACK_PODS = 200
"""Above this many pods (backlog included) each strategy run gets a fresh stack: deleting a JobSet of
1,024 pods takes the Job controller over a minute at its 20 qps (a finalizer patch per pod), longer than
starting a stack. Smaller scenarios share one stack and wait until the previous run's pods are gone.
Either way a run starts on an idle cluster."""


def fresh_stack_per_strategy(scenario: Scenario) -> bool:
    backlog_pods = scenario.backlog.pods if scenario.backlog else 0
    return scenario.total_pods + backlog_pods > FRESH_STACK_PODS


@dataclass(frozen=True)
class Turn:
    """One run of one contender: the `repetition`-th."""

    contender: Contender
    repetition: int


def turns(group: Sequence[Contender], repeat: int) -> list[Turn]:
    """Every contender's runs, the contenders taking turns: run 1 of each, then run 2 of each, ..."""
    return [Turn(c, r) for r in range(1, repeat + 1) for c in group]


def _run_contenders(
    scenario: Scenario, group: Sequence[Contender], settings: RunSettings
) -> dict[str, list[dict[str, Any]]]:
    """Every run of every contender of `scenario` (`turns`), on one stack or on a fresh stack each
    (`FRESH_STACK_PODS`): contender key → its runs in order."""
    runs: dict[str, list[dict[str, Any]]] = {c.key: [] for c in group}
    order = turns(group, settings.repeat)
    batches = [[turn] for turn in order] if fresh_stack_per_strategy(scenario) else [order]
    for batch in batches:
        for turn, result in zip(batch, _run_on_stack(scenario, batch, settings), strict=True):
            runs[turn.contender.key].append(result)
    return runs


WARM_UP = Scenario(name="warm-up", jobs=1, pods_per_job=2, pools=1)
"""Run unmeasured, once per contender, before a stack's first measured run: one Job of a leader and a
follower. A long-running cluster has long paid what a fresh stack pays on first use, and which contender
met it first would otherwise decide who pays it: kube-apiserver fetches and parses its `api/v1` OpenAPI
document the first time a MutatingAdmissionPolicy mutates a pod (0.2-0.7 s of CPU, docs/results.md), and
opens its connections to each webhook on the first call."""


def warm_up_contenders(batch: Sequence[Turn]) -> list[Contender]:
    """Each contender of `batch` once, in the order of its first run."""
    seen: dict[str, Contender] = {}
    for turn in batch:
        seen.setdefault(turn.contender.key, turn.contender)
    return list(seen.values())


def exempt_namespaces(scenario: Scenario, batch: Sequence[Turn], *, warm_up: bool) -> list[str]:
    """The namespaces JobSet alone places, warm-up ones included: exempt from this project's webhooks and
    policies, as a user would exempt them."""
    placed_by_jobset = [turn for turn in batch if not turn.contender.uses_project_webhooks]
    measured = [
        namespace
        for turn in placed_by_jobset
        for namespace in jobset_namespaces(scenario, run_namespace(scenario, turn.contender, turn.repetition))
    ]
    warming = [
        run_namespace(WARM_UP, contender) for contender in warm_up_contenders(placed_by_jobset) if warm_up
    ]
    return measured + warming


def _warm_up(stack: Stack, runs: Sequence[Run]) -> str | None:
    """Every contender's `WARM_UP` run on the stack, results dropped; what failed, if anything."""
    for run in runs:
        log.info("scenario %s: warm-up run of %s", run.scenario.name, run.contender.key)
        try:
            result = asyncio.run(run_strategy(run, clean_up=True))
        except (BenchError, httpx.HTTPError) as err:
            return f"warm-up run of {run.contender.key} failed: {type(err).__name__}: {err}"
        if result.get("problems"):
            return f"warm-up run of {run.contender.key}: {'; '.join(result['problems'])}"
        stack.check_alive()
    return None


def profiled(
    counters: WindowCounters,
    profile_dir: Path | None,
    scenario: Scenario,
    contender: Contender,
    repetition: int,
) -> WindowCounters:
    """The run's counters; with `profile_dir`, recording kube-apiserver's CPU profile over its window too."""
    if profile_dir is None:
        return counters
    return ProfiledCounters(
        counters, ProfileTarget(profile_dir, f"{scenario.name}-{contender.key}-{repetition}")
    )


def _run_on_stack(scenario: Scenario, batch: Sequence[Turn], settings: RunSettings) -> list[dict[str, Any]]:
    exempt = exempt_namespaces(scenario, batch, warm_up=settings.warm_up)
    results: list[dict[str, Any]] = []
    with Stack(stack_options(scenario, exempt)) as stack:
        wait_nodes_settled(stack.client)
        domains = node_domains(stack.client.list("Node"), TOPOLOGY_KEY)
        counters = kube_counters(stack)
        if settings.warm_up:
            warm_ups = [
                Run(
                    WARM_UP,
                    contender,
                    run_namespace(WARM_UP, contender),
                    domains,
                    run_timeout=settings.run_timeout,
                    connection=connection(stack),
                    counters=counters,
                )
                for contender in warm_up_contenders(batch)
            ]
            failed = _warm_up(stack, warm_ups)
            if failed:
                log.error("scenario %s: %s", scenario.name, failed)
                return [{"error": failed} for _ in batch]
        for index, turn in enumerate(batch):
            contender = turn.contender
            run = Run(
                scenario,
                contender,
                run_namespace(scenario, contender, turn.repetition),
                domains,
                run_timeout=settings.run_timeout,
                connection=connection(stack),
                counters=profiled(counters, settings.profile_dir, scenario, contender, turn.repetition),
                pod_annotations=pod_annotations(scenario),
                rendezvous_seconds=scenario.pod_run_seconds if scenario.gang else None,
            )
            log.info(
                "scenario %s, strategy %s, run %d/%d: %s pods",
                scenario.name,
                contender.key,
                turn.repetition,
                settings.repeat,
                scenario.total_pods,
            )
            try:
                result = asyncio.run(run_strategy(run, clean_up=index < len(batch) - 1))
            except (BenchError, ProfileError, httpx.HTTPError) as err:
                log.error("%s/%s run %d failed: %s", scenario.name, contender.key, turn.repetition, err)
                result = {"error": f"{type(err).__name__}: {err}"}
            results.append(result)
            stack.check_alive()
            log.info("  %s", json.dumps(result))
    return results


RATIO_BASELINES: tuple[tuple[str, str], ...] = (
    ("elastic_vs_jobset", JOBSET_BASELINE),
    ("elastic_vs_gate", Strategy.GATE),
)


def run_scenario(scenario: Scenario, chosen: Sequence[Contender], settings: RunSettings) -> dict[str, Any]:
    group = for_scenario(chosen, gang=scenario.gang, kueue=scenario.kueue)
    runs = _run_contenders(scenario, group, settings) if group else {}
    record = scenario.fields()
    record["results"] = {key: aggregate(key_runs) for key, key_runs in runs.items()}
    if scenario.long_wait:
        minutes = [
            r["waiting_job_minutes"]
            for key_runs in runs.values()
            for r in key_runs
            if "waiting_job_minutes" in r
        ]
        record["waiting_job_minutes"] = round(statistics.median(minutes), 1) if minutes else None
    keys = [key for key, _ in (KUEUE_HEADLINE_METRICS if scenario.kueue else HEADLINE_METRICS)]
    for name, baseline in RATIO_BASELINES:
        record[name] = paired_ratios(record["results"], keys, baseline=baseline)
    return record


def report_versions(scenarios: Sequence[Scenario]) -> dict[str, str]:
    """The pinned component versions, Kueue's among them when a scenario runs it."""
    pinned = pinned_versions()
    versions = pinned.as_dict()
    if any(scenario.kueue for scenario in scenarios):
        versions["kueue"] = pinned.kueue
    return versions


def run_benchmark(
    scenarios: Sequence[Scenario], contenders: Sequence[Contender], settings: RunSettings
) -> dict[str, Any]:
    return {
        "control_plane": CONTROL_PLANE,
        "versions": report_versions(scenarios),
        "repeat": settings.repeat,
        "ratio_range": "min-max over paired runs (run i of each contender, on the same stack)",
        "scenarios": [run_scenario(s, contenders, settings) for s in scenarios],
    }


def failures(report: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for scenario in report["scenarios"]:
        for strategy, result in scenario["results"].items():
            for problem in result.get("errors", []) + result.get("problems", []):
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
        help="4x8 alone, every contender on one stack: ~1.5-3 min per repetition",
    )
    parser.add_argument(
        "--long-wait",
        action="store_true",
        help="also run the long wait (4 Jobs x 4 pods on 2 pools, pods running 4 minutes): ~5 min per "
        "contender and repetition",
    )
    parser.add_argument(
        "--kueue",
        action="store_true",
        help="the comparison next to Kueue instead: 3 JobSets of 4x4 queued at once through a LocalQueue "
        "whose quota fits one, Kueue's requests counted apart; jobset, gate and elastic (the child Jobs of "
        "a JobSet Kueue queues are resized as anywhere else: Kueue takes the quota from the JobSet's spec; "
        "only a plain Job Kueue queues falls back to gate): ~2 min per contender and repetition, ~30 s "
        "with --quick (2 JobSets of 2x4)",
    )
    add_control_plane_argument(parser)
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs per contender (default 1); figures are reported as median, min and max, ratios over the "
        "paired runs",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="output directory for strategies.json, strategies.md and the plots (default: %(default)s)",
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
        help="run only this scenario (repeatable; any of the full, long-wait, quick and large ones, e.g. "
        "32x32 or 64x64)",
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument(
        "--no-warm-up",
        dest="warm_up",
        action="store_false",
        help="measure from the stack's first run on: skip the unmeasured warm-up JobSet of each contender "
        "(its first-use costs then fall on whichever contender runs first)",
    )
    parser.add_argument(
        "--profile-apiserver",
        type=Path,
        metavar="DIR",
        help="record kube-apiserver's CPU profile over every measured window into DIR "
        "(<scenario>-<contender>-<run>.pb.gz; read with go tool pprof)",
    )
    return parser


def chosen_scenarios(args: argparse.Namespace) -> tuple[Scenario, ...]:
    """The scenarios the command line asks for; ValueError for a bad choice."""
    if args.scenarios:
        if args.quick or args.long_wait or args.kueue:
            raise ValueError("--scenario names the scenarios: not with --quick, --long-wait or --kueue")
        return scenarios_named(args.scenarios)
    if args.kueue:
        if args.long_wait:
            raise ValueError("--kueue runs the Kueue scenario alone: not with --long-wait")
        return KUEUE_QUICK_SCENARIOS if args.quick else KUEUE_SCENARIOS
    chosen = QUICK_SCENARIOS if args.quick else FULL_SCENARIOS
    return chosen + (LONG_WAIT_SCENARIOS if args.long_wait else ())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        chosen = contenders([s.strip() for s in args.strategies.split(",") if s.strip()])
        scenarios = chosen_scenarios(args)
        settings = RunSettings(
            args.run_timeout or (QUICK_RUN_TIMEOUT if args.quick else FULL_RUN_TIMEOUT),
            args.repeat,
            warm_up=args.warm_up,
            profile_dir=args.profile_apiserver,
        )
        require_built()
    except (ValueError, MissingBinaries) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from bench.report import write_outputs

    started = time.monotonic()
    report = run_benchmark(scenarios, chosen, settings)
    report["wall_seconds"] = round(time.monotonic() - started)
    paths = write_outputs(report, args.out, plots=not args.no_plots)
    print((args.out / "strategies.md").read_text())
    print(f"wrote {', '.join(str(p) for p in paths)} in {report['wall_seconds']}s")
    problems = failures(report)
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
