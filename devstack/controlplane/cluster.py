"""`KubeControlPlane`: a real Kubernetes control plane on this machine, ready for the project's processes.

Start order:
1. kwokctl's binary runtime (under `guard`, so the cluster dies with devstack): etcd; kube-apiserver on
   127.0.0.1 with its secure port, Node,RBAC authorization, the default admission plugins (Priority and
   ServiceAccount among them) and an audit policy that writes every request at Metadata level;
   kube-controller-manager with its default controllers, each under its own ServiceAccount, and upstream's
   client limits (20 qps, burst 30, unless a flag raises them and says so); kube-scheduler with the default
   profile; kwok with the Stages of `kwok.py`.
2. Nodes of the asked shape (pools, zones, racks, GPUs: devstack.shape), run by kwok.
3. JobSet: its CRD, its controller as a devstack process under its own ServiceAccount, its webhooks.
4. Kueue, when asked (`kueue=True`): its CRDs, its manager as a devstack process under its own
   ServiceAccount, its webhooks, a ResourceFlavor, a ClusterQueue and LocalQueues
   (devstack.controlplane.kueue).

What is left to `Stack`: this project's webhook and resizers, their identities and webhook configurations.
"""

from __future__ import annotations

import functools
import logging
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

import yaml

from certs.files import ca_bundle_b64
from devstack.commands import LOCAL_HOST
from devstack.controlplane import jobset, kueue
from devstack.controlplane.binaries import require_built
from devstack.controlplane.faultproxy import BINARY as FAULT_PROXY_BINARY
from devstack.controlplane.faultproxy import FaultProxy
from devstack.controlplane.guard import READY_LINE
from devstack.controlplane.identities import apply_objects, ensure_namespace, write_kubeconfig
from devstack.controlplane.kueue import WaitForPodsReady
from devstack.controlplane.kwok import kwok_nodes, stages
from devstack.controlplane.versions import BuildLayout, Versions, pinned_versions
from devstack.interrupts import pause
from devstack.kinds import stack_client
from devstack.ports import free_port
from devstack.processes import ManagedProcess
from devstack.readiness import NotReadyError, wait_for_log_line, wait_http_ok
from kubekit.client import KubeError
from kubekit.generic import GenericClient

log = logging.getLogger(__name__)
T = TypeVar("T")

CLUSTER_NAME = "devstack"
UPSTREAM_CONTROLLER_MANAGER_QPS = 20.0
UPSTREAM_CONTROLLER_MANAGER_BURST = 30
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    # One line per request: the stage that carries the response code.
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [{"level": "Metadata"}],
}


@dataclass(frozen=True)
class NodeHeartbeat:
    """How often kwok's fake kubelets prove their nodes alive, and how kube-controller-manager's node
    lifecycle controller judges them: kwokctl's options for both (upstream defaults here).

    kwok renews each node's Lease every `lease_seconds / 4` (as a kubelet does) and updates Node status
    only on its heartbeat Stage (every 10-20 min); kube-controller-manager checks every node each
    `monitor_period_seconds` and marks it Unknown when neither was renewed for `monitor_grace_seconds`.
    At 40 s a cluster of N nodes writes N / 10 Leases per second: 1,500/s at 15,000 nodes."""

    lease_seconds: int = 40
    monitor_period_seconds: int = 5
    monitor_grace_seconds: int = 40

    def __post_init__(self) -> None:
        if self.monitor_grace_seconds < self.lease_seconds // 2:
            raise ValueError(
                f"a node monitor grace period of {self.monitor_grace_seconds}s is under two Lease renewals "
                f"({self.lease_seconds // 4}s each): healthy nodes would be marked Unknown"
            )

    @property
    def renew_seconds(self) -> float:
        return self.lease_seconds / 4

    def kwokctl_options(self) -> dict[str, int]:
        return {
            "nodeLeaseDurationSeconds": self.lease_seconds,
            "kubeControllerManagerNodeMonitorPeriodMilliseconds": self.monitor_period_seconds * 1000,
            "kubeControllerManagerNodeMonitorGracePeriodMilliseconds": self.monitor_grace_seconds * 1000,
        }


