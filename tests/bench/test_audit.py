"""Counting a run from the API server's audit log (bench.audit), on lines recorded from devstack's real
control plane: a JobSet placed by JobSet alone in `bench-js` (two followers denied by `vpod.kb.io`), then
this project's webhook and resizer at work in `bench-el`, with the cluster's background traffic around
them. Recorded by `python -m bench strategies --control-plane kube`'s first version; only the users'
credential IDs were removed."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.audit import (
    RequestCounts,
    RequestKey,
    Window,
    background_reason,
    client_of,
    count_requests,
    verb_resource,
)
from devstack.controlplane.audit import AuditLog, Request

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "audit" / "two-namespaces.log"
JOBSET_RUN = Window(
    datetime(2026, 12, 1, 15, 50, 3, tzinfo=UTC), datetime(2026, 12, 1, 15, 50, 4, tzinfo=UTC)
)
WHOLE_LOG = Window(datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC))
FAILED_CREATE_EVENT = ("bench-js", "bench-w-0.18ed2bff9966e09c")
SUCCESSFUL_CREATE_EVENT = ("bench-js", "bench-w-0.18ed2bff98764562")
SCHEDULED_EVENT = ("bench-js", "bench-w-0-0-9dxn6.18ed2bff9bc0fc7f")


def sample() -> list[Request]:
    return list(AuditLog(SAMPLE).requests())


def the(verb: str, resource: str, *, code: int | None = None, agent: str = "") -> Request:
    """The one sample request with this verb, resource path, code and user agent prefix."""
    found = [
        r
        for r in sample()
        if verb_resource(r) == f"{verb} {resource}"
        and (code is None or r.code == code)
        and r.user_agent.startswith(agent)
    ]
    assert len(found) == 1, f"{verb} {resource} {code} {agent!r}: {len(found)} in the sample"
    return found[0]


def test_the_sample_reads_as_answered_requests_with_their_arrival() -> None:
    requests = sample()
    assert len(requests) == 23
    denied = [r for r in requests if verb_resource(r) == "create pods" and r.code == 403]
    assert [(r.namespace, client_of(r)) for r in denied] == [("bench-js", "job-controller")] * 2
    assert denied[0].received == datetime(2026, 12, 1, 15, 50, 3, 165847, tzinfo=UTC)
    assert denied[0].audit_id == "5ac488e2-74b8-473a-ab65-da8aefc08ac0"


@pytest.mark.parametrize(
    ("verb", "resource", "agent", "client"),
    [
        ("create", "pods/binding", "kube-scheduler", "scheduler"),
        ("patch", "pods/status", "kwok", "kwok"),
        ("create", "jobs", "jobset", "jobset-controller"),
        ("update", "endpoints", "", "endpoint-controller"),
        ("get", "jobsets", "", "exclusive-placement-webhook"),
        ("create", "jobsets", "", "devstack"),
        ("create", "serviceaccounts/token", "", "kube-controller-manager"),
        ("list", "limitranges", "", "kube-apiserver"),
    ],
)
def test_each_request_is_put_down_to_the_component_that_sent_it(
    verb: str, resource: str, agent: str, client: str
) -> None:
    assert client_of(the(verb, resource, agent=agent)) == client


@pytest.mark.parametrize(
    ("verb", "resource", "agent", "reason"),
    [
        ("watch", "jobsets", "", "watch"),
        ("get", "", "kubectl", "non-resource"),
        ("list", "limitranges", "", "apiserver-internal"),
        ("get", "leases", "", "leases"),
        ("patch", "nodes/status", "kwok", "node-heartbeats"),
        ("patch", "nodes", "kube-controller-manager", "node-lifecycle"),
        ("create", "serviceaccounts/token", "", "controller-credentials"),
        ("create", "pods/binding", "", None),
        ("patch", "jobs", "", None),
    ],
)
def test_background_traffic_is_told_apart_from_the_workloads(
    verb: str, resource: str, agent: str, reason: str | None
) -> None:
    code = 200 if (verb, resource) == ("patch", "jobs") else None
    assert background_reason(the(verb, resource, code=code, agent=agent)) == reason


def test_the_benchmarks_own_markers_are_instrumentation_not_workload() -> None:
    lookup = the("get", "jobsets")
    assert background_reason(dataclasses.replace(lookup, user_agent="bench-audit-marker")) == (
        "bench-instrumentation"
    )
    assert background_reason(dataclasses.replace(lookup, user_agent="bench")) is None


def test_a_jobset_run_adds_up_by_client_verb_resource_and_code() -> None:
    counts = count_requests(sample(), JOBSET_RUN)
    assert (counts.total, counts.writes) == (13, 13)
    assert (counts.in_namespace("bench-js"), counts.in_namespace("bench-js", writes=True)) == (13, 13)
    assert counts.by(lambda key: key.client) == {
        "devstack": 1,
        "endpoint-controller": 1,
        "job-controller": 7,
        "jobset-controller": 1,
        "kwok": 1,
        "scheduler": 2,
    }
    job_controller = {str(key): n for key, n in counts.requests.items() if key.client == "job-controller"}
    assert job_controller == {
        "job-controller create pods 201": 2,
        "job-controller create pods 403": 2,
        "job-controller create events 201": 2,
        "job-controller patch events 200": 1,
    }
    assert (counts.pod_creates_accepted, counts.pod_creates_rejected, counts.patched("pods")) == (2, 2, 0)
    assert counts.rejected_by_code() == {"403": 2}
    reasons = {
        FAILED_CREATE_EVENT: "FailedCreate",
        SUCCESSFUL_CREATE_EVENT: "SuccessfulCreate",
        SCHEDULED_EVENT: "Scheduled",
    }
    assert counts.event_writes_by_reason(reasons) == {
        "FailedCreate": 2,
        "Scheduled": 1,
        "SuccessfulCreate": 1,
    }
    assert counts.background == {"apiserver-internal": 1}


def test_each_event_write_keeps_its_writer_and_arrival() -> None:
    counts = count_requests(sample(), JOBSET_RUN)
    failed = [w for w in counts.event_writes if (w.namespace, w.name) == FAILED_CREATE_EVENT]
    assert [w.client for w in failed] == ["job-controller"] * 2
    assert all(JOBSET_RUN.start <= w.received <= JOBSET_RUN.end for w in failed)
    assert failed == sorted(failed, key=lambda w: w.received)


def test_requests_received_outside_the_window_count_nowhere() -> None:
    whole = count_requests(sample(), WHOLE_LOG)
    run = count_requests(sample(), JOBSET_RUN)
    assert whole.total == 16
    assert whole.client_requests("exclusive-placement-resizer") == 2
    assert run.client_requests("exclusive-placement-resizer") == 0
    assert whole.background == {
        "non-resource": 1,
        "leases": 1,
        "controller-credentials": 1,
        "node-heartbeats": 1,
        "node-lifecycle": 1,
        "watch": 1,
        "apiserver-internal": 1,
    }


def test_only_successful_job_patches_count_as_patches() -> None:
    counts = count_requests(sample(), WHOLE_LOG)
    assert counts.by(lambda key: key.verb_resource)["patch jobs"] == 2  # both count as requests
    assert counts.patched("jobs") == 1  # the one answered 409 (a stale resourceVersion) changed nothing


def test_a_request_key_says_what_the_audit_log_says() -> None:
    key = RequestKey.of(the("create", "pods/binding"))
    assert key == RequestKey("scheduler", "create", "pods/binding", "bench-js", 201)
    assert (key.write, key.succeeded, key.pod_create, str(key)) == (
        True,
        True,
        False,
        "scheduler create pods/binding 201",
    )


@pytest.mark.parametrize(
    ("code", "rejected"), [(403, True), (404, True), (500, True), (409, False), (422, False)]
)
def test_a_refused_pod_create_is_a_rejection_unless_it_was_a_name_clash_or_invalid(
    code: int, rejected: bool
) -> None:
    created = the("create", "pods/binding")
    counts = RequestCounts()
    counts.add(dataclasses.replace(created, subresource="", code=code))
    assert counts.pod_creates_rejected == int(rejected)
    assert counts.total == 1


def test_an_event_gone_before_its_reason_was_read_counts_under_no_reason() -> None:
    counts = count_requests(sample(), JOBSET_RUN)
    assert counts.event_writes_by_reason({FAILED_CREATE_EVENT: "FailedCreate"}) == {"FailedCreate": 2, "": 2}


def test_a_window_is_in_utc_and_in_order() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        Window(datetime(2026, 12, 1), datetime(2026, 12, 2))
    with pytest.raises(ValueError, match="before it starts"):
        Window(JOBSET_RUN.end, JOBSET_RUN.start)


def test_a_request_logged_without_its_arrival_time_is_in_no_window() -> None:
    lookup = dataclasses.replace(the("get", "jobsets"), received=None)
    assert not WHOLE_LOG.holds(lookup)


def test_only_whole_lines_logged_after_the_mark_are_read(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    lines = SAMPLE.read_text().splitlines()
    log.write_text("\n".join(lines[:5]) + "\n")
    audit = AuditLog(log)
    mark = audit.mark()
    half = json.dumps(json.loads(lines[6]))[:100]
    log.write_text("\n".join(lines[:6]) + "\n" + half)  # the API server is writing line 7
    assert [r.audit_id for r in audit.requests(since=mark)] == [json.loads(lines[5])["auditID"]]


def test_a_create_refused_for_a_name_already_taken_is_still_a_create_attempt() -> None:
    created = dataclasses.replace(the("create", "pods/binding"), resource="jobs", subresource="", code=201)
    counts = RequestCounts()
    counts.add(created)
    counts.add(dataclasses.replace(created, code=409))
    counts.add(dataclasses.replace(created, verb="patch", code=200))
    assert counts.create_attempts("jobs") == 2
    assert counts.create_attempts("pods") == 0
