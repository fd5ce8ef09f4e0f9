"""A run's counters on the real control plane (bench.counters, bench.promtext) against a fake API server:
an audit log the test writes as kube-apiserver would, and metrics pages that grow between two scrapes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.counters import (
    AdmissionCalls,
    CounterError,
    KubeCounters,
    SchedulerCounts,
    StoredEvent,
    WebhookNames,
    WindowCounts,
    webhook_names,
)
from bench.promtext import Samples
from devstack.controlplane.audit import AuditLog

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "audit" / "two-namespaces.log"
JOBSET_RUN_LINES = slice(6, 20)
"""The sample's lines of JobSet placing its JobSet in bench-js (test_audit.py counts them: 13 + 1)."""

ADMISSION = "apiserver_admission_webhook_admission_duration_seconds"
PROJECT_POD_WEBHOOK = "pods.mutate.exclusive-placement.io"


def admission_page(
    counts: dict[tuple[str, bool], int], *, cpu_seconds: float, policy_seconds: dict[tuple[str, str], float]
) -> str:
    """kube-apiserver's admission histogram counts, (webhook, rejected) → calls, its CPU seconds, and its
    admission policies' seconds, (mutating|validating, policy) → seconds."""
    lines = [f"# TYPE {ADMISSION} histogram"]
    for (name, rejected), count in counts.items():
        labels = f'name="{name}",operation="CREATE",rejected="{str(rejected).lower()}",type="admit"'
        lines.append(f"{ADMISSION}_count{{{labels}}} {count}")
    lines += ["# TYPE process_cpu_seconds_total counter", f"process_cpu_seconds_total {cpu_seconds}"]
    for (kind, policy), seconds in policy_seconds.items():
        metric = f"apiserver_{kind}_admission_policy_check_duration_seconds"
        labels = f'enforcement_action="allow",policy="{policy}",policy_binding="{policy}-b"'
        lines += [f"# TYPE {metric} histogram", f"{metric}_sum{{{labels}}} {seconds}"]
    return "\n".join(lines) + "\n"


APISERVER_BEFORE = admission_page(
    {
        ("mpod.kb.io", False): 10,
        ("vpod.kb.io", False): 8,
        ("vpod.kb.io", True): 2,
        (PROJECT_POD_WEBHOOK, False): 5,
    },
    cpu_seconds=100.25,
    policy_seconds={("mutating", "ep-pods"): 1.5, ("validating", "ep-pods"): 0.25},
)
APISERVER_AFTER = admission_page(
    {
        ("mpod.kb.io", False): 50,
        ("vpod.kb.io", False): 40,
        ("vpod.kb.io", True): 10,
        ("vjobset.kb.io", False): 1,
        (PROJECT_POD_WEBHOOK, False): 5,
    },
    cpu_seconds=103.5,
    policy_seconds={
        ("mutating", "ep-pods"): 1.875,
        ("validating", "ep-pods"): 0.375,
        ("mutating", "ep-f"): 0.5,
    },
)


def scheduler_page(*, scheduled: int, unschedulable: int, preemptions: int, victims: int) -> str:
    """kube-scheduler's scheduling attempts, its queue's incoming pods (all added, the unschedulable ones
    moved back on a deletion) and its preemption victims histogram."""
    attempts, incoming = "scheduler_schedule_attempts_total", "scheduler_queue_incoming_pods_total"
    return f"""# TYPE {attempts} counter
{attempts}{{profile="default-scheduler",result="scheduled"}} {scheduled}
{attempts}{{profile="default-scheduler",result="unschedulable"}} {unschedulable}
# TYPE {incoming} counter
{incoming}{{event="PodAdd",queue="active"}} {scheduled}
{incoming}{{event="AssignedPodDelete",queue="backoff"}} {unschedulable}
# TYPE scheduler_preemption_victims histogram
scheduler_preemption_victims_bucket{{le="+Inf"}} {preemptions}
scheduler_preemption_victims_sum {victims}
scheduler_preemption_victims_count {preemptions}
"""