@dataclass(frozen=True)
class KubeClusterOptions:
    nodes: int = 16
    pools: int = 4
    gpus_per_node: int = 8
    controller_manager_qps: float | None = None
    """None: upstream's default (20). Any other value is passed to kube-controller-manager and said so."""
    controller_manager_burst: int | None = None
    """None: upstream's default (30)."""
    jobset: bool = True
    """JobSet's CRD, controller and webhooks."""
    kueue: bool = False
    """Kueue's CRDs, manager and webhooks, with one ClusterQueue and a LocalQueue per `kueue_namespaces`."""
    kueue_gpu_quota: int = 64
    """The ClusterQueue's `nvidia.com/gpu` nominal quota."""
    kueue_namespaces: tuple[str, ...] = ("default",)
    """Namespaces that get a LocalQueue (`user-queue`); created when missing."""
    kueue_wait_for_pods_ready: WaitForPodsReady | None = None
    """Kueue's `waitForPodsReady`; None: Kueue's default (on, 30 min timeout)."""
    kueue_tas: bool = False
    """A Topology of the pools and a TAS ResourceFlavor for the ClusterQueue (Topology Aware Scheduling)."""
    fault_proxy: bool = False
    """toxiproxy between this project's processes and kube-apiserver (devstack.controlplane.faultproxy)."""
    node_heartbeat: NodeHeartbeat = NodeHeartbeat()
    extra_args: tuple[str, ...] = ()
    """More component flags, as kwokctl's `--extra-args` takes them: `kube-scheduler=kube-api-qps=500`."""

    def __post_init__(self) -> None:
        if self.nodes < 1 or not 1 <= self.pools <= self.nodes:
            raise ValueError(f"need 1 <= pools <= nodes, got nodes={self.nodes} pools={self.pools}")
        if self.kueue and not self.jobset:
            raise ValueError("Kueue's JobSet integration needs JobSet: kueue=True needs jobset=True")
        if self.kueue_gpu_quota < 0:
            raise ValueError(f"the Kueue GPU quota must be >= 0, got {self.kueue_gpu_quota}")
        if self.kueue_tas and not self.kueue:
            raise ValueError("Kueue's Topology Aware Scheduling needs Kueue: kueue_tas=True needs kueue=True")

    def controller_manager_flags(self) -> list[str]:
        flags: list[str] = []
        if self.controller_manager_qps is not None:
            flags.append(f"kube-controller-manager=kube-api-qps={self.controller_manager_qps:g}")
        if self.controller_manager_burst is not None:
            flags.append(f"kube-controller-manager=kube-api-burst={self.controller_manager_burst}")
        return flags


def eventually(probe: Callable[[], T | None], *, what: str, timeout: float, interval: float = 0.2) -> T:
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            result = probe()
        except KubeError as err:
            result, last = None, err
        if result:
            return result
        if time.monotonic() > deadline:
            raise NotReadyError(f"{what} not within {timeout:.0f}s (last: {last})")
        pause(interval)


