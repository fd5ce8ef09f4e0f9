"""Faults on the real control plane, one function each, through the upstream tools that cause them.

Between the webhook/resizer and kube-apiserver (the stack started with `fault_proxy=True`: toxiproxy in
front of kube-apiserver, devstack.controlplane.faultproxy):
- `slow_api`: every answer and watch event delayed (toxiproxy `latency`);
- `stalled_api`: no byte passes and each connection is closed after a while (toxiproxy `timeout`);
- `reset_api`: each connection reset by peer at its next byte (toxiproxy `reset_peer`);
- `drop_connections`: every connection closed at once, watches included (the proxy disabled, re-enabled).

From kube-apiserver itself:
- `rejected_api`: the project's ServiceAccounts' requests answered 429 by API Priority and Fairness (a
  FlowSchema sends them to a PriorityLevelConfiguration of no nominal seats that rejects when busy, and
  clients of the same identity keep it busy); leader election (their Leases) keeps its own priority
  level, as upstream's `workload-leader-election` does for kube-system;
- `restart_component`: etcd or kube-apiserver killed; devstack's guard starts it again with kwokctl (an
  outage: answers 5xx or connections refused while it is down);
- `expire_watches`: etcd compacted at its current revision, then kube-apiserver restarted: its watch
  cache is rebuilt at the compacted revision, so a watch resumed from any older resourceVersion gets
  410 Gone and its client must re-list.

Nodes (kwok's node Stages leave a node alone once it carries `NODE_FAULT_ANNOTATION`):
- `node_pool_not_ready`: a pool's kubelets report Ready=False (the status patched as a kubelet posts it,
  and kwok no longer sets it Ready again) and then go silent: the pods bound there carry the annotation
  too, so kwok neither completes nor finalizes them; kube-controller-manager's node lifecycle controller
  then taints the nodes `node.kubernetes.io/not-ready:NoSchedule` at once (evictions, if any, come
  later, at its per-zone eviction rate), so nothing new is scheduled there;
- `delete_node_pool`: the pool's Node objects deleted, as a cloud provider removes failed VMs; the pod
  garbage collector then fails and deletes the pods bound to them.

Processes: `kill_resizer` and `kill_webhook` (SIGKILL, started again and ready).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx

from devstack.clusters import KubeCluster
from devstack.commands import LOCAL_HOST, RELEASE_NAMESPACE
from devstack.controlplane.cluster import KubeControlPlane
from devstack.controlplane.components import stop_component, wait_restarted
from devstack.controlplane.faultproxy import FaultProxy, Toxic
from devstack.controlplane.kwok import NODE_FAULT_ANNOTATION
from devstack.interrupts import pause
from devstack.processes import ProcessError
from devstack.readiness import wait_http_ok
from devstack.stack import Stack
from kubekit.client import KubeError
from kubekit.credentials import kubeconfig_credentials
from kubekit.generic import GenericClient
from placement.constants import GKE_NODEPOOL_LABEL

log = logging.getLogger(__name__)

Obj = dict[str, Any]

REJECT_LEVEL = "devstack-fault-reject"
LEADER_ELECTION_SCHEMA = "devstack-fault-leader-election"
LEADER_ELECTION_LEVEL = "leader-election"
"""Upstream's priority level for leader election, which its `workload-leader-election` FlowSchema uses."""
FLOWCONTROL = "flowcontrol.apiserver.k8s.io/v1"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
SURVIVES_RESTARTS = ("kube-controller-manager=leader-elect=false", "kube-scheduler=leader-elect=false")
"""Component flags for a cluster whose kube-apiserver or etcd is restarted: kube-controller-manager and
kube-scheduler exit when they cannot renew their leader Lease for 10 s, and here no kubelet restarts them
as it would their static pods. With one replica each, leader election elects nothing: it is turned off."""
APISERVER_READY_SECONDS = 120.0
OCCUPANTS = 6
"""Clients that keep the rejecting priority level busy (`rejected_api`)."""


