"""The API server's audit log as the benchmark's request counters on the real control plane.

kube-apiserver writes one JSON line per request (devstack's audit policy: every request at Metadata level,
only the `ResponseComplete` stage). This module reads those lines, keeps a run's time window, names the
client of each request the way kubesim's `/debug/stats` does, sets aside the background traffic kubesim
has no counterpart for, and adds up the rest into the `requests` / `pods` / `jobs` sections of a
`/debug/stats`-shaped snapshot, so `bench.strategies.result_from_stats` reads either control plane alike.

What is counted, and how it differs from kubesim (docs/results.md, "Counting on the real control plane"):

- a request is counted once, when the API server answered it, if it was *received* inside the window;
- the client is the component behind the user and user agent (`client_of`): kube-controller-manager's
  controllers by their ServiceAccount (`job-controller`, `endpoint-controller`, ...), JobSet's controller,
  the scheduler, kwok (the fake kubelets), and any other client as `external:<user agent>`, as kubesim
  names clients that are not its own (`external:exclusive-placement-webhook`, `external:bench`);
- background requests (`background_reason`) are left out of every figure and reported apart: watches (the
  audit log has them only when they end; kubesim counted none in any window), non-resource requests
  (discovery, /metrics), the API server's own loopback requests, Leases (leader election and node
  heartbeats), kwok's and the node lifecycle controllers' writes to Node objects, kube-controller-manager's
  minting of its controllers' tokens, and the benchmark's own instrumentation (user agents `bench-*`);
- a pod create answered with an error other than 409 (AlreadyExists) or 422 (Invalid) is a rejected
  creation: 403 from a webhook's denial, 404 from JobSet's webhook when a node is missing, 500 when a
  webhook call failed (kubesim counts the same set).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

RESPONSE_COMPLETE = "ResponseComplete"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
"""kubesim's write verbs (kubesim/stats.py)."""
NOT_REJECTIONS = frozenset({409, 422})
"""Pod create errors that are not a rejection: the name exists, or the object is invalid."""

API_SERVER_USER = "system:apiserver"
CONTROLLER_MANAGER_SERVICE_ACCOUNTS = "system:serviceaccount:kube-system:"
"""kube-controller-manager runs each controller as its own ServiceAccount
(--use-service-account-credentials)."""
JOBSET_CONTROLLER_USER = "system:serviceaccount:jobset-system:jobset-controller-manager"
CLIENT_BY_USER_AGENT = {
    "kube-scheduler": "scheduler",
    "kwok-controller": "kwok",
    "kube-controller-manager": "kube-controller-manager",
}
"""Clients that share the admin user and differ by user agent: the scheduler, kwok, and
kube-controller-manager's own root client (the one that mints its controllers' tokens)."""
NODE_LIFECYCLE_CLIENTS = frozenset({"kwok", "node-controller", "ttl-controller"})
BENCH_INSTRUMENTATION_PREFIX = "bench-"
"""User agents of the benchmark's own requests that are not the workload (audit markers, rendezvous)."""


class AuditLogError(ValueError):
    """An audit log line that is not an audit event of the expected shape."""


@dataclass(frozen=True)
class AuditRecord:
    """One answered request."""

    received: datetime
    user: str
    user_agent: str
    verb: str
    resource: str
    """The resource (`pods`), "" for a non-resource request (`/version`, `/metrics`, discovery)."""
    subresource: str
    namespace: str
    """"" for a cluster-scoped or all-namespace request."""
    name: str
    code: int

    @property
    def resource_path(self) -> str:
        """`pods` or `pods/binding`, as kubesim's counters name it."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    @property
    def verb_resource(self) -> str:
        return f"{self.verb} {self.resource_path}"

    @property
    def write(self) -> bool:
        return self.verb in WRITE_VERBS

    @property
    def succeeded(self) -> bool:
        return 200 <= self.code < 300

    @property
    def agent(self) -> str:
        """The user agent's product, e.g. `kube-scheduler` of `kube-scheduler/v1.36.3 (linux/amd64) …`."""
        return self.user_agent.split(" ", 1)[0].split("/", 1)[0]

    @property
    def client(self) -> str:
        return client_of(self)