SCHEDULER_BEFORE = scheduler_page(scheduled=4, unschedulable=1, preemptions=1, victims=2)
SCHEDULER_AFTER = scheduler_page(scheduled=36, unschedulable=4, preemptions=3, victims=7)
WEBHOOKS = WebhookNames(
    project=frozenset({PROJECT_POD_WEBHOOK}),
    jobset_pods=frozenset({"mpod.kb.io", "vpod.kb.io"}),
    jobset_other=frozenset({"vjobset.kb.io"}),
)
JOB = {"kind": "Job", "name": "bench-w-0"}
EVENTS = {
    "items": [
        {"metadata": {"name": "bench-w-0.18ed2bff9966e09c"}, "reason": "FailedCreate", "involvedObject": JOB},
        {
            "metadata": {"name": "bench-w-0.18ed2bff98764562"},
            "reason": "SuccessfulCreate",
            "involvedObject": JOB,
        },
    ]
}


def test_counters_grow_by_what_the_window_added() -> None:
    grown = Samples.parse(APISERVER_AFTER).minus(Samples.parse(APISERVER_BEFORE))
    assert grown.total(f"{ADMISSION}_count", name="vpod.kb.io") == 40
    assert grown.total(f"{ADMISSION}_count", rejected="true") == 8
    assert grown.total(f"{ADMISSION}_count", name="vjobset.kb.io") == 1  # new since: counts from 0
    assert grown.by_label(f"{ADMISSION}_count", "name")[PROJECT_POD_WEBHOOK] == 0


def test_admission_calls_are_split_between_this_projects_webhooks_and_jobsets() -> None:
    grown = Samples.parse(APISERVER_AFTER).minus(Samples.parse(APISERVER_BEFORE))
    assert AdmissionCalls.of(grown, WEBHOOKS) == AdmissionCalls(
        project=0,
        project_denied=0,
        jobset_pods=80,
        jobset_pods_denied=8,
        jobset_objects=1,
        by_webhook={"mpod.kb.io": 40, "vjobset.kb.io": 1, "vpod.kb.io": 40},
    )


def test_the_scheduler_counts_attempts_queue_moves_and_preemptions() -> None:
    grown = Samples.parse(SCHEDULER_AFTER).minus(Samples.parse(SCHEDULER_BEFORE))
    assert SchedulerCounts.of(grown) == SchedulerCounts(
        attempts=35,
        unschedulable=3,
        preemptions=2,
        preemption_victims=5,
        queue_moves_by_event={"AssignedPodDelete": 3, "PodAdd": 32},
    )


def test_webhooks_are_sorted_by_the_configuration_that_registers_them() -> None:
    def configuration(name: str, *webhooks: tuple[str, str]) -> dict[str, Any]:
        hooks = [{"name": hook, "rules": [{"resources": [resource]}]} for hook, resource in webhooks]
        return {"metadata": {"name": name}, "webhooks": hooks}

    names = webhook_names(
        [
            configuration(
                "jobset-mutating-webhook-configuration", ("mjobset.kb.io", "jobsets"), ("mpod.kb.io", "pods")
            ),
            configuration("exclusive-placement-mutating", ("jobs.mutate.exclusive-placement.io", "jobs")),
            configuration("exclusive-placement-validating", ("pods.validate.exclusive-placement.io", "pods")),
        ],
        jobset_prefix="jobset-",
    )
    assert names == WebhookNames(
        project=frozenset({"jobs.mutate.exclusive-placement.io", "pods.validate.exclusive-placement.io"}),
        jobset_pods=frozenset({"mpod.kb.io"}),
        jobset_other=frozenset({"mjobset.kb.io"}),
    )