def control_plane(stack: Stack) -> KubeControlPlane:
    if not isinstance(stack.cluster, KubeCluster):
        raise ProcessError("faults need a stack on the real control plane (control_plane='kube')")
    return stack.cluster.control_plane


def fault_proxy(stack: Stack) -> FaultProxy:
    proxy = control_plane(stack).fault_proxy
    if proxy is None:
        raise ProcessError("this fault needs the stack's fault proxy (StackOptions(fault_proxy=True))")
    return proxy


# --- between the project's processes and kube-apiserver (toxiproxy) --------------------------------------


@contextlib.contextmanager
def _toxic(stack: Stack, toxic: Toxic) -> Iterator[None]:
    proxy = fault_proxy(stack)
    proxy.add(toxic)
    log.info("fault: toxic %s %s on", toxic.kind, toxic.attributes)
    try:
        yield
    finally:
        proxy.remove(toxic.name)
        log.info("fault: toxic %s off", toxic.kind)


def slow_api(
    stack: Stack, *, latency_ms: int = 200, jitter_ms: int = 100
) -> contextlib.AbstractContextManager[None]:
    """While inside: every answer and watch event delayed by latency ± jitter."""
    return _toxic(stack, Toxic("slow", "latency", {"latency": latency_ms, "jitter": jitter_ms}))


def stalled_api(stack: Stack, *, close_after_ms: int = 2000) -> contextlib.AbstractContextManager[None]:
    """While inside: nothing gets through and each connection is closed `close_after_ms` after the stall
    began (a client sees its request time out, or its watch end)."""
    return _toxic(stack, Toxic("stalled", "timeout", {"timeout": close_after_ms}))


def reset_api(stack: Stack, *, after_ms: int = 0) -> contextlib.AbstractContextManager[None]:
    """While inside: each connection is reset (TCP RST) `after_ms` after its next byte."""
    return _toxic(stack, Toxic("reset", "reset_peer", {"timeout": after_ms}))


def drop_connections(stack: Stack, *, down_seconds: float = 1.0) -> None:
    """Close every connection at once (watches too) and refuse new ones for `down_seconds`."""
    proxy = fault_proxy(stack)
    proxy.set_enabled(False)
    try:
        pause(down_seconds)
    finally:
        proxy.set_enabled(True)
    log.info("fault: every connection to kube-apiserver dropped (%.1fs down)", down_seconds)


# --- kube-apiserver and etcd -----------------------------------------------------------------------------


def _project_service_accounts(stack: Stack) -> list[Obj]:
    return [
        {
            "kind": "ServiceAccount",
            "serviceAccount": {"namespace": identity.namespace, "name": identity.service_account},
        }
        for identity in _identities(stack)
    ]


def _identities(stack: Stack) -> list[Any]:
    cluster = stack.cluster
    if not isinstance(cluster, KubeCluster):
        raise ProcessError("faults need a stack on the real control plane (control_plane='kube')")
    return list(cluster.identities.values())


def rejecting_objects(subjects: list[Obj]) -> list[Obj]:
    """The API Priority and Fairness objects that answer 429 to every request of `subjects` except their
    leader election: a priority level with no seats of its own, none borrowed, and `Reject` when full."""
    every_resource = {
        "verbs": ["*"],
        "apiGroups": ["*"],
        "resources": ["*"],
        "clusterScope": True,
        "namespaces": ["*"],
    }
    leases = {
        "verbs": ["get", "create", "update"],
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "namespaces": [RELEASE_NAMESPACE],
    }
    return [
        {
            "apiVersion": FLOWCONTROL,
            "kind": "PriorityLevelConfiguration",
            "metadata": {"name": REJECT_LEVEL},
            "spec": {
                "type": "Limited",
                "limited": {
                    "nominalConcurrencyShares": 0,
                    "lendablePercent": 0,
                    "borrowingLimitPercent": 0,
                    "limitResponse": {"type": "Reject"},
                },
            },
        },
        {
            "apiVersion": FLOWCONTROL,
            "kind": "FlowSchema",
            "metadata": {"name": LEADER_ELECTION_SCHEMA},
            "spec": {
                "priorityLevelConfiguration": {"name": LEADER_ELECTION_LEVEL},
                "matchingPrecedence": 400,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [{"subjects": subjects, "resourceRules": [leases]}],
            },
        },
        {
            "apiVersion": FLOWCONTROL,
            "kind": "FlowSchema",
            "metadata": {"name": REJECT_LEVEL},
            "spec": {
                "priorityLevelConfiguration": {"name": REJECT_LEVEL},
                "matchingPrecedence": 500,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [
                    {
                        "subjects": subjects,
                        "resourceRules": [every_resource],
                        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    }
                ],
            },
        },
    ]


