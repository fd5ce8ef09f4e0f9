"""A strategy run's counters, from either control plane, as one `/debug/stats`-shaped snapshot.

`reset` opens the run's window (just before the measured JobSet is created), `snapshot` closes it (once
every pod ran) and returns the counters of the window in the shape of kubesim's `/debug/stats`, which
`bench.strategies.result_from_stats` and `bench.measures` read.

- `KubesimCounters`: kubesim's own counters (`POST /debug/reset-stats`, `GET /debug/stats`).
- `KubeCounters`: the real control plane's. Requests, rejected pod creations, Job and pod patches and
  Event writes from the API server's audit log (`bench.audit`); webhook calls per webhook from
  kube-apiserver's `apiserver_admission_webhook_admission_duration_seconds_count` and scheduling attempts
  and preemptions from kube-scheduler's `/metrics`, each scraped when the window opens and when it closes
  (`bench.promtext`). What the real components do not count (kubesim's filter and affinity evaluations)
  is None.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import httpx

from bench.audit import Window, count_requests
from bench.promtext import Samples
from devstack.controlplane.audit import AuditLog

ADMISSION_CALLS = "apiserver_admission_webhook_admission_duration_seconds_count"
SCHEDULE_ATTEMPTS = "scheduler_schedule_attempts_total"
QUEUE_INCOMING = "scheduler_queue_incoming_pods_total"
"""Pods moved into one of the scheduling queues, by the event that moved them (why pods were retried)."""
PREEMPTION_VICTIMS = "scheduler_preemption_victims"
"""A histogram observed once per preemption that nominated a node, with its number of victims."""
AUDIT_MARKER_AGENT = "bench-audit-marker"
AUDIT_FLUSH_TIMEOUT = 30.0
"""Seconds for the API server to log the marker request (it logs each request as it answers it)."""


class CounterError(RuntimeError):
    """The run's counters could not be read."""


class Counters(Protocol):
    async def reset(self, http: httpx.AsyncClient) -> None:
        """Open the window: what happens from now on counts."""
        ...

    async def snapshot(self, http: httpx.AsyncClient, namespaces: Sequence[str]) -> dict[str, Any]:
        """Close the window: the counters of what happened in it (`namespaces`: the run's own)."""
        ...


async def _get(http: httpx.AsyncClient, path: str, **kwargs: Any) -> httpx.Response:
    response = await http.get(path, **kwargs)
    response.raise_for_status()
    return response


class KubesimCounters:
    async def reset(self, http: httpx.AsyncClient) -> None:
        (await http.post("/debug/reset-stats")).raise_for_status()

    async def snapshot(self, http: httpx.AsyncClient, namespaces: Sequence[str]) -> dict[str, Any]:
        del namespaces  # kubesim's counters already say which namespace each request was about
        stats: dict[str, Any] = (await _get(http, "/debug/stats")).json()
        return stats


@dataclass(frozen=True)
class WebhookNames:
    """The registered admission webhooks by owner: this project's, JobSet's pod webhooks, JobSet's others
    (its JobSet defaulting and validation)."""

    project: frozenset[str]
    jobset_pods: frozenset[str]
    jobset_other: frozenset[str]


def webhook_names(configurations: Sequence[dict[str, Any]], *, jobset_prefix: str) -> WebhookNames:
    """Sort the webhooks of the cluster's Mutating/ValidatingWebhookConfigurations: those of configurations
    named `jobset_prefix…` are JobSet's (a pod webhook if one of its rules names pods), the rest this
    project's."""
    project: set[str] = set()
    jobset_pods: set[str] = set()
    jobset_other: set[str] = set()
    for configuration in configurations:
        jobset = str(configuration["metadata"]["name"]).startswith(jobset_prefix)
        for webhook in configuration.get("webhooks") or []:
            resources = {r for rule in webhook.get("rules") or [] for r in rule.get("resources") or []}
            if not jobset:
                project.add(webhook["name"])
            elif "pods" in resources:
                jobset_pods.add(webhook["name"])
            else:
                jobset_other.add(webhook["name"])
    return WebhookNames(frozenset(project), frozenset(jobset_pods), frozenset(jobset_other))


def admission_sections(grown: Samples, names: WebhookNames) -> dict[str, Any]:
    """The `admission` (this project's webhooks) and `jobset_webhooks` (JobSet's pod webhooks, as kubesim
    counts them) sections from the window's growth of kube-apiserver's admission counters."""
    calls = grown.by_label(ADMISSION_CALLS, "name")
    denied = grown.by_label(ADMISSION_CALLS, "name", rejected="true")

    def total(counts: dict[str, float], wanted: frozenset[str]) -> int:
        return round(sum(n for name, n in counts.items() if name in wanted))

    return {
        "admission": {"calls": total(calls, names.project), "denied": total(denied, names.project)},
        "jobset_webhooks": {
            "calls": total(calls, names.jobset_pods),
            "denied": total(denied, names.jobset_pods),
            "jobset_object_calls": total(calls, names.jobset_other),
        },
        "admission_calls_by_webhook": {name: round(n) for name, n in sorted(calls.items()) if n},
    }