class FakeApiServer:
    """Answers what `KubeCounters` asks kube-apiserver, and logs requests to `log` the way it does: the
    marker request gets an audit ID, sent back in `Audit-Id` and written to the log (unless `logging` is
    off, or `audit_ids` is off: a server without auditing)."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.metrics = iter([APISERVER_BEFORE, APISERVER_AFTER])
        self.logging = True
        self.audit_ids = True
        self.markers = 0

    def append(self, lines: list[str], *, received: datetime) -> None:
        """Log `lines` (recorded events) as received at `received`."""
        with self.log.open("a") as log:
            for line in lines:
                event = json.loads(line)
                event["requestReceivedTimestamp"] = received.isoformat()
                log.write(json.dumps(event) + "\n")

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/metrics":
            return httpx.Response(200, text=next(self.metrics))
        if path == "/api/v1/namespaces/default":
            self.markers += 1
            audit_id = f"marker-{self.markers}"
            if self.logging:
                marker = {"kind": "Event", "auditID": audit_id, "verb": "get", "stage": "ResponseComplete"}
                self.log.open("a").write(json.dumps(marker) + "\n")
            headers = {"Audit-Id": audit_id} if self.audit_ids else {}
            return httpx.Response(200, json={"metadata": {"name": "default"}}, headers=headers)
        if path == "/api/v1/namespaces/bench-js/events":
            return httpx.Response(200, json=EVENTS)
        return httpx.Response(404, json={"reason": "NotFound"})


@pytest.fixture
def api(tmp_path: Path) -> FakeApiServer:
    log = tmp_path / "audit.log"
    log.write_text(SAMPLE.read_text())  # what the cluster logged before the run: none of it counts
    return FakeApiServer(log)


def counters(api: FakeApiServer, flush_timeout: float = 5.0) -> KubeCounters:
    pages = iter([SCHEDULER_BEFORE, SCHEDULER_AFTER])

    async def scheduler_metrics() -> str:
        return next(pages)

    return KubeCounters(AuditLog(api.log), WEBHOOKS, scheduler_metrics, flush_timeout=flush_timeout)


@pytest.fixture
def http(api: FakeApiServer) -> Iterator[httpx.AsyncClient]:
    client = httpx.AsyncClient(base_url="https://kube.test", transport=httpx.MockTransport(api.handle))
    yield client
    asyncio.run(client.aclose())


def test_a_window_counts_what_the_api_server_logged_during_it(
    api: FakeApiServer, http: httpx.AsyncClient
) -> None:
    kube = counters(api)

    async def run() -> WindowCounts:
        await kube.reset(http)
        api.append(SAMPLE.read_text().splitlines()[JOBSET_RUN_LINES], received=datetime.now(UTC))
        return await kube.snapshot(http, ["bench-js"])

    counts = asyncio.run(run())
    assert counts.requests.total == 13
    assert counts.requests.pod_creates_rejected == 2
    assert counts.event_writes_by_reason() == {"": 1, "FailedCreate": 2, "SuccessfulCreate": 1}
    assert counts.events["bench-js", "bench-w-0.18ed2bff9966e09c"] == StoredEvent(
        "FailedCreate", "Job", "bench-w-0"
    )
    assert counts.admission.jobset_pods == 80
    assert counts.scheduler.attempts == 35
    assert counts.apiserver_cpu_seconds == 3.25
    assert counts.admission_policy_seconds == {"ep-f": 0.5, "ep-pods": 0.5}  # mutating and validating added
    assert counts.requests.background == {"apiserver-internal": 1}
    assert 0 <= counts.seconds < 30
    assert api.markers == 1


def test_what_was_logged_before_the_window_opened_counts_nowhere(
    api: FakeApiServer, http: httpx.AsyncClient
) -> None:
    kube = counters(api)

    async def run() -> WindowCounts:
        lines = SAMPLE.read_text().splitlines()[JOBSET_RUN_LINES]
        api.append(lines, received=datetime.now(UTC))
        await kube.reset(http)
        return await kube.snapshot(http, ["bench-js"])

    assert asyncio.run(run()).requests.total == 0


def test_a_snapshot_needs_an_open_window(api: FakeApiServer, http: httpx.AsyncClient) -> None:
    with pytest.raises(CounterError, match="before reset"):
        asyncio.run(counters(api).snapshot(http, ["bench-js"]))


@pytest.mark.parametrize(("failure", "message"), [("logging", "not in"), ("audit_ids", "no Audit-Id header")])
def test_a_snapshot_fails_clearly_when_the_log_cannot_be_trusted_to_be_complete(
    api: FakeApiServer, http: httpx.AsyncClient, failure: str, message: str
) -> None:
    setattr(api, failure, False)
    kube = counters(api, flush_timeout=0.5)

    async def run() -> None:
        await kube.reset(http)
        await kube.snapshot(http, ["bench-js"])

    with pytest.raises(CounterError, match=message):
        asyncio.run(run())
