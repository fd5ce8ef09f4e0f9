"""The API server's audit log as the benchmark's request counters, in the log's own terms.

kube-apiserver writes one JSON line per answered request (devstack's audit policy, read by
`devstack.controlplane.audit`). This module keeps a run's time window and adds its requests up by what the
log says of each: the client that sent it, its verb, its resource (with its subresource: `pods/binding`),
the namespace it was about and the response code (`RequestKey`). Background traffic is set aside (pure
functions).

What counts (docs/results.md, "Counting on the real control plane"):

- a request counts once, as answered, if it was *received* inside the window;
- its client is the component behind the user and the user agent (`client_of`): kube-controller-manager's
  controllers by their ServiceAccount (`job-controller`, `endpoint-controller`, ...), JobSet's controller
  (`jobset-controller`), Kueue's manager (`kueue-controller-manager`, by its ServiceAccount), the
  scheduler, kwok (the fake kubelets), and any other client by the product of its user agent
  (`exclusive-placement-webhook`, `exclusive-placement-resizer`, `bench`);
- background requests (`background_reason`) count in no figure and are reported apart: watches (the log has
  a watch only when it ends), non-resource requests (discovery, `/metrics`), the API server's loopback
  requests, Leases (leader election, node heartbeats), kwok's writes to Node objects, the node lifecycle
  and TTL controllers' requests (taints, node registration Events), kube-controller-manager's minting of
  its controllers' tokens, and the benchmark's own instrumentation (user agents `bench-*`);
- a pod create answered with an error other than 409 (AlreadyExists) or 422 (Invalid) is a rejected
  creation: 403 from a webhook's denial, 404 from JobSet's webhook when a node is missing, 500 when a webhook
  call failed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from devstack.controlplane.audit import Request
from devstack.controlplane.jobset import IDENTITY as JOBSET_IDENTITY
from devstack.controlplane.kueue import IDENTITY as KUEUE_IDENTITY

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
NOT_REJECTIONS = frozenset({409, 422})
"""Pod create errors that are no rejection: the name exists, or the object is invalid."""

API_SERVER_USER = "system:apiserver"
KUEUE_CLIENT = "kueue-controller-manager"
"""Kueue's manager as a client: its ServiceAccount (devstack.controlplane.kueue.IDENTITY)."""
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
    """`pods`, or `pods/binding` for a subresource."""
    return f"{request.resource}/{request.subresource}" if request.subresource else request.resource


def verb_resource(request: Request) -> str:
    return f"{request.verb} {resource_path(request)}"


def succeeded(request: Request) -> bool:
    return 200 <= request.code < 300


def agent(request: Request) -> str:
    """The user agent's product: `kube-scheduler` of `kube-scheduler/v1.36.3 (linux/amd64) …`."""
    return request.user_agent.split(" ", 1)[0].split("/", 1)[0]


def client_of(request: Request) -> str:
    """The component that sent `request` (module docstring)."""
    if request.user.startswith(CONTROLLER_MANAGER_SERVICE_ACCOUNTS):
        return request.user.removeprefix(CONTROLLER_MANAGER_SERVICE_ACCOUNTS)
    if request.user == JOBSET_IDENTITY.username:
        return "jobset-controller"
    if request.user == KUEUE_IDENTITY.username:
        return KUEUE_CLIENT
    if request.user == API_SERVER_USER:
        return "kube-apiserver"
    product = agent(request)
    return CLIENT_BY_USER_AGENT.get(product) or product or request.user


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


@dataclass(frozen=True, order=True)
class RequestKey:
    """One kind of request, as the audit log names it."""

    client: str
    verb: str
    resource: str
    """With its subresource: `pods/binding`."""
    namespace: str
    """"" for a cluster-scoped request or one across namespaces."""
    code: int

    @classmethod
    def of(cls, request: Request) -> RequestKey:
        return cls(client_of(request), request.verb, resource_path(request), request.namespace, request.code)

    @property
    def write(self) -> bool:
        return self.verb in WRITE_VERBS

    @property
    def succeeded(self) -> bool:
        return 200 <= self.code < 300

    @property
    def verb_resource(self) -> str:
        return f"{self.verb} {self.resource}"

    @property
    def pod_create(self) -> bool:
        return self.verb == "create" and self.resource == "pods"

    @property
    def rejected_pod_create(self) -> bool:
        return self.pod_create and not self.succeeded and self.code not in NOT_REJECTIONS

    def __str__(self) -> str:
        return f"{self.client} {self.verb} {self.resource} {self.code}"


