"""The strategy comparison on the real control plane (`python -m bench strategies --control-plane kube`):
what differs from a kubesim run, in one place.

The stack is devstack's real cluster (kube-apiserver, kube-controller-manager at upstream's 20 qps,
kube-scheduler, etcd, kwok's nodes, JobSet's controller and webhooks over TLS) with the same webhook and
resizer processes; the runs, the pod watch and every check are the kubesim path's. What changes:

- the counters come from the audit log and the components' metrics (`bench.counters.KubeCounters`);
- time is real: a scenario's `pod_run_seconds` are real seconds, given to kwok per pod
  (`devstack.controlplane.kwok.run_time_annotations` on the JobSets' pod templates), and every figure is
  in wall seconds at time scale 1;
- kubesim's scheduler throttle does not exist: the real scheduler runs as fast as this machine lets it, so
  a scenario's `scheduler_pods_per_second` is not applied (recorded as null, and in `kubesim_only`);
- kubesim's gang model does not exist on kwok: the benchmark plays the gang's rendezvous
  (`bench.rendezvous`);
- JobSet's webhooks are always on (they are registered with the API server; a scenario that turns them off
  runs on kubesim only).

Which scenarios: `KUBE_FULL_SCENARIOS` (docs/results.md says why the long-wait one is left out).
"""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass, field
from typing import Any

import yaml

from bench.counters import KubeCounters, scrape_unverified, webhook_names
from bench.scenarios import Scenario
from devstack.clusters import KubeCluster
from devstack.controlplane import jobset
from devstack.controlplane.audit import AuditLog
from devstack.controlplane.kwok import run_time_annotations
from devstack.kube import KubeClient, kubeconfig_credentials
from devstack.stack import Stack

KUBE_TIME_SCALE = 1.0
"""The real control plane runs in real time: one simulated second of a scenario is one wall second."""
KUBE_FULL_SCENARIOS: tuple[str, ...] = (
    "4x8",
    "contended-16x8-on-4",
    "throttled-32x32",
    "backlog-16x16",
    "preemption-8x4",
    "gang-4x3",
)
"""Every scenario of the kubesim run but `long-wait-6x8-on-2`: its three 20-minute waves are an hour of
real time per strategy, five hours for the five."""
KUBE_QUICK_SCENARIOS: tuple[str, ...] = ("4x8",)
"""One small scenario, every contender on one stack: about a minute and a half here."""
KWOK_SCHEDULER = "kube-scheduler"


class KubeScenarioError(ValueError):
    """A scenario that cannot run on the real control plane."""


@dataclass(frozen=True)
class Connection:
    """How the benchmark's own client reaches the API server: kubesim's plain URL, or the real one over
    TLS with the admin kubeconfig's credentials."""

    server: str
    verify: ssl.SSLContext | bool = True
    headers: dict[str, str] = field(default_factory=dict)


def connection(stack: Stack) -> Connection:
    if not isinstance(stack.cluster, KubeCluster):
        return Connection(stack.server)
    server, credentials = kubeconfig_credentials(stack.kubeconfig)
    headers = {"Authorization": f"Bearer {credentials.token}"} if credentials.token else {}
    return Connection(server, credentials.ssl_context(), headers)


def check_supported(scenario: Scenario) -> None:
    if not scenario.jobset_webhooks:
        raise KubeScenarioError(
            f"scenario {scenario.name} turns JobSet's webhooks off: the real control plane always has them "
            "(run it on kubesim)"
        )


def scenario_fields(scenario: Scenario) -> dict[str, Any]:
    """The scenario's fields in strategies.json as it ran on the real control plane (module docstring)."""
    fields = scenario.fields(KUBE_TIME_SCALE)
    not_applied = []
    if scenario.scheduler_pods_per_second is not None:
        not_applied.append(f"scheduler_pods_per_second={scenario.scheduler_pods_per_second:g}")
        fields["scheduler_pods_per_second"] = None
    if scenario.time_scale is not None and scenario.time_scale != KUBE_TIME_SCALE:
        not_applied.append(f"time_scale={scenario.time_scale:g}")
    if scenario.gang:
        not_applied.append("gang model (played by the benchmark as a rendezvous)")
    fields["kubesim_only"] = not_applied
    return fields


def pod_annotations(scenario: Scenario) -> dict[str, str]:
    """What the scenario's pod templates carry so that kwok completes each pod `pod_run_seconds` after it
    started (none when pods run until deleted, or in a gang scenario: the rendezvous starts the clocks)."""
    if scenario.pod_run_seconds is None or scenario.gang:
        return {}
    return run_time_annotations(scenario.pod_run_seconds)


def component_metrics_url(kwok_config: list[dict[str, Any]], component: str) -> str:
    """A component's metrics URL as kwokctl records it for its own Prometheus (`kwok.yaml`)."""
    for document in kwok_config:
        for entry in (document or {}).get("components") or []:
            if entry.get("name") == component and entry.get("metric"):
                metric = entry["metric"]
                return f"{metric['scheme']}://{metric['host']}{metric['path']}"
    raise KubeScenarioError(f"kwokctl's cluster configuration names no metrics endpoint for {component}")


def kube_counters(stack: Stack) -> KubeCounters:
    """The counters of a stack on the real control plane: its audit log, its webhooks, its scheduler."""
    if not isinstance(stack.cluster, KubeCluster):
        raise TypeError("kube_counters needs a stack on the real control plane")
    control_plane = stack.cluster.control_plane
    kwok_config = list(yaml.safe_load_all((control_plane.cluster_dir / "kwok.yaml").read_text()))
    client: KubeClient = stack.client
    configurations = [
        *client.list("MutatingWebhookConfiguration"),
        *client.list("ValidatingWebhookConfiguration"),
    ]
    return KubeCounters(
        AuditLog(control_plane.audit_log),
        webhook_names(configurations, jobset_prefix=jobset.NAME_PREFIX),
        functools.partial(scrape_unverified, component_metrics_url(kwok_config, KWOK_SCHEDULER)),
    )