def client_of(record: AuditRecord) -> str:
    """The component that sent `record`, named as kubesim names its clients (module docstring)."""
    if record.user.startswith(CONTROLLER_MANAGER_SERVICE_ACCOUNTS):
        return record.user.removeprefix(CONTROLLER_MANAGER_SERVICE_ACCOUNTS)
    if record.user == JOBSET_CONTROLLER_USER:
        return "jobset-controller"
    if record.user == API_SERVER_USER:
        return "kube-apiserver"
    return CLIENT_BY_USER_AGENT.get(record.agent) or f"external:{record.agent or record.user}"


def background_reason(record: AuditRecord) -> str | None:
    """Why `record` is background traffic left out of the run's figures, or None if it counts."""
    if record.verb == "watch":
        return "watch"
    if not record.resource:
        return "non-resource"
    if record.user == API_SERVER_USER:
        return "apiserver-internal"
    if record.resource == "leases":
        return "leases"
    client = record.client
    if record.resource == "nodes" and client in NODE_LIFECYCLE_CLIENTS:
        return "node-heartbeats"
    if client == "kube-controller-manager":
        return "controller-credentials"
    if record.agent.startswith(BENCH_INSTRUMENTATION_PREFIX):
        return "bench-instrumentation"
    return None


def _timestamp(value: Any, line: str) -> datetime:
    if not isinstance(value, str):
        raise AuditLogError(f"audit event without requestReceivedTimestamp: {line[:200]}")
    try:
        return datetime.fromisoformat(value)
    except ValueError as err:
        raise AuditLogError(f"audit event with a bad requestReceivedTimestamp {value!r}") from err


def parse_line(line: str) -> AuditRecord | None:
    """The request of one audit log line; None for an event of another stage. AuditLogError if the line
    is not an audit event."""
    try:
        event = json.loads(line)
    except json.JSONDecodeError as err:
        raise AuditLogError(f"audit log line is not JSON ({err}): {line[:200]}") from err
    if not isinstance(event, dict) or event.get("kind") != "Event" or "verb" not in event:
        raise AuditLogError(f"audit log line is not an audit Event: {line[:200]}")
    if event.get("stage") != RESPONSE_COMPLETE:
        return None
    ref = event.get("objectRef") or {}
    return AuditRecord(
        received=_timestamp(event.get("requestReceivedTimestamp"), line),
        user=str((event.get("user") or {}).get("username") or ""),
        user_agent=str(event.get("userAgent") or ""),
        verb=str(event["verb"]),
        resource=str(ref.get("resource") or ""),
        subresource=str(ref.get("subresource") or ""),
        namespace=str(ref.get("namespace") or ""),
        name=str(ref.get("name") or ""),
        code=int((event.get("responseStatus") or {}).get("code") or 0),
    )


def parse_lines(lines: Iterable[str]) -> Iterator[AuditRecord]:
    for line in lines:
        if line.strip():
            record = parse_line(line)
            if record is not None:
                yield record


class AuditLog:
    """An audit log file read from a remembered offset: only whole lines (the API server may be writing
    the last one) and only what was written after `mark()`."""

    def __init__(self, path: Path):
        self.path = path

    def mark(self) -> int:
        """The current end of the log: what `read_since` starts after."""
        return os.path.getsize(self.path) if self.path.exists() else 0

    def read_since(self, offset: int) -> list[AuditRecord]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as log:
            log.seek(offset)
            data = log.read()
        whole = data[: data.rfind(b"\n") + 1]
        return list(parse_lines(whole.decode().splitlines()))

    def contains(self, offset: int, audit_id: str) -> bool:
        """Whether the request with this `Audit-Id` (a response header) was logged after `offset`."""
        if not self.path.exists():
            return False
        with self.path.open("rb") as log:
            log.seek(offset)
            return f'"auditID":"{audit_id}"'.encode() in log.read()


@dataclass(frozen=True)
class Window:
    """The run's window: requests received from `start` to `end` (timezone-aware)."""

    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("window bounds must be timezone-aware (the audit log is in UTC)")
        if self.end < self.start:
            raise ValueError(f"window ends ({self.end}) before it starts ({self.start})")

    def __contains__(self, record: object) -> bool:
        return isinstance(record, AuditRecord) and self.start <= record.received <= self.end


