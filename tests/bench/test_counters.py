"""A run's counters on the real control plane (bench.counters, bench.promtext) against the fake API server of
the unit tests: its audit log, to which the test adds what kube-apiserver logged, and metrics pages that grow
between two scrapes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
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
from tests.support.fake_api import FakeKubeApi

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
EVENTS: list[dict[str, Any]] = [
    {"metadata": {"name": "bench-w-0.18ed2bff9966e09c"}, "reason": "FailedCreate", "involvedObject": JOB},
    {
        "metadata": {"name": "bench-w-0.18ed2bff98764562"},
        "reason": "SuccessfulCreate",
        "involvedObject": JOB,
    },
]


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


@pytest.fixture
def api(fake_api: FakeKubeApi, tmp_path: Path) -> FakeKubeApi:
    """The fake API server as `KubeCounters` finds kube-apiserver: auditing to a log that already holds
    what the cluster logged before the run (none of it counts), two metrics pages (before and after),
    the default namespace (which the marker request reads) and bench-js's Events."""
    fake_api.audit_log = tmp_path / "audit.log"
    fake_api.audit_log.write_text(SAMPLE.read_text())
    fake_api.serve_metrics([APISERVER_BEFORE, APISERVER_AFTER])
    fake_api.put("namespaces", {"metadata": {"name": "default"}})
    for event in EVENTS:
        fake_api.put("events", {**event, "metadata": {**event["metadata"], "namespace": "bench-js"}})
    return fake_api


def append(api: FakeKubeApi, lines: list[str], *, received: datetime) -> None:
    """Log `lines` (events recorded on a real cluster) as received at `received`."""
    assert api.audit_log is not None
    with api.audit_log.open("a") as log:
        for line in lines:
            event = json.loads(line)
            event["requestReceivedTimestamp"] = received.isoformat()
            log.write(json.dumps(event) + "\n")


def counters(api: FakeKubeApi, flush_timeout: float = 5.0) -> KubeCounters:
    pages = iter([SCHEDULER_BEFORE, SCHEDULER_AFTER])

    async def scheduler_metrics() -> str:
        return next(pages)

    assert api.audit_log is not None
    return KubeCounters(AuditLog(api.audit_log), WEBHOOKS, scheduler_metrics, flush_timeout=flush_timeout)


def in_window(api: FakeKubeApi, kube: KubeCounters, during: Callable[[], None]) -> WindowCounts:
    """Open a window, do `during`, and close it, over HTTP to `api`."""

    async def run() -> WindowCounts:
        async with httpx.AsyncClient(base_url=api.url) as http:
            await kube.reset(http)
            during()
            return await kube.snapshot(http, ["bench-js"])

    return asyncio.run(run())


def markers(api: FakeKubeApi) -> int:
    """The marker requests `KubeCounters` sent (each one read of the default namespace)."""
    return len([call for call in api.calls_of("get", "namespaces") if call.name == "default"])


def test_a_window_counts_what_the_api_server_logged_during_it(api: FakeKubeApi) -> None:
    lines = SAMPLE.read_text().splitlines()[JOBSET_RUN_LINES]
    counts = in_window(api, counters(api), lambda: append(api, lines, received=datetime.now(UTC)))
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
    assert markers(api) == 1


def test_what_was_logged_before_the_window_opened_counts_nowhere(api: FakeKubeApi) -> None:
    append(api, SAMPLE.read_text().splitlines()[JOBSET_RUN_LINES], received=datetime.now(UTC))
    assert in_window(api, counters(api), lambda: None).requests.total == 0


def test_a_snapshot_needs_an_open_window(api: FakeKubeApi) -> None:
    async def run() -> None:
        async with httpx.AsyncClient(base_url=api.url) as http:
            await counters(api).snapshot(http, ["bench-js"])

    with pytest.raises(CounterError, match="before reset"):
        asyncio.run(run())


def no_audit_log(api: FakeKubeApi) -> None:
    """Audit-Id headers, but no log written: the log is not where the counters read it."""
    api.audit_log = None


def no_audit_ids(api: FakeKubeApi) -> None:
    """A server without auditing: no Audit-Id header."""
    api.audit_ids = False


@pytest.mark.parametrize(
    ("failure", "message"), [(no_audit_log, "not in"), (no_audit_ids, "no Audit-Id header")]
)
def test_a_snapshot_fails_clearly_when_the_log_cannot_be_trusted_to_be_complete(
    api: FakeKubeApi, failure: Callable[[FakeKubeApi], None], message: str
) -> None:
    kube = counters(api, flush_timeout=0.5)
    failure(api)
    with pytest.raises(CounterError, match=message):
        in_window(api, kube, lambda: None)
