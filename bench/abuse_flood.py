"""The dry-run flood through kube-apiserver (issue 30, attack 5): `bench abuse --attack dry-run-flood`.

Through the API server every tenant is the same client to the webhook, which decides on one event loop: a
tenant whose exclusive pods cost the webhook much more than real ones can slow everyone's exclusive
admissions. On devstack's real control plane (kube-apiserver with the chart's webhooks and policies, this
project's webhook and resizer under the chart's ServiceAccounts):

- tenant `team-a` (a ServiceAccount bound to `edit` in its namespace) runs `attackers` threads, each
  creating, back to back on a connection of its own, an exclusive leader pod whose
  `nodeSelectorTerms` are `[{}] x terms` (a 300 KB body), with `dryRun=All`: admitted, never stored;
- tenant `team-b` creates plain exclusive leader pods with `dryRun=All`, one after the other, first for
  `baseline_seconds` alone, then while the flood lasts (`seconds`); each is timed from request to answer.

Target: team-b's admissions answered within 1 s at the 99th percentile during the flood. Both tenants' pods
are leaders (completion index 0, the topology annotation), which the webhook mutates and validates: the
flood costs it two reviews per pod, as in the issue. What kube-apiserver waited on this project's webhooks
meanwhile is read off its own metric (`apiserver_admission_webhook_admission_duration_seconds`), so the
webhook's share of the time is told apart from the API server's own work on each 100,000-term pod.

The flood runs twice on one cluster: first under the API server's default Priority and Fairness
configuration (every ServiceAccount in `workload-low`), then with `tenant_flow_control()` applied: the
tenants' ServiceAccounts in a priority level of their own with a few seats, queued fairly per user, so
one tenant's requests wait in its own queue instead of all running at once. The machine's load average is
recorded with the figures: this machine is shared, and the flood's own threads and the control plane run
on it too.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from bench.promtext import Samples
from bench.webhook_load import percentile
from devstack.controlplane.identities import ensure_namespace
from devstack.shape import ClusterShape
from devstack.stack import Stack, StackOptions
from kubekit.client import KubeError
from kubekit.credentials import kubeconfig_credentials
from kubekit.generic import GenericClient
from placement.constants import GKE_NODEPOOL_LABEL, JOB_COMPLETION_INDEX_ANNOTATION, TOPOLOGY_ANNOTATION

T = TypeVar("T")
FLOOD = "dry-run-flood"
TARGET_P99_SECONDS = 1.0
ATTACKER, VICTIM = "team-a", "team-b"
TENANT = "tenant"
REQUEST_TIMEOUT = 30.0
"""kube-apiserver's own request timeout is 60 s; a webhook call's is the chart's 10 s."""


@dataclass(frozen=True)
class FloodCounts:
    attackers: int = 32
    terms: int = 100_000
    seconds: float = 60.0
    baseline_seconds: float = 15.0
    tenant_shares: int = 2
    """nominalConcurrencyShares of the tenants' priority level (`tenant_flow_control`)."""


QUICK_FLOOD = FloodCounts(attackers=4, terms=100_000, seconds=10.0, baseline_seconds=5.0)
WEBHOOK_DURATION = "apiserver_admission_webhook_admission_duration_seconds"
OUR_WEBHOOKS = ("pods.mutate.exclusive-placement.io", "pods.validate.exclusive-placement.io")
TENANTS_LEVEL = "tenants"
NOMINAL_SEATS = "apiserver_flowcontrol_nominal_limit_seats"
"""kube-apiserver's seats per priority level: its 600 (the default max-requests-inflight 400 +
max-mutating-requests-inflight 200) shared in proportion to nominalConcurrencyShares, about 245 of them by
default, each level's rounded up: 2 shares give the tenants' level 5 seats, 1 share 3 (the fewest an
integer share gives)."""


def tenant_flow_control(shares: int) -> list[dict[str, Any]]:
    """A PriorityLevelConfiguration of a few seats for the tenants' ServiceAccounts and the FlowSchema that
    puts them there, one flow per user (what an operator would apply: SECURITY.md, "Availability under
    abuse")."""
    api = "flowcontrol.apiserver.k8s.io/v1"
    subjects = [
        {"kind": "ServiceAccount", "serviceAccount": {"name": TENANT, "namespace": namespace}}
        for namespace in (ATTACKER, VICTIM)
    ]
    everything = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}
    queuing = {"queues": 64, "handSize": 4, "queueLengthLimit": 100}
    limited = {
        "nominalConcurrencyShares": shares,
        "lendablePercent": 0,
        "limitResponse": {"type": "Queue", "queuing": queuing},
    }
    return [
        {
            "apiVersion": api,
            "kind": "PriorityLevelConfiguration",
            "metadata": {"name": TENANTS_LEVEL},
            "spec": {"type": "Limited", "limited": limited},
        },
        {
            "apiVersion": api,
            "kind": "FlowSchema",
            "metadata": {"name": TENANTS_LEVEL},
            "spec": {
                "priorityLevelConfiguration": {"name": TENANTS_LEVEL},
                "matchingPrecedence": 1000,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [{"subjects": subjects, "resourceRules": [everything]}],
            },
        },
    ]


