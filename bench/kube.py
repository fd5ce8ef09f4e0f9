"""The strategy comparison's cluster: devstack's real control plane, and how the benchmark reaches it.

The stack is kube-apiserver, kube-controller-manager (at upstream's 20 qps), kube-scheduler, etcd, kwok's
nodes and JobSet's controller and webhooks over TLS, with this project's webhook and resizer processes as
`make run` starts them. Time is real: a scenario's `pod_run_seconds` are given to kwok per pod
(`devstack.controlplane.kwok.run_time_annotations` on the JobSets' pod templates). kwok has no model of a
gang's program: the benchmark plays the rendezvous (`bench.rendezvous`). The counters come from the audit
log and the components' metrics (`bench.counters.KubeCounters`).
"""

from __future__ import annotations

import functools
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from bench.counters import KubeCounters, scrape_unverified, webhook_names
from bench.scenarios import GPUS_PER_NODE, Scenario
from devstack.clusters import KubeCluster
from devstack.controlplane import jobset, kueue
from devstack.controlplane.audit import AuditLog
from devstack.controlplane.kwok import run_time_annotations, start_time_annotations
from devstack.shape import ClusterShape
from devstack.stack import Stack, StackOptions
from kubekit.credentials import kubeconfig_credentials
from kubekit.generic import GenericClient

KWOK_SCHEDULER = "kube-scheduler"
NODE_LIFECYCLE_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
"""The node lifecycle controller's taints on a node that is not (yet) Ready."""
NODES_SETTLED_TIMEOUT = 300.0
"""Seconds for every node to be Ready and untainted after the stack started (128 nodes on a loaded
2-core machine: kwok posts each one's status, then kube-controller-manager lifts each one's taint)."""
NODES_SETTLED_POLL = 1.0


class ClusterConfigError(ValueError):
    """kwokctl's cluster configuration lacks what the benchmark needs."""


@dataclass(frozen=True)
class Connection:
    """How the benchmark's own client reaches the API server: over TLS with the admin kubeconfig's
    credentials."""

    server: str
    verify: ssl.SSLContext | bool = True
    headers: dict[str, str] = field(default_factory=dict)


def connection(stack: Stack) -> Connection:
    server, credentials = kubeconfig_credentials(stack.kubeconfig)
    headers = {"Authorization": f"Bearer {credentials.token}"} if credentials.token else {}
    return Connection(server, credentials.ssl_context(), headers)


def stack_options(scenario: Scenario, exempt_namespaces: Sequence[str]) -> StackOptions:
    """The real control plane shaped for `scenario` (its pools of eight-GPU nodes), with the namespaces
    JobSet alone places exempt from this project's webhooks (as a user would exempt them); for a Kueue
    scenario, Kueue with a ClusterQueue whose GPU quota fits one of its JobSets (`Scenario.kueue_gpu_quota`;
    each run's namespace gets its LocalQueue from the run)."""
    return StackOptions(
        cluster=ClusterShape(nodes=scenario.nodes, pools=scenario.pools, gpus_per_node=GPUS_PER_NODE),
        startup_timeout=120,
        exempt_namespaces=tuple(exempt_namespaces),
        kueue=scenario.kueue,
        kueue_gpu_quota=scenario.kueue_gpu_quota if scenario.kueue else StackOptions.kueue_gpu_quota,
    )


def unsettled_nodes(nodes: Sequence[dict[str, Any]]) -> list[str]:
    """The nodes a pod cannot be placed on yet: not Ready, or still tainted by the node lifecycle
    controller (it lifts `node.kubernetes.io/not-ready` a moment after kwok reports the node Ready)."""
    unsettled = []
    for node in nodes:
        conditions = (node.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        taints = {t.get("key") for t in (node.get("spec") or {}).get("taints") or []}
        if not ready or taints & NODE_LIFECYCLE_TAINTS:
            unsettled.append(str(node["metadata"]["name"]))
    return sorted(unsettled)


def wait_nodes_settled(client: GenericClient, timeout: float = NODES_SETTLED_TIMEOUT) -> None:
    """Return once every node is Ready and untainted: a run whose window opened while the node lifecycle
    controller was still lifting the start's taints measured the taints (docs/results.md, "The 32x32
    anomaly, traced")."""
    deadline = time.monotonic() + timeout
    while unsettled := unsettled_nodes(client.list("Node")):
        if time.monotonic() > deadline:
            raise ClusterConfigError(
                f"{len(unsettled)} nodes not Ready and untainted {timeout:g}s after the stack started: "
                f"{', '.join(unsettled[:5])}"
            )
        time.sleep(NODES_SETTLED_POLL)


def pod_annotations(scenario: Scenario) -> dict[str, str]:
    """What the scenario's pod templates carry so that kwok starts each pod `pod_start_seconds` after its
    bind (none: at once) and completes it `pod_run_seconds` after it started (none when pods run until
    deleted, or in a gang scenario: the rendezvous starts the clocks)."""
    annotations = (
        {} if scenario.pod_start_seconds is None else start_time_annotations(scenario.pod_start_seconds)
    )
    if scenario.pod_run_seconds is None or scenario.gang:
        return annotations
    return {**annotations, **run_time_annotations(scenario.pod_run_seconds)}


def component_metrics_url(kwok_config: list[dict[str, Any]], component: str) -> str:
    """A component's metrics URL as kwokctl records it for its own Prometheus (`kwok.yaml`)."""
    for document in kwok_config:
        for entry in (document or {}).get("components") or []:
            if entry.get("name") == component and entry.get("metric"):
                metric = entry["metric"]
                return f"{metric['scheme']}://{metric['host']}{metric['path']}"
    raise ClusterConfigError(f"kwokctl's cluster configuration names no metrics endpoint for {component}")


def kube_counters(stack: Stack) -> KubeCounters:
    """The counters of a stack on the real control plane: its audit log, its webhooks, its scheduler."""
    if not isinstance(stack.cluster, KubeCluster):
        raise TypeError("kube_counters needs a stack on the real control plane")
    control_plane = stack.cluster.control_plane
    kwok_config = list(yaml.safe_load_all((control_plane.cluster_dir / "kwok.yaml").read_text()))
    client: GenericClient = stack.client
    configurations = [
        *client.list("MutatingWebhookConfiguration"),
        *client.list("ValidatingWebhookConfiguration"),
    ]
    return KubeCounters(
        AuditLog(control_plane.audit_log),
        webhook_names(configurations, jobset_prefix=jobset.NAME_PREFIX, kueue_prefix=kueue.NAME_PREFIX),
        functools.partial(scrape_unverified, component_metrics_url(kwok_config, KWOK_SCHEDULER)),
    )