@contextlib.contextmanager
def rejected_api(stack: Stack, *, occupants: int = OCCUPANTS) -> Iterator[None]:
    """While inside: kube-apiserver answers 429 (Retry-After) to most of the webhook's and the resizer's
    requests. Their priority level has no nominal seats (API Priority and Fairness still runs a request
    there when it is idle) and rejects what finds it busy; `occupants` clients of the resizer's identity
    keep it busy, as a noisy neighbour saturates a real priority level."""
    objects = rejecting_objects(_project_service_accounts(stack))
    for obj in objects:
        stack.client.create_or_replace(obj)
    stop = threading.Event()
    occupying = [
        threading.Thread(target=_occupy, args=(stack, stop), name=f"apf-occupant-{index}", daemon=True)
        for index in range(occupants)
    ]
    for thread in occupying:
        thread.start()
    log.info("fault: API Priority and Fairness rejects the project's ServiceAccounts")
    try:
        yield
    finally:
        stop.set()
        for thread in occupying:
            thread.join(30)
        for obj in reversed(objects):
            stack.client.delete(obj["kind"], obj["metadata"]["name"])
        log.info("fault: API Priority and Fairness rejection lifted")


def _occupy(stack: Stack, stop: threading.Event) -> None:
    """List pods as the resizer, straight to kube-apiserver, until `stop`: the priority level's seat taken."""
    cluster = stack.cluster
    assert isinstance(cluster, KubeCluster)
    _, credentials = kubeconfig_credentials(cluster.component_kubeconfig("resizer"))
    headers = {"Authorization": f"Bearer {credentials.token}", "User-Agent": "devstack-fault-occupant"}
    with httpx.Client(
        base_url=stack.server, verify=credentials.ssl_context(), headers=headers, timeout=10
    ) as http:
        while not stop.is_set():
            with contextlib.suppress(httpx.HTTPError):
                http.get("/api/v1/pods")


def restart_component(stack: Stack, component: str, *, sig: signal.Signals = signal.SIGKILL) -> int:
    """Stop `component` of the cluster (`etcd`, `kube-apiserver`, ...) with `sig`; devstack's guard starts it
    again (`kwokctl start cluster`); return once kube-apiserver is ready again. Returns the stopped pid."""
    plane = control_plane(stack)
    pid = stop_component(plane.cluster_dir, component, sig=sig)
    log.info("fault: %s (pid %s) stopped with %s", component, pid, sig.name)
    wait_restarted(plane.cluster_dir, component, pid)
    wait_apiserver_ready(stack.client)
    return pid


def etcd_revision(plane: KubeControlPlane) -> int:
    """etcd's current revision (its v3 JSON gateway: a range request's header)."""
    response = httpx.post(f"{etcd_url(plane)}/v3/kv/range", json={"key": "AA==", "limit": 1}, timeout=10.0)
    response.raise_for_status()
    return int(response.json()["header"]["revision"])


def etcd_url(plane: KubeControlPlane) -> str:
    return f"http://{LOCAL_HOST}:{plane.ports['etcdPort']}"


def compact_etcd(plane: KubeControlPlane) -> int:
    """Compact etcd's history up to its current revision; returns that revision."""
    revision = etcd_revision(plane)
    response = httpx.post(
        f"{etcd_url(plane)}/v3/kv/compaction", json={"revision": revision, "physical": True}, timeout=30.0
    )
    response.raise_for_status()
    return revision