def webhook_waits(stack: Stack) -> Samples:
    return Samples.parse(stack.client.text("/metrics"))


def webhook_share(before: Samples, after: Samples) -> dict[str, Any]:
    """Calls of this project's pod webhooks the API server made, and the seconds it waited on each."""
    grown = after.minus(before)
    share: dict[str, Any] = {}
    for name in OUR_WEBHOOKS:
        calls = grown.total(f"{WEBHOOK_DURATION}_count", name=name)
        seconds = grown.total(f"{WEBHOOK_DURATION}_sum", name=name)
        share[name] = {"calls": int(calls), "mean_seconds": round(seconds / calls, 4) if calls else None}
    return share


def exclusive_leader(name: str, terms: int = 0) -> dict[str, Any]:
    """A bare exclusive leader pod (the webhook admits a Job-less annotated pod only as a leader), with
    `terms` empty nodeSelectorTerms when > 0."""
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{name}-",
            "annotations": {TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL, JOB_COMPLETION_INDEX_ANNOTATION: "0"},
        },
        "spec": {"containers": [{"name": "c", "image": "registry.example/worker:1"}]},
    }
    if terms:
        required: dict[str, Any] = {"nodeSelectorTerms": [{}] * terms}
        pod["spec"]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }
    return pod


def tenant_client(stack: Stack, namespace: str) -> httpx.Client:
    """An HTTP client as ServiceAccount `tenant` of `namespace`, allowed what `edit` allows there."""
    ensure_namespace(stack.client, namespace)
    _create(
        stack.client, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": TENANT}}, namespace
    )
    _create(
        stack.client,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"{TENANT}-edit"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "ServiceAccount", "name": TENANT, "namespace": namespace}],
        },
        namespace,
    )
    _eventually(lambda: _authorized(stack.client, namespace))
    token = _eventually(lambda: stack.client.request_token(namespace, TENANT, seconds=3600))
    server, credentials = kubeconfig_credentials(stack.kubeconfig)
    return httpx.Client(
        base_url=server,
        verify=credentials.ssl_context(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=REQUEST_TIMEOUT,
    )


def _create(client: GenericClient, obj: dict[str, Any], namespace: str) -> None:
    try:
        client.create(obj, namespace=namespace)
    except KubeError as err:
        if not err.conflict:
            raise


def _authorized(client: GenericClient, namespace: str) -> None:
    """Returns once the RBAC authorizer lets the tenant create pods (it reads the binding from an informer);
    `KubeError` (a 403, retried by `_eventually`) until then."""
    if not client.service_account_may(namespace, TENANT, "create", "pods"):
        raise KubeError(403, "Forbidden", f"{namespace}/{TENANT} not yet authorized to create pods")


def _eventually(call: Callable[[], T], timeout: float = 60.0) -> T:
    """`call()`'s answer once it stops failing (a new namespace's ServiceAccount admission settles)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except KubeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)  # polls the API server until it answers


def dry_run_create(client: httpx.Client, namespace: str, body: bytes) -> tuple[float, str]:
    """(seconds, outcome) of one dry-run pod creation: the HTTP status, or the client error's name."""
    started = time.perf_counter()
    try:
        response = client.post(f"/api/v1/namespaces/{namespace}/pods", params={"dryRun": "All"}, content=body)
        outcome = str(response.status_code)
    except httpx.HTTPError as err:
        outcome = type(err).__name__
    return time.perf_counter() - started, outcome


def timings(samples: list[tuple[float, str]]) -> dict[str, Any]:
    seconds = sorted(s for s, _ in samples)
    return {
        "count": len(samples),
        "p50_seconds": round(percentile(seconds, 50), 3) if seconds else None,
        "p99_seconds": round(percentile(seconds, 99), 3) if seconds else None,
        "max_seconds": round(max(seconds), 3) if seconds else None,
        "statuses": dict(Counter(outcome for _, outcome in samples)),
    }


class Attack:
    """`threads` threads creating the flood's pods until `stop()`; what the API server answered."""

    def __init__(self, stack: Stack, counts: FloodCounts) -> None:
        self.body = json.dumps(exclusive_leader("flood", counts.terms)).encode()
        self._clients = [tenant_client(stack, ATTACKER) for _ in range(counts.attackers)]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.answers: Counter[str] = Counter()
        self.messages: dict[str, str] = {}
        self._threads = [threading.Thread(target=self._flood, args=(c,), daemon=True) for c in self._clients]

    def _flood(self, client: httpx.Client) -> None:
        while not self._stop.is_set():
            try:
                response = client.post(
                    f"/api/v1/namespaces/{ATTACKER}/pods", params={"dryRun": "All"}, content=self.body
                )
                outcome, message = str(response.status_code), response.text[:300]
            except httpx.HTTPError as err:
                outcome, message = type(err).__name__, str(err)[:300]
            with self._lock:
                self.answers[outcome] += 1
                self.messages.setdefault(outcome, message)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(REQUEST_TIMEOUT + 5)
        for client in self._clients:
            client.close()


def legit_admissions(client: httpx.Client, seconds: float) -> list[tuple[float, str]]:
    body = json.dumps(exclusive_leader("train")).encode()
    samples: list[tuple[float, str]] = []
    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at:
        samples.append(dry_run_create(client, VICTIM, body))
    return samples


def one_flood(stack: Stack, victim: httpx.Client, counts: FloodCounts) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    baseline = legit_admissions(victim, counts.baseline_seconds)
    waits = webhook_waits(stack)
    attack = Attack(stack, counts)
    attack.start()
    try:
        during = legit_admissions(victim, counts.seconds)
    finally:
        load_during = os.getloadavg()[0]
        attack.stop()
    timed = timings(during)
    return {
        "attackers": counts.attackers,
        "terms": counts.terms,
        "body_bytes": len(attack.body),
        "seconds": counts.seconds,
        "attack_requests": sum(attack.answers.values()),
        "attack_answers": dict(attack.answers),
        "attack_messages": attack.messages,
        "legit_baseline": timings(baseline),
        "legit_during": timed,
        "api_server_waited_on_the_webhook": webhook_share(waits, webhook_waits(stack)),
        "target_p99_seconds": TARGET_P99_SECONDS,
        "legit_within_target": bool(during)
        and set(timed["statuses"]) == {"201"}
        and timed["p99_seconds"] <= TARGET_P99_SECONDS,
        "load_average_before": round(load_before, 1),
        "load_average_during": round(load_during, 1),
        "cpus": os.cpu_count(),
    }


def flood_on(stack: Stack, counts: FloodCounts) -> dict[str, Any]:
    """The flood under the default flow control, then under `tenant_flow_control()`: the latter's figures
    at the top level, the former's under `default_flow_control`."""
    victim = tenant_client(stack, VICTIM)
    probe = json.dumps(exclusive_leader("w")).encode()
    try:
        _eventually(lambda: _answered(dry_run_create(victim, VICTIM, probe)))
        by_default = one_flood(stack, victim, counts)
        for obj in tenant_flow_control(counts.tenant_shares):
            stack.client.create_or_replace(obj)
        seats = _eventually(lambda: tenant_seats(stack))
        limited = one_flood(stack, victim, counts)
    finally:
        victim.close()
    return {
        **limited,
        "flow_control": TENANTS_LEVEL,
        "tenant_shares": counts.tenant_shares,
        "tenant_seats": seats,
        "default_flow_control": by_default,
    }


def tenant_seats(stack: Stack) -> int:
    """The tenants' level's seats as kube-apiserver computed them (raises until it has)."""
    seats = seats_of(stack.client.text("/metrics"), TENANTS_LEVEL)
    if seats is None:
        raise KubeError(0, "no seats yet", f"{NOMINAL_SEATS} has no priority_level={TENANTS_LEVEL}")
    return seats


def seats_of(metrics: str, level: str) -> int | None:
    """A priority level's nominal seats on a kube-apiserver `/metrics` page, None when it shows none."""
    seats = Samples.parse(metrics).by_label(NOMINAL_SEATS, "priority_level").get(level)
    return None if seats is None else int(seats)


def _answered(sample: tuple[float, str]) -> bool:
    """True once a dry-run creation is admitted (201); a refusal while the tenant settles raises."""
    if sample[1] != "201":
        raise KubeError(int(sample[1]) if sample[1].isdigit() else 0, "not yet admitted", sample[1])
    return True


def dry_run_flood(counts: FloodCounts) -> dict[str, Any]:
    """Start devstack's real control plane, flood it, measure, stop it."""
    with tempfile.TemporaryDirectory(prefix="bench-abuse-flood-") as workdir:
        options = StackOptions(
            cluster=ClusterShape(nodes=8, pools=4, gpus_per_node=8),
            workdir=Path(workdir),
            startup_timeout=300,
        )
        with Stack(options) as stack:
            result = flood_on(stack, counts)
            stack.check_alive()
            return result