@dataclass
class RequestCounts:
    """A window's requests added up as kubesim's `Stats` adds them (`as_stats`), plus the background set
    aside and the status codes of rejected pod creations."""

    total: int = 0
    writes: int = 0
    by_verb_resource: Counter[str] = field(default_factory=Counter)
    by_client: Counter[str] = field(default_factory=Counter)
    by_client_verb_resource: dict[str, Counter[str]] = field(default_factory=dict)
    by_namespace: Counter[str] = field(default_factory=Counter)
    writes_by_namespace: Counter[str] = field(default_factory=Counter)
    pods_create_accepted: int = 0
    pods_create_rejected: int = 0
    rejected_by_code: Counter[int] = field(default_factory=Counter)
    pods_patched: int = 0
    jobs_patched: int = 0
    event_writes_by_name: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(namespace, Event name) → successful creates, updates and patches of it (its reason is only in the
    Event itself: `event_writes_by_reason`)."""
    background: Counter[str] = field(default_factory=Counter)

    def add(self, record: AuditRecord) -> None:
        reason = background_reason(record)
        if reason is not None:
            self.background[reason] += 1
            return
        self.total += 1
        self.by_verb_resource[record.verb_resource] += 1
        self.by_client[record.client] += 1
        self.by_client_verb_resource.setdefault(record.client, Counter())[record.verb_resource] += 1
        if record.namespace:
            self.by_namespace[record.namespace] += 1
        if record.write:
            self.writes += 1
            if record.namespace:
                self.writes_by_namespace[record.namespace] += 1
        self._count_object(record)

    def _count_object(self, record: AuditRecord) -> None:
        if record.resource == "pods" and not record.subresource and record.verb == "create":
            if record.succeeded:
                self.pods_create_accepted += 1
            elif record.code not in NOT_REJECTIONS:
                self.pods_create_rejected += 1
                self.rejected_by_code[record.code] += 1
        if record.verb == "patch" and not record.subresource and record.succeeded:
            if record.resource == "pods":
                self.pods_patched += 1
            elif record.resource == "jobs":
                self.jobs_patched += 1
        if record.resource == "events" and record.write and record.verb != "delete" and record.succeeded:
            self.event_writes_by_name[record.namespace, record.name] += 1

    def event_writes_by_reason(self, reasons: Mapping[tuple[str, str], str]) -> dict[str, int]:
        """Event writes by the Event's reason, given (namespace, name) → reason of the Events as stored
        (an Event no longer there counts under "")."""
        by_reason: Counter[str] = Counter()
        for key, writes in self.event_writes_by_name.items():
            by_reason[reasons.get(key, "")] += writes
        return dict(by_reason)

    def as_stats(self, event_reasons: Mapping[tuple[str, str], str]) -> dict[str, Any]:
        """The `requests`, `pods`, `jobs` and `events` sections of kubesim's `/debug/stats` snapshot."""
        return {
            "requests": {
                "total": self.total,
                "writes": self.writes,
                "by_verb_resource": dict(self.by_verb_resource),
                "by_client": dict(self.by_client),
                "by_client_verb_resource": {
                    client: dict(counts) for client, counts in sorted(self.by_client_verb_resource.items())
                },
                "by_namespace": {
                    ns: {"total": n, "writes": self.writes_by_namespace[ns]}
                    for ns, n in sorted(self.by_namespace.items())
                },
            },
            "pods": {
                "create_accepted": self.pods_create_accepted,
                "create_rejected": self.pods_create_rejected,
                "create_rejected_by_code": {
                    str(code): n for code, n in sorted(self.rejected_by_code.items())
                },
                "patched": self.pods_patched,
            },
            "jobs": {"patched": self.jobs_patched},
            "events": {"writes_by_reason": self.event_writes_by_reason(event_reasons)},
            "background_requests": dict(sorted(self.background.items())),
        }


def count_requests(records: Iterable[AuditRecord], window: Window) -> RequestCounts:
    counts = RequestCounts()
    for record in records:
        if record in window:
            counts.add(record)
    return counts