def expire_watches(stack: Stack) -> int:
    """Make every watch's resourceVersion too old: etcd compacted, kube-apiserver restarted. Returns the
    revision compacted at."""
    revision = compact_etcd(control_plane(stack))
    restart_component(stack, "kube-apiserver")
    log.info("fault: watches expired (etcd compacted at revision %s, kube-apiserver restarted)", revision)
    return revision


def wait_apiserver_ready(client: GenericClient, timeout: float = APISERVER_READY_SECONDS) -> None:
    def ready() -> bool:
        try:
            return client.text("/readyz").strip() == "ok"
        except KubeError:
            return False

    _poll(ready, what="kube-apiserver /readyz", timeout=timeout)


# --- nodes (kwok) -----------------------------------------------------------------------------------------


def pool_nodes(client: GenericClient, pool: str) -> list[str]:
    nodes = client.list("Node", label_selector=f"{GKE_NODEPOOL_LABEL}={pool}")
    return sorted(node["metadata"]["name"] for node in nodes)


def node_pool_not_ready(stack: Stack, pool: str) -> list[str]:
    """The pool's kubelets report Ready=False, for good; returns its nodes. kube-controller-manager taints
    them `node.kubernetes.io/not-ready` on its next node monitor pass."""
    names = pool_nodes(stack.client, pool)
    if not names:
        raise ProcessError(f"no node in pool {pool}")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ready_false = {
        "type": "Ready",
        "status": "False",
        "reason": "KubeletNotReady",
        "message": "devstack fault: the node pool failed",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    fault = {"metadata": {"annotations": {NODE_FAULT_ANNOTATION: "not-ready"}}}
    for name in names:
        stack.client.patch("Node", name, fault)
        stack.client.patch(
            "Node",
            name,
            {"status": {"conditions": [ready_false]}},
            subresource="status",
            patch_type="application/strategic-merge-patch+json",
        )
    on_them = [pod for pod in stack.client.list("Pod") if (pod.get("spec") or {}).get("nodeName") in names]
    for pod in on_them:  # their kubelet is gone: kwok no longer runs, completes or finalizes them
        with contextlib.suppress(KubeError):
            stack.client.patch("Pod", pod["metadata"]["name"], fault, namespace=pod["metadata"]["namespace"])
    log.info("fault: node pool %s NotReady (%d nodes, %d pods frozen)", pool, len(names), len(on_them))
    return names


def is_tainted_not_ready(node: Obj) -> bool:
    """kube-controller-manager tainted the node `node.kubernetes.io/not-ready` (NoSchedule at once; the
    NoExecute taint and evictions follow at its per-zone eviction rate, or not at all in a disrupted zone)."""
    taints = (node.get("spec") or {}).get("taints") or []
    return any(t.get("key") == NOT_READY_TAINT for t in taints)


def delete_node_pool(stack: Stack, pool: str) -> list[str]:
    """Delete the pool's Node objects; returns their names."""
    names = pool_nodes(stack.client, pool)
    for name in names:
        stack.client.delete("Node", name)
    log.info("fault: node pool %s deleted (%d nodes)", pool, len(names))
    return names


# --- the project's processes ------------------------------------------------------------------------------


def kill_resizer(stack: Stack, index: int = 0) -> None:
    """SIGKILL resizer `index`; it is started again and ready (leader or standby) on return."""
    stack.restart_resizer(index, kill=True)
    log.info("fault: resizer-%d killed and restarted", index)


def kill_webhook(stack: Stack) -> None:
    """SIGKILL the webhook (admissions fail meanwhile: `failurePolicy: Fail`); started again and ready."""
    webhook = stack.webhook
    if webhook is None:
        raise ProcessError("the stack is not started")
    webhook.kill()
    webhook.start()
    wait_http_ok(webhook, f"{stack.webhook_url}/readyz", stack.options.startup_timeout, ca_file=stack.ca_file)
    log.info("fault: webhook killed and restarted")


# --- waiting ------------------------------------------------------------------------------------------------


def _poll(probe: Callable[[], bool], *, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise ProcessError(f"{what} not within {timeout:.0f}s")
        pause(0.2)
