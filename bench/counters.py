"""A strategy run's counters on the real control plane, as one `WindowCounts`.

`reset` opens the run's window (just before the measured JobSet is created), `snapshot` closes it (once
every pod ran) and returns what happened in it, in the components' own terms:

- requests from the API server's audit log, by client, verb, resource, namespace and code, with the Event
  writes among them and the reasons of those Events (`bench.audit`);
- admission webhook calls per webhook from kube-apiserver's
  `apiserver_admission_webhook_admission_duration_seconds_count`, kube-apiserver's own CPU seconds
  (`process_cpu_seconds_total`), and the seconds it spent in each admission policy
  (`apiserver_{mutating,validating}_admission_policy_check_duration_seconds_sum`: CEL evaluated in
  process, which no webhook call counts);
- scheduling attempts, queue moves and preemptions from kube-scheduler's `/metrics`;

each metric scraped when the window opens and when it closes (`bench.promtext`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import httpx

from bench.audit import RequestCounts, Window, count_requests
from bench.promtext import Samples
from devstack.controlplane.audit import AuditLog

ADMISSION_CALLS = "apiserver_admission_webhook_admission_duration_seconds_count"
PROCESS_CPU_SECONDS = "process_cpu_seconds_total"
"""User and system CPU seconds of the process serving the page (Prometheus' process collector)."""
POLICY_CHECK_SECONDS = (
    "apiserver_mutating_admission_policy_check_duration_seconds_sum",
    "apiserver_validating_admission_policy_check_duration_seconds_sum",
)
"""Seconds kube-apiserver spent evaluating each admission policy (label `policy`). A mutating policy's
is timed per mutation (its conversions, patch and defaulting included), not its matchConditions. A
validating policy's is observed only for a validation that failed or erred (k8s.io/apiserver v0.36.3
`policy/validating/dispatcher.go`): the validations that pass, nearly all, are in no figure but the CPU."""
SCHEDULE_ATTEMPTS = "scheduler_schedule_attempts_total"
QUEUE_INCOMING = "scheduler_queue_incoming_pods_total"
"""Pods moved into one of the scheduling queues, by the event that moved them (why pods were retried)."""
PREEMPTION_VICTIMS = "scheduler_preemption_victims"
"""A histogram observed once per preemption that nominated a node, with its number of victims."""
AUDIT_MARKER_AGENT = "bench-audit-marker"
AUDIT_FLUSH_TIMEOUT = 30.0
"""Seconds for the API server to log the marker request (it logs each request as it answers it)."""

EventKey = tuple[str, str]
"""(namespace, name) of an Event."""


class CounterError(RuntimeError):
    """The run's counters could not be read."""


async def _get(http: httpx.AsyncClient, path: str, **kwargs: Any) -> httpx.Response:
    response = await http.get(path, **kwargs)
    response.raise_for_status()
    return response


@dataclass(frozen=True)
class WebhookNames:
    """The registered admission webhooks by owner: this project's, JobSet's pod webhooks, JobSet's others
    (its JobSet defaulting and validation), Kueue's (when it runs)."""

    project: frozenset[str]
    jobset_pods: frozenset[str]
    jobset_other: frozenset[str]
    kueue: frozenset[str] = frozenset()


def webhook_names(
    configurations: Sequence[dict[str, Any]], *, jobset_prefix: str, kueue_prefix: str | None = None
) -> WebhookNames:
    """Sort the webhooks of the cluster's Mutating/ValidatingWebhookConfigurations: those of configurations
    named `jobset_prefix…` are JobSet's (a pod webhook if one of its rules names pods), those named
    `kueue_prefix…` Kueue's, the rest this project's."""
    project: set[str] = set()
    jobset_pods: set[str] = set()
    jobset_other: set[str] = set()
    kueue: set[str] = set()
    for configuration in configurations:
        name = str(configuration["metadata"]["name"])
        jobset = name.startswith(jobset_prefix)
        for webhook in configuration.get("webhooks") or []:
            resources = {r for rule in webhook.get("rules") or [] for r in rule.get("resources") or []}
            if kueue_prefix is not None and name.startswith(kueue_prefix):
                kueue.add(webhook["name"])
            elif not jobset:
                project.add(webhook["name"])
            elif "pods" in resources:
                jobset_pods.add(webhook["name"])
            else:
                jobset_other.add(webhook["name"])
    return WebhookNames(frozenset(project), frozenset(jobset_pods), frozenset(jobset_other), frozenset(kueue))


@dataclass(frozen=True)
class AdmissionCalls:
    """The window's admission webhook calls, as kube-apiserver counted them."""

    project: int
    """Calls to this project's webhooks."""
    project_denied: int
    jobset_pods: int
    """Calls to JobSet's pod webhooks (`mpod.kb.io`, `vpod.kb.io`)."""
    jobset_pods_denied: int
    jobset_objects: int
    """Calls to JobSet's other webhooks (its JobSet defaulting and validation)."""
    by_webhook: Mapping[str, int]
    kueue: int = 0
    """Calls to Kueue's webhooks (its JobSet, Job and own kinds' defaulting and validation)."""

    @classmethod
    def of(cls, grown: Samples, names: WebhookNames) -> AdmissionCalls:
        """From the window's growth of kube-apiserver's admission counters."""
        calls = grown.by_label(ADMISSION_CALLS, "name")
        denied = grown.by_label(ADMISSION_CALLS, "name", rejected="true")

        def total(counts: dict[str, float], wanted: frozenset[str]) -> int:
            return round(sum(n for name, n in counts.items() if name in wanted))

        return cls(
            project=total(calls, names.project),
            project_denied=total(denied, names.project),
            jobset_pods=total(calls, names.jobset_pods),
            jobset_pods_denied=total(denied, names.jobset_pods),
            jobset_objects=total(calls, names.jobset_other),
            by_webhook={name: round(n) for name, n in sorted(calls.items()) if n},
            kueue=total(calls, names.kueue),
        )


@dataclass(frozen=True)
class SchedulerCounts:
    """The window's growth of kube-scheduler's counters."""

    attempts: int
    unschedulable: int
    preemptions: int
    """Preemptions that nominated a node."""
    preemption_victims: int
    queue_moves_by_event: Mapping[str, int]
    """Pods moved into a scheduling queue, by the cluster event that moved them."""

    @classmethod
    def of(cls, grown: Samples) -> SchedulerCounts:
        return cls(
            attempts=round(grown.total(SCHEDULE_ATTEMPTS)),
            unschedulable=round(grown.total(SCHEDULE_ATTEMPTS, result="unschedulable")),
            preemptions=round(grown.total(f"{PREEMPTION_VICTIMS}_count")),
            preemption_victims=round(grown.total(f"{PREEMPTION_VICTIMS}_sum")),
            queue_moves_by_event={
                event: round(n) for event, n in sorted(grown.by_label(QUEUE_INCOMING, "event").items()) if n
            },
        )


@dataclass(frozen=True)
class StoredEvent:
    """What the audit log does not say of an Event it saw written: its reason and the object it is about."""

    reason: str
    involved_kind: str
    involved_name: str


@dataclass(frozen=True)
class WindowCounts:
    """Everything a run's window counted (module docstring)."""

    window: Window
    requests: RequestCounts
    events: Mapping[EventKey, StoredEvent]
    """The Events stored in the run's namespaces when the window closed."""
    admission: AdmissionCalls
    scheduler: SchedulerCounts
    apiserver_cpu_seconds: float
    admission_policy_seconds: Mapping[str, float] = field(default_factory=dict)
    """Seconds in each admission policy, by policy name (`POLICY_CHECK_SECONDS`)."""

    @property
    def seconds(self) -> float:
        return (self.window.end - self.window.start).total_seconds()

    def event_reasons(self) -> dict[EventKey, str]:
        return {key: event.reason for key, event in self.events.items()}

    def event_writes_by_reason(self) -> dict[str, int]:
        return self.requests.event_writes_by_reason(self.event_reasons())


def policy_seconds(grown: Samples) -> dict[str, float]:
    """The window's seconds in each admission policy that ran in it (`POLICY_CHECK_SECONDS`)."""
    seconds: dict[str, float] = {}
    for metric in POLICY_CHECK_SECONDS:
        for policy, value in grown.by_label(metric, "policy").items():
            seconds[policy] = seconds.get(policy, 0.0) + value
    return {policy: round(value, 4) for policy, value in sorted(seconds.items()) if value > 0}


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


class WindowCounters(Protocol):
    """What a measured run asks of its counters: open the window, then close it and read what happened."""

    async def reset(self, http: httpx.AsyncClient) -> None: ...

    async def snapshot(self, http: httpx.AsyncClient, namespaces: Sequence[str]) -> WindowCounts: ...


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
        """Open the window: what happens from now on counts."""
        apiserver = Samples.parse((await _get(http, "/metrics")).text)
        scheduler = await self._scheduler_samples()
        self._opened = _Opened(self.audit_log.mark(), datetime.now(UTC), apiserver, scheduler)

    async def snapshot(self, http: httpx.AsyncClient, namespaces: Sequence[str]) -> WindowCounts:
        """Close the window: the counters of what happened in it (`namespaces`: the run's own)."""
        opened = self._opened
        if opened is None:
            raise CounterError("snapshot() before reset(): the window was never opened")
        window = Window(opened.start, datetime.now(UTC))
        apiserver = Samples.parse((await _get(http, "/metrics")).text).minus(opened.apiserver)
        scheduler = (await self._scheduler_samples()).minus(opened.scheduler)
        await self._wait_logged(http, opened.offset)
        return WindowCounts(
            window=window,
            requests=count_requests(self.audit_log.requests(since=opened.offset), window),
            events=await stored_events(http, namespaces),
            admission=AdmissionCalls.of(apiserver, self.webhooks),
            scheduler=SchedulerCounts.of(scheduler),
            apiserver_cpu_seconds=round(apiserver.total(PROCESS_CPU_SECONDS), 2),
            admission_policy_seconds=policy_seconds(apiserver),
        )

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


async def stored_events(http: httpx.AsyncClient, namespaces: Sequence[str]) -> dict[EventKey, StoredEvent]:
    """Every Event stored in `namespaces` (the audit log names the Events a request wrote, not their
    reasons nor what they are about)."""
    events: dict[EventKey, StoredEvent] = {}
    for namespace in namespaces:
        for event in (await _get(http, f"/api/v1/namespaces/{namespace}/events")).json()["items"]:
            involved = event.get("involvedObject") or {}
            events[namespace, event["metadata"]["name"]] = StoredEvent(
                str(event.get("reason") or ""),
                str(involved.get("kind") or ""),
                str(involved.get("name") or ""),
            )
    return events