@dataclass(frozen=True)
class EventWrite:
    """A successful create, update or patch of an Event: which one, by whom, when it arrived."""

    namespace: str
    name: str
    client: str
    received: datetime


@dataclass
class RequestCounts:
    """A window's requests by `RequestKey`, the Event writes among them (their reasons are only in the
    Events themselves), and the background set aside, by reason."""

    requests: Counter[RequestKey] = field(default_factory=Counter)
    event_writes: list[EventWrite] = field(default_factory=list)
    background: Counter[str] = field(default_factory=Counter)

    def add(self, request: Request) -> None:
        reason = background_reason(request)
        if reason is not None:
            self.background[reason] += 1
            return
        key = RequestKey.of(request)
        self.requests[key] += 1
        if request.resource == "events" and key.write and key.verb != "delete" and key.succeeded:
            assert request.received is not None  # Window.holds let only timed requests in
            self.event_writes.append(
                EventWrite(request.namespace, request.name, key.client, request.received)
            )

    def count(self, wanted: Callable[[RequestKey], bool] = lambda _: True) -> int:
        """The requests whose key satisfies `wanted` (all of them by default)."""
        return sum(n for key, n in self.requests.items() if wanted(key))

    def by(self, label: Callable[[RequestKey], str]) -> dict[str, int]:
        """The requests summed per `label` of their key, sorted by label."""
        sums: Counter[str] = Counter()
        for key, n in self.requests.items():
            sums[label(key)] += n
        return dict(sorted(sums.items()))

    @property
    def total(self) -> int:
        return self.count()

    @property
    def writes(self) -> int:
        return self.count(lambda key: key.write)

    def in_namespace(self, namespace: str, *, writes: bool = False) -> int:
        return self.count(lambda key: key.namespace == namespace and (key.write or not writes))

    @property
    def pod_creates_accepted(self) -> int:
        return self.count(lambda key: key.pod_create and key.succeeded)

    @property
    def pod_creates_rejected(self) -> int:
        return self.count(lambda key: key.rejected_pod_create)

    def rejected_by_code(self) -> dict[str, int]:
        """Rejected pod creations by response code."""
        codes: Counter[int] = Counter()
        for key, n in self.requests.items():
            if key.rejected_pod_create:
                codes[key.code] += n
        return {str(code): n for code, n in sorted(codes.items())}

    def patched(self, resource: str) -> int:
        """Successful patches of whole `resource` objects (not their subresources)."""
        return self.count(lambda key: key.verb == "patch" and key.resource == resource and key.succeeded)

    def create_attempts(self, resource: str) -> int:
        """Creations of `resource` asked for, whatever the answer: each one was admitted (a 409 for a name
        already taken comes after admission)."""
        return self.count(lambda key: key.verb == "create" and key.resource == resource)

    def client_requests(self, client: str, verbs: Iterable[str] | None = None) -> int:
        """Requests `client` made in the window (only those with one of `verbs`, if given)."""
        wanted = None if verbs is None else frozenset(verbs)
        return self.count(lambda key: key.client == client and (wanted is None or key.verb in wanted))

    def event_writes_by_reason(self, reasons: Mapping[tuple[str, str], str]) -> dict[str, int]:
        """Event writes by the Event's reason, given (namespace, name) → reason of the Events as stored
        (an Event no longer there counts under "")."""
        by_reason: Counter[str] = Counter(reasons.get((w.namespace, w.name), "") for w in self.event_writes)
        return dict(sorted(by_reason.items()))


def count_requests(requests: Iterable[Request], window: Window) -> RequestCounts:
    counts = RequestCounts()
    for request in requests:
        if window.holds(request):
            counts.add(request)
    return counts
