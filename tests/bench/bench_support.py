"""Window counts for the benchmark's unit tests, built from requests as the audit log records them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta

from bench.audit import CONTROLLER_MANAGER_SERVICE_ACCOUNTS, Window, count_requests
from bench.counters import AdmissionCalls, SchedulerCounts, StoredEvent, WindowCounts
from devstack.controlplane.audit import Request

START = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
WINDOW = Window(START, START + timedelta(minutes=30))
AGENT_OF = {"scheduler": "kube-scheduler/v1.36.3", "kwok": "kwok-controller/v0.8.0"}
CONTROLLERS = frozenset({"job-controller", "endpoint-controller", "endpointslice-controller"})


def request(
    client: str,
    verb: str,
    resource: str,
    *,
    namespace: str = "ns",
    code: int = 200,
    name: str = "",
    at: float = 1.0,
) -> Request:
    """A request of `client` (a kube-controller-manager controller by its ServiceAccount, the scheduler and
    kwok by their user agents, any other client by its user agent), `at` seconds into WINDOW."""
    resource, _, subresource = resource.partition("/")
    user = f"{CONTROLLER_MANAGER_SERVICE_ACCOUNTS}{client}" if client in CONTROLLERS else "admin"
    return Request(
        user=user,
        user_agent=AGENT_OF.get(client, f"{client}/1.0"),
        verb=verb,
        api_group="",
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
        code=code,
        received=START + timedelta(seconds=at),
    )


def repeated(
    n: int, client: str, verb: str, resource: str, *, namespace: str = "ns", code: int = 200, name: str = ""
) -> list[Request]:
    return [request(client, verb, resource, namespace=namespace, code=code, name=name) for _ in range(n)]


def window_counts(
    requests: Iterable[Request],
    *,
    events: Mapping[tuple[str, str], StoredEvent] | None = None,
    admission: AdmissionCalls | None = None,
    scheduler: SchedulerCounts | None = None,
    apiserver_cpu_seconds: float = 0.0,
    admission_policy_seconds: Mapping[str, float] | None = None,
) -> WindowCounts:
    return WindowCounts(
        window=WINDOW,
        requests=count_requests(requests, WINDOW),
        events=events or {},
        admission=admission or AdmissionCalls(0, 0, 0, 0, 0, {}),
        scheduler=scheduler or SchedulerCounts(0, 0, 0, 0, {}),
        apiserver_cpu_seconds=apiserver_cpu_seconds,
        admission_policy_seconds=admission_policy_seconds or {},
    )
