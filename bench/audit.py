"""The API server's audit log as the benchmark's request counters on the real control plane.

kube-apiserver writes one JSON line per answered request (devstack's audit policy, read by
`devstack.controlplane.audit`). This module keeps a run's time window, names the client of each request the
way kubesim's `/debug/stats` names it, sets aside the background traffic kubesim has no counterpart for, and
adds up the rest with kubesim's own counters (`kubesim.stats.Stats`) into a `/debug/stats` snapshot, so
`bench.strategies.result_from_stats` reads either control plane alike (pure functions).

What counts (docs/results.md, "Counting on the real control plane", says how it differs from kubesim):

- a request counts once, as answered, if it was *received* inside the window;
- its client is the component behind the user and the user agent (`client_of`): kube-controller-manager's
  controllers by their ServiceAccount (`job-controller`, `endpoint-controller`, ...), JobSet's controller
  (`jobset-controller`), the scheduler, kwok (the fake kubelets), and any other client as
  `external:<user agent>`, the name kubesim gives clients not its own (`external:exclusive-placement-webhook`,
  `external:bench`);
- background requests (`background_reason`) count in no figure and are reported apart: watches (the log has
  a watch only when it ends; kubesim counted none in any window), non-resource requests (discovery,
  `/metrics`), the API server's loopback requests, Leases (leader election, node heartbeats), kwok's
  writes to Node objects, the node lifecycle and TTL controllers' requests (taints, node registration
  Events), kube-controller-manager's minting of its controllers' tokens, and the benchmark's own
  instrumentation (user agents `bench-*`);
- a pod create answered with an error other than 409 (AlreadyExists) or 422 (Invalid) is a rejected
  creation: 403 from a webhook's denial, 404 from JobSet's webhook when a node is missing, 500 when a webhook
  call failed — the set kubesim counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from devstack.controlplane.audit import Request
from devstack.controlplane.jobset import IDENTITY as JOBSET_IDENTITY
from kubesim.stats import WRITE_VERBS, Stats

NOT_REJECTIONS = frozenset({409, 422})
"""Pod create errors that are no rejection: the name exists, or the object is invalid."""

API_SERVER_USER = "system:apiserver"
CONTROLLER_MANAGER_SERVICE_ACCOUNTS = "system:serviceaccount:kube-system:"
"""kube-controller-manager runs each controller as its own ServiceAccount
(--use-service-account-credentials)."""
CLIENT_BY_USER_AGENT = {
    "kube-scheduler": "scheduler",
    "kwok-controller": "kwok",
    "kube-controller-manager": "kube-controller-manager",
}
"""Clients that share the admin user and differ by user agent: the scheduler, kwok, and
kube-controller-manager's own root client (the one that mints its controllers' tokens)."""
NODE_LIFECYCLE_CLIENTS = frozenset({"node-controller", "ttl-controller"})
"""kube-controller-manager's node lifecycle: taints, node registration Events, the TTL annotation."""
BENCH_INSTRUMENTATION_PREFIX = "bench-"
"""User agents of the benchmark's requests that are not the workload (audit markers, the rendezvous)."""


def resource_path(request: Request) -> str:
    """`pods` or `pods/binding`, as kubesim's counters name it."""
    return f"{request.resource}/{request.subresource}" if request.subresource else request.resource


def verb_resource(request: Request) -> str:
    return f"{request.verb} {resource_path(request)}"


def succeeded(request: Request) -> bool:
    return 200 <= request.code < 300


def agent(request: Request) -> str:
    """The user agent's product: `kube-scheduler` of `kube-scheduler/v1.36.3 (linux/amd64) …`."""
    return request.user_agent.split(" ", 1)[0].split("/", 1)[0]


def client_of(request: Request) -> str:
    """The component that sent `request`, named as kubesim names its clients (module docstring)."""
    if request.user.startswith(CONTROLLER_MANAGER_SERVICE_ACCOUNTS):
        return request.user.removeprefix(CONTROLLER_MANAGER_SERVICE_ACCOUNTS)
    if request.user == JOBSET_IDENTITY.username:
        return "jobset-controller"
    if request.user == API_SERVER_USER:
        return "kube-apiserver"
    product = agent(request)
    return CLIENT_BY_USER_AGENT.get(product) or f"external:{product or request.user}"