class KubeControlPlane:
    def __init__(
        self,
        options: KubeClusterOptions,
        *,
        workdir: Path,
        cert_dir: Path,
        log_dir: Path,
        startup_timeout: float,
    ) -> None:
        self.options = options
        self.workdir = workdir
        self.cert_dir = cert_dir
        self.log_dir = log_dir
        self.startup_timeout = startup_timeout
        self.layout: BuildLayout | None = None
        self.versions: Versions = pinned_versions()
        self.guard: ManagedProcess | None = None
        self.jobset_controller: ManagedProcess | None = None
        self.jobset_webhook_url = ""
        self.kueue_manager: ManagedProcess | None = None
        self.kueue_webhook_url = ""
        self.fault_proxy: FaultProxy | None = None
        self.ports: dict[str, int] = {}
        """kwokctl's port options (`etcdPort`, `kubeApiserverPort`, ...), as this cluster was given them."""
        self._client: GenericClient | None = None

    # --- paths --------------------------------------------------------------------------------------
    @property
    def kwok_workdir(self) -> Path:
        return self.workdir / "kwok"

    @property
    def cluster_dir(self) -> Path:
        return self.kwok_workdir / "clusters" / CLUSTER_NAME

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (client certificate in group system:masters)."""
        return self.workdir / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        return self.cluster_dir / "pki" / "ca.crt"

    @property
    def audit_log(self) -> Path:
        return self.cluster_dir / "logs" / "audit.log"

    @property
    def component_logs(self) -> Path:
        return self.cluster_dir / "logs"

    @property
    def client(self) -> GenericClient:
        if self._client is None:
            raise RuntimeError("the control plane is not started")
        return self._client

    @property
    def component_server(self) -> str:
        """The URL this project's processes reach kube-apiserver at: the fault proxy's, when there is one."""
        return self.fault_proxy.server if self.fault_proxy is not None else self.client.server

    def processes(self) -> list[ManagedProcess]:
        proxy = self.fault_proxy.process if self.fault_proxy is not None else None
        processes = (proxy, self.kueue_manager, self.jobset_controller, self.guard)
        return [p for p in processes if p is not None]

    # --- start --------------------------------------------------------------------------------------
    def start(self) -> GenericClient:
        self.layout = require_built()
        started = time.monotonic()
        self._start_cluster(self.layout)
        self._client = stack_client(self.kubeconfig)
        eventually(
            lambda: self.client.get("ServiceAccount", "default", namespace="default"),
            what="the default ServiceAccount (kube-controller-manager's serviceaccount controller)",
            timeout=self.startup_timeout,
        )
        for node in kwok_nodes(
            self.options.nodes, self.options.pools, gpus_per_node=self.options.gpus_per_node
        ):
            self.client.create(node)
        if self.options.jobset:
            self._start_jobset(self.layout)
        if self.options.kueue:
            self._start_kueue(self.layout)
        if self.options.fault_proxy:
            self._start_fault_proxy(self.layout)
        self._wait_nodes_ready()
        log.info(
            "kube control plane ready in %.1f s (%d nodes)", time.monotonic() - started, self.options.nodes
        )
        return self.client

    def _kwokctl_flags(self, layout: BuildLayout) -> list[str]:
        self.ports = _component_ports()
        config = self.workdir / "kwokctl.yaml"
        kwokctl_config = {
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
            "kind": "KwokctlConfiguration",
            "options": {
                "runtime": "binary",
                "bindAddress": LOCAL_HOST,
                **self.ports,
                **self.options.node_heartbeat.kwokctl_options(),
            },
        }
        config.write_text(
            yaml.safe_dump_all([kwokctl_config, *stages(layout.manifests_dir)], sort_keys=False)
        )
        audit_policy = self.workdir / "audit-policy.yaml"
        audit_policy.write_text(yaml.safe_dump(AUDIT_POLICY, sort_keys=False))
        flags = [
            "--config", str(config),
            "--kubeconfig", str(self.kubeconfig),
            "--wait", f"{self.startup_timeout:.0f}s",
            "--kube-audit-policy", str(audit_policy),
            "--kube-apiserver-binary", str(layout.binary("kube-apiserver")),
            "--kube-controller-manager-binary", str(layout.binary("kube-controller-manager")),
            "--kube-scheduler-binary", str(layout.binary("kube-scheduler")),
            "--etcd-binary", str(layout.binary("etcd")),
            "--kwok-controller-binary", str(layout.binary("kwok")),
        ]  # fmt: skip
        extra = (
            "kube-controller-manager=use-service-account-credentials=true",
            *self.options.controller_manager_flags(),
            *self.options.extra_args,
        )
        for flag in kwokctl_extra_args(extra):
            flags += ["--extra-args", flag]
        return flags

    def _start_cluster(self, layout: BuildLayout) -> None:
        raised = self.options.controller_manager_flags()
        if raised:
            print(
                f"kube-controller-manager client limits raised above upstream's "
                f"{UPSTREAM_CONTROLLER_MANAGER_QPS:g} qps / burst {UPSTREAM_CONTROLLER_MANAGER_BURST}: "
                + ", ".join(flag.split("=", 1)[1] for flag in raised),
                flush=True,
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable, "-m", "devstack.controlplane.guard",
            "--kwokctl", str(layout.binary("kwokctl")),
            "--kwok-workdir", str(self.kwok_workdir),
            "--name", CLUSTER_NAME,
            "--", *self._kwokctl_flags(layout),
        ]  # fmt: skip
        self.guard = ManagedProcess("control-plane", argv, self.log_dir / "control-plane.log")
        self.guard.start()
        wait_for_log_line(self.guard, _ready_pattern(), self.startup_timeout + 30)

    def _start_jobset(self, layout: BuildLayout) -> None:
        manifests = layout.manifests_dir
        self.client.create(jobset.crd(manifests))
        ensure_namespace(self.client, jobset.NAMESPACE)
        apply_objects(self.client, jobset.rbac(manifests))
        kubeconfig = write_kubeconfig(
            self.client, jobset.IDENTITY, self.ca_file, self.workdir / "jobset.kubeconfig"
        )
        webhook_port, health_port = free_port(), free_port()
        config = self.workdir / "jobset-config.yaml"
        config.write_text(
            jobset.controller_config(
                webhook_port=webhook_port, health_port=health_port, cert_dir=self.cert_dir
            )
        )
        eventually(
            self._crd_established, what=f"CRD {jobset.CRD_NAME} Established", timeout=self.startup_timeout
        )
        argv = [
            str(layout.binary("jobset-controller")),
            "--kubeconfig",
            str(kubeconfig),
            "--config",
            str(config),
        ]
        self.jobset_controller = ManagedProcess("jobset", argv, self.log_dir / "jobset.log")
        self.jobset_controller.start()
        wait_http_ok(
            self.jobset_controller, f"http://{LOCAL_HOST}:{health_port}/readyz", self.startup_timeout
        )
        self.jobset_webhook_url = f"https://{LOCAL_HOST}:{webhook_port}"
        for configuration in jobset.webhook_configurations(
            manifests, self.jobset_webhook_url, ca_bundle_b64(self.cert_dir / "ca.crt")
        ):
            self.client.create_or_replace(configuration)

    def _start_kueue(self, layout: BuildLayout) -> None:
        manifests = layout.manifests_dir
        webhook_port, health_port = free_port(), free_port()
        self.kueue_webhook_url = f"https://{LOCAL_HOST}:{webhook_port}"
        ca = ca_bundle_b64(self.cert_dir / "ca.crt")
        for crd in kueue.crds(manifests, self.kueue_webhook_url, ca):
            self.client.create(crd)
        ensure_namespace(self.client, kueue.NAMESPACE)
        apply_objects(self.client, kueue.rbac(manifests))
        kubeconfig = write_kubeconfig(
            self.client, kueue.IDENTITY, self.ca_file, self.workdir / "kueue.kubeconfig"
        )
        config = self.workdir / "kueue-config.yaml"
        config.write_text(
            kueue.manager_config(
                webhook_port=webhook_port,
                health_port=health_port,
                cert_dir=self.cert_dir,
                wait_for_pods_ready=self.options.kueue_wait_for_pods_ready,
            )
        )
        for name in kueue.crd_names(manifests):
            eventually(
                functools.partial(self._crd_is_established, name),
                what=f"CRD {name} Established",
                timeout=self.startup_timeout,
            )
        kueue.ensure_metrics_certificate(self.cert_dir)
        argv = [str(layout.binary("kueue")), "--kubeconfig", str(kubeconfig), "--config", str(config)]
        self.kueue_manager = ManagedProcess("kueue", argv, self.log_dir / "kueue.log")
        self.kueue_manager.start()
        wait_http_ok(self.kueue_manager, f"http://{LOCAL_HOST}:{health_port}/readyz", self.startup_timeout)
        for configuration in kueue.webhook_configurations(manifests, self.kueue_webhook_url, ca):
            self.client.create_or_replace(configuration)
        for namespace in self.options.kueue_namespaces:
            ensure_namespace(self.client, namespace)
        for obj in kueue.queue_objects(
            gpu_quota=self.options.kueue_gpu_quota,
            namespaces=self.options.kueue_namespaces,
            tas=self.options.kueue_tas,
        ):
            # Kueue's webhooks may refuse the first objects until its webhook server answers.
            eventually(
                functools.partial(self.client.create_or_replace, obj),
                what=f"{obj['kind']} {obj['metadata']['name']} created",
                timeout=self.startup_timeout,
            )

    def _start_fault_proxy(self, layout: BuildLayout) -> None:
        self.fault_proxy = FaultProxy(
            layout.binary(FAULT_PROXY_BINARY), log_dir=self.log_dir, startup_timeout=self.startup_timeout
        )
        self.fault_proxy.start(upstream=urlsplit(self.client.server).netloc)

    def _crd_established(self) -> bool:
        return self._crd_is_established(jobset.CRD_NAME)

    def _crd_is_established(self, name: str) -> bool:
        crd = self.client.get("CustomResourceDefinition", name)
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    def _wait_nodes_ready(self) -> None:
        def all_ready() -> bool:
            nodes = self.client.list("Node")
            ready = [
                node
                for node in nodes
                if any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in node.get("status", {}).get("conditions", [])
                )
            ]
            return len(ready) == self.options.nodes

        eventually(all_ready, what=f"{self.options.nodes} Ready nodes (kwok)", timeout=self.startup_timeout)

    def close(self) -> None:
        if self.fault_proxy is not None:
            self.fault_proxy.close()
        if self._client is not None:
            self._client.close()
            self._client = None


def kwokctl_extra_args(flags: Sequence[str]) -> list[str]:
    """`component=flag=value` flags ordered so that every component's first flag comes before any
    component's second. kwokctl v0.8.0 files a component's later flags under the position of its first one
    among all the flags, not among the components: `a=1 a=2 b=1 b=2` makes it index past its list and
    panic; `a=1 b=1 a=2 b=2` is read as meant."""
    seen: dict[str, int] = {}
    ranked: list[tuple[int, int, str]] = []
    for position, flag in enumerate(flags):
        component = flag.split("=", 1)[0]
        rank = seen.get(component, 0)
        seen[component] = rank + 1
        ranked.append((rank, position, flag))
    return [flag for _, _, flag in sorted(ranked)]


def _component_ports() -> dict[str, int]:
    """Every port of the cluster, from the OS's free ports: kwokctl's own choice counts down from 32765 and
    two clusters created at once (two test workers) would both take the same ports."""
    names = (
        "kubeApiserverPort",
        "etcdPort",
        "etcdPeerPort",
        "kubeControllerManagerPort",
        "kubeSchedulerPort",
        "kwokControllerPort",
    )
    return {name: free_port() for name in names}


def _ready_pattern() -> re.Pattern[str]:
    return re.compile(re.escape(READY_LINE))