def scheduler_section(grown: Samples) -> dict[str, Any]:
    """The `scheduler` section from the window's growth of kube-scheduler's counters."""
    return {
        "attempts": round(grown.total(SCHEDULE_ATTEMPTS)),
        "unschedulable": round(grown.total(SCHEDULE_ATTEMPTS, result="unschedulable")),
        "preemptions": round(grown.total(f"{PREEMPTION_VICTIMS}_count")),
        "preemption_victims": round(grown.total(f"{PREEMPTION_VICTIMS}_sum")),
        "filter_evaluations": None,
        "affinity_evaluations": None,
        "queue_moves_by_event": {
            event: round(n) for event, n in sorted(grown.by_label(QUEUE_INCOMING, "event").items()) if n
        },
    }


def real_control_plane_fields(stats: dict[str, Any]) -> dict[str, Any]:
    """What only a `KubeCounters` snapshot has, as result fields: the background requests set aside, the
    rejected creations by status code, JobSet's JobSet-webhook calls, every webhook's calls, the window's
    length. Nothing for a kubesim snapshot."""
    if "background_requests" not in stats:
        return {}
    return {
        "background_requests": stats["background_requests"],
        "pod_creates_rejected_by_code": stats["pods"]["create_rejected_by_code"],
        "jobset_object_webhook_calls": stats["jobset_webhooks"]["jobset_object_calls"],
        "admission_calls_by_webhook": stats["admission_calls_by_webhook"],
        "scheduler_queue_moves_by_event": stats["scheduler"]["queue_moves_by_event"],
        "window_seconds": stats["window_seconds"],
    }


@dataclass
class _Opened:
    offset: int
    start: datetime
    apiserver: Samples
    scheduler: Samples


async def scrape_unverified(url: str) -> str:
    """A metrics page served with a self-signed certificate to anyone (kwokctl allows `/metrics` without
    authorization on kube-scheduler's secure port)."""
    async with httpx.AsyncClient(verify=False, timeout=30.0) as http:
        return (await _get(http, url)).text


@dataclass
class KubeCounters:
    """The real control plane's counters (module docstring). `scheduler_metrics` returns kube-scheduler's
    `/metrics` page."""

    audit_log: AuditLog
    webhooks: WebhookNames
    scheduler_metrics: Callable[[], Awaitable[str]]
    flush_timeout: float = AUDIT_FLUSH_TIMEOUT
    _opened: _Opened | None = field(default=None, init=False)

    async def _scheduler_samples(self) -> Samples:
        return Samples.parse(await self.scheduler_metrics())

    async def reset(self, http: httpx.AsyncClient) -> None:
        apiserver = Samples.parse((await _get(http, "/metrics")).text)
        scheduler = await self._scheduler_samples()
        self._opened = _Opened(self.audit_log.mark(), datetime.now(UTC), apiserver, scheduler)

    async def snapshot(self, http: httpx.AsyncClient, namespaces: Sequence[str]) -> dict[str, Any]:
        opened = self._opened
        if opened is None:
            raise CounterError("snapshot() before reset(): the window was never opened")
        window = Window(opened.start, datetime.now(UTC))
        apiserver = Samples.parse((await _get(http, "/metrics")).text).minus(opened.apiserver)
        scheduler = (await self._scheduler_samples()).minus(opened.scheduler)
        await self._wait_logged(http, opened.offset)
        counts = count_requests(self.audit_log.requests(since=opened.offset), window)
        stats = counts.as_stats(await _event_reasons(http, namespaces))
        stats.update(admission_sections(apiserver, self.webhooks))
        stats["scheduler"] = scheduler_section(scheduler)
        stats["window_seconds"] = round((window.end - window.start).total_seconds(), 3)
        return stats

    async def _wait_logged(self, http: httpx.AsyncClient, offset: int) -> None:
        """Send a marker request and wait until the audit log has it: every request answered before it
        is in the log by then."""
        response = await _get(http, "/api/v1/namespaces/default", headers={"User-Agent": AUDIT_MARKER_AGENT})
        audit_id = response.headers.get("Audit-Id")
        if not audit_id:
            raise CounterError("the API server's response carries no Audit-Id header: is auditing on?")
        deadline = time.monotonic() + self.flush_timeout
        while not any(r.audit_id == audit_id for r in self.audit_log.requests(since=offset)):
            if time.monotonic() > deadline:
                raise CounterError(
                    f"request {audit_id} not in {self.audit_log.path} after {self.flush_timeout:g}s"
                )
            await asyncio.sleep(0.2)


async def _event_reasons(http: httpx.AsyncClient, namespaces: Sequence[str]) -> dict[tuple[str, str], str]:
    """(namespace, name) → reason of every Event stored in `namespaces` (the audit log names the Events a
    request wrote, not their reasons)."""
    reasons: dict[tuple[str, str], str] = {}
    for namespace in namespaces:
        events = (await _get(http, f"/api/v1/namespaces/{namespace}/events")).json()["items"]
        for event in events:
            reasons[namespace, event["metadata"]["name"]] = str(event.get("reason") or "")
    return reasons