def background_reason(request: Request) -> str | None:
    """Why `request` is background traffic left out of the run's figures, or None if it counts."""
    if request.verb == "watch":
        return "watch"
    if not request.resource:
        return "non-resource"
    if request.user == API_SERVER_USER:
        return "apiserver-internal"
    if request.resource == "leases":
        return "leases"
    client = client_of(request)
    if request.resource == "nodes" and client == "kwok":
        return "node-heartbeats"
    if client in NODE_LIFECYCLE_CLIENTS:
        return "node-lifecycle"
    if client == "kube-controller-manager":
        return "controller-credentials"
    if agent(request).startswith(BENCH_INSTRUMENTATION_PREFIX):
        return "bench-instrumentation"
    return None


@dataclass(frozen=True)
class Window:
    """A run's window: the requests received from `start` to `end` (timezone-aware, as the log's UTC)."""

    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("window bounds must be timezone-aware (the audit log is in UTC)")
        if self.end < self.start:
            raise ValueError(f"window ends ({self.end}) before it starts ({self.start})")

    def holds(self, request: Request) -> bool:
        return request.received is not None and self.start <= request.received <= self.end


@dataclass
class RequestCounts:
    """A window's requests added up by kubesim's own counters (`kubesim.stats.Stats`, as its API server
    counts them), plus what only the audit log has: the background set aside, the status codes of the
    rejected pod creations, and the Events written, by name (their reasons are only in the Events)."""

    stats: Stats = field(default_factory=Stats)
    rejected_by_code: Counter[int] = field(default_factory=Counter)
    event_writes_by_name: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(namespace, Event name) → its successful creates, updates and patches."""
    background: Counter[str] = field(default_factory=Counter)

    def add(self, request: Request) -> None:
        reason = background_reason(request)
        if reason is not None:
            self.background[reason] += 1
            return
        path = resource_path(request)
        self.stats.count_request(request.verb, path, client_of(request), request.namespace or None)
        whole_object = not request.subresource
        if request.resource == "pods" and whole_object and request.verb == "create":
            self._count_pod_create(request)
        if request.verb == "patch" and whole_object and succeeded(request):
            self.stats.pods_patched += request.resource == "pods"
            self.stats.jobs_patched += request.resource == "jobs"
        if request.resource == "events" and request.verb in WRITE_VERBS - {"delete"} and succeeded(request):
            self.event_writes_by_name[request.namespace, request.name] += 1

    def _count_pod_create(self, request: Request) -> None:
        if succeeded(request):
            self.stats.pods_create_accepted += 1
        elif request.code not in NOT_REJECTIONS:
            self.stats.pods_create_rejected += 1
            self.rejected_by_code[request.code] += 1

    def event_writes_by_reason(self, reasons: Mapping[tuple[str, str], str]) -> dict[str, int]:
        """Event writes by the Event's reason, given (namespace, name) → reason of the Events as stored
        (an Event no longer there counts under "")."""
        by_reason: Counter[str] = Counter()
        for key, writes in self.event_writes_by_name.items():
            by_reason[reasons.get(key, "")] += writes
        return dict(by_reason)

    def as_stats(self, event_reasons: Mapping[tuple[str, str], str]) -> dict[str, Any]:
        """A `/debug/stats` snapshot of the window (its `requests`, `pods`, `jobs` and `events` sections
        counted; kubesim's component sections left at zero for the caller to fill), the status codes of
        the rejected creations under `pods`, and the background set aside."""
        snapshot = self.stats.snapshot()
        snapshot["pods"]["create_rejected_by_code"] = {
            str(code): n for code, n in sorted(self.rejected_by_code.items())
        }
        snapshot["events"] = {"writes_by_reason": self.event_writes_by_reason(event_reasons)}
        snapshot["background_requests"] = dict(sorted(self.background.items()))
        return snapshot


def count_requests(requests: Iterable[Request], window: Window) -> RequestCounts:
    counts = RequestCounts()
    for request in requests:
        if window.holds(request):
            counts.add(request)
    return counts
