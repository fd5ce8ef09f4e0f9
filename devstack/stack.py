"""`Stack`: the real control plane + webhook + resizer as separate local processes, wired like a real install.

    with Stack(StackOptions(cluster=ClusterShape(nodes=16, pools=4))) as stack:
        stack.client.create(jobset)        # talks to kube-apiserver at stack.server
        ...                                # every process is stopped on exit, even on Ctrl-C

The control plane is the one built by `make kube` (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok's nodes and JobSet; devstack.clusters). Start order: the workdir's lock (one stack per
workdir: `devstack.workdir`), certificates, the control plane, the release namespace, the chart's
ServiceAccounts and RBAC (with a token for each process), the webhook (TLS, ready when its caches are
synced), the chart's webhook configurations pointed at the local webhook, then the resizer replicas. On stop
every process group gets SIGTERM at once (then SIGKILL after a grace period). Each process also dies with
devstack if devstack is killed, so nothing is left behind.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from certs.files import ca_bundle_b64
from devstack.clusters import KubeCluster
from devstack.commands import (
    LOCAL_HOST,
    RELEASE_NAMESPACE,
    certs_command,
    resizer_command,
    webhook_command,
)
from devstack.controlplane.cluster import KubeClusterOptions, NodeHeartbeat
from devstack.controlplane.kueue import WaitForPodsReady
from devstack.ports import free_port
from devstack.processes import ManagedProcess, ProcessError, stop_all
from devstack.readiness import wait_http_ok
from devstack.shape import ClusterShape
from devstack.webhooks import (
    POD_ADMISSION_PATHS,
    chart_values,
    render_chart,
    resizer_exempt_namespaces,
    resizer_pin_followers_flag,
    webhook_configurations,
    webhook_follower_shards_flag,
)
from devstack.workdir import WorkdirClaim
from kubekit.client import KubeError
from kubekit.generic import GenericClient
from placement.constants import DEFAULT_STRATEGY, STRATEGIES

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StackOptions:
    cluster: ClusterShape = field(default_factory=ClusterShape)
    """The nodes kwok runs: how many, in how many pools, with how many GPUs each."""
    controller_manager_qps: float | None = None
    """Raise kube-controller-manager's client limit above upstream's 20 qps (said on start)."""
    controller_manager_burst: int | None = None
    """raise its burst above upstream's 30."""
    fault_proxy: bool = False
    """the webhook and the resizer reach kube-apiserver through toxiproxy (devstack.faults)."""
    node_heartbeat: NodeHeartbeat = field(default_factory=NodeHeartbeat)
    """kwok's node Lease duration and kube-controller-manager's node monitor."""
    control_plane_args: tuple[str, ...] = ()
    """more component flags, `component=flag=value` (kwokctl's `--extra-args`)."""
    jobset: bool = True
    """JobSet's CRD, controller and webhooks (a benchmark of plain Jobs goes without)."""
    kueue: bool = False
    """Kueue's CRDs, manager (a local process) and webhooks, with a ResourceFlavor, a ClusterQueue and a
    LocalQueue `user-queue` in each of `kueue_namespaces` (devstack.controlplane.kueue)."""
    kueue_gpu_quota: int = 64
    """The ClusterQueue's `nvidia.com/gpu` nominal quota."""
    kueue_namespaces: tuple[str, ...] = ("default",)
    """Namespaces that get a LocalQueue when Kueue is on (created when missing)."""
    kueue_wait_for_pods_ready: WaitForPodsReady | None = None
    """Kueue's `waitForPodsReady` (timeout, blockAdmission, requeue backoff); None: Kueue's default (on,
    30 min timeout)."""
    kueue_tas: bool = False
    """Kueue's Topology Aware Scheduling: a Topology of the pools (block = pool, hostname) and a TAS
    ResourceFlavor for the ClusterQueue."""
    default_strategy: str = DEFAULT_STRATEGY
    """Strategy for Jobs without an `exclusive-placement.io/strategy` annotation."""
    jobset_takeover: bool = True
    """The webhook takes JobSet's exclusive-topology annotation over on child Jobs' pod templates."""
    resizer_replicas: int = 1
    """Replicas elect a leader through a Lease in the release namespace, as the chart's do, however many."""
    workdir: Path | None = None
    """Certificates, kubeconfig and logs; None: a temporary directory removed on exit."""
    startup_timeout: float = 60.0
    """Seconds each component may take to become ready (2 busy cores can be slow)."""
    exempt_namespaces: tuple[str, ...] = ()
    """Namespaces the webhooks never see (the chart's `webhook.admission.exemptNamespaces`): e.g. one where
    JobSet alone places its pods, as the benchmark's `jobset` baseline needs."""
    pod_admission: str | None = None
    """How exclusive pods are admitted (the chart's `webhook.admission.pods.path`): `policy` (the chart's
    admission policies inside kube-apiserver, the webhook for the rest) or `webhook`; None: `policy` (what
    `auto` picks on Kubernetes 1.36)."""

    def __post_init__(self) -> None:
        if self.default_strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.default_strategy!r}; valid: {', '.join(STRATEGIES)}")
        if self.resizer_replicas < 0:
            raise ValueError(f"resizer replicas must be >= 0, got {self.resizer_replicas}")
        if self.pod_admission not in (None, *POD_ADMISSION_PATHS):
            raise ValueError(
                f"unknown pod admission path {self.pod_admission!r}; valid: {', '.join(POD_ADMISSION_PATHS)}"
            )

    @property
    def pod_admission_path(self) -> str:
        return self.pod_admission if self.pod_admission is not None else "policy"

    def kube_cluster(self) -> KubeClusterOptions:
        return KubeClusterOptions(
            nodes=self.cluster.nodes,
            pools=self.cluster.pools,
            gpus_per_node=self.cluster.gpus_per_node,
            controller_manager_qps=self.controller_manager_qps,
            controller_manager_burst=self.controller_manager_burst,
            fault_proxy=self.fault_proxy,
            node_heartbeat=self.node_heartbeat,
            extra_args=self.control_plane_args,
            jobset=self.jobset,
            kueue=self.kueue,
            kueue_gpu_quota=self.kueue_gpu_quota,
            kueue_namespaces=self.kueue_namespaces,
            kueue_wait_for_pods_ready=self.kueue_wait_for_pods_ready,
            kueue_tas=self.kueue_tas,
        )


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt


class Stack:
    def __init__(self, options: StackOptions | None = None):
        self.options = options or StackOptions()
        self._tempdir: str | None = None
        self.workdir = self.options.workdir or Path(".")
        self.webhook_url = ""
        self.cluster: KubeCluster | None = None
        self.webhook: ManagedProcess | None = None
        self.resizers: list[ManagedProcess] = []
        self.resizer_metrics_ports: list[int] = []
        self._client: GenericClient | None = None
        self._claim: WorkdirClaim | None = None
        self.chart_objects: list[dict[str, Any]] = []
        """What the chart renders for this stack: its webhook configurations, RBAC and resizer arguments."""

    # --- paths -------------------------------------------------------------------------------------
    @property
    def cert_dir(self) -> Path:
        return self.workdir / "certs"

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    @property
    def ca_file(self) -> Path:
        return self.cert_dir / "ca.crt"

    @property
    def server(self) -> str:
        return self.cluster.server if self.cluster is not None else ""

    @property
    def kubeconfig(self) -> Path:
        """A kubeconfig for kubectl: the cluster's admin credentials."""
        return self.cluster.kubeconfig if self.cluster is not None else Path()

    @property
    def client(self) -> GenericClient:
        if self._client is None:
            raise ProcessError("the stack is not started")
        return self._client

    def processes(self) -> list[ManagedProcess]:
        cluster = self.cluster.processes() if self.cluster is not None else []
        return [p for p in (*cluster, self.webhook, *self.resizers) if p is not None]

    # --- lifecycle -----------------------------------------------------------------------------------
    def __enter__(self) -> Stack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        if self.options.workdir is None:
            self._tempdir = tempfile.mkdtemp(prefix="devstack-")
            self.workdir = Path(self._tempdir)
        self._claim = WorkdirClaim(self.workdir)
        self._claim.acquire()
        self._generate_certs()
        self.chart_objects = render_chart(
            chart_values(
                ca_bundle_b64(self.ca_file),
                self.options.default_strategy,
                self.options.exempt_namespaces,
                self.options.pod_admission_path,
            )
        )
        self._client = self._start_cluster()
        self._claim.describe(
            f"the devstack of pid {os.getpid()} (kube-apiserver {self.server}, kubeconfig {self.kubeconfig})"
        )
        self._ensure_release_namespace()
        self._start_webhook()
        self.register_webhooks()
        for _ in range(self.options.resizer_replicas):
            self.add_resizer()

    def stop(self) -> None:
        """Stop every process (reverse start order) and wait for each; safe to call twice.

        A second Ctrl-C while stopping is deferred, so an impatient user cannot leave orphans behind."""
        with _sigint_deferred():
            self._stop()

    def _stop(self) -> None:
        codes = stop_all(self.processes())
        errors = [f"{name} exited {code}" for name, code in codes.items() if code not in (None, 0, -15)]
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.cluster is not None:
            self.cluster.close()
        if self._claim is not None:
            self._claim.release()
            self._claim = None
        if self._tempdir is not None:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None
        if errors:
            log.info("on stop: %s", "; ".join(errors))

    def check_alive(self) -> None:
        """Raise `ProcessError` (with the log tail) if a component died."""
        for process in self.processes():
            process.check_alive()

    # --- components ----------------------------------------------------------------------------------
    def _generate_certs(self) -> None:
        argv = certs_command(self.cert_dir)
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if result.returncode != 0:
            raise ProcessError(f"certificate generation failed ({' '.join(argv)}):\n{result.stderr}")

    def _start_cluster(self) -> GenericClient:
        options = self.options
        self.cluster = KubeCluster(
            options.kube_cluster(),
            workdir=self.workdir,
            cert_dir=self.cert_dir,
            log_dir=self.log_dir,
            startup_timeout=options.startup_timeout,
            chart_objects=self.chart_objects,
        )
        return self.cluster.start()

    def connection(self, component: str) -> Path:
        """The kubeconfig `component` (`webhook`, `resizer`) reaches kube-apiserver with: the token of its
        ServiceAccount, as the chart creates it."""
        if self.cluster is None:
            raise ProcessError("the stack is not started")
        return self.cluster.connection(component)

    def _ensure_release_namespace(self) -> None:
        """The namespace a Helm release lives in: exempt from the webhooks, holds the resizer's Lease."""
        try:
            self.client.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RELEASE_NAMESPACE}}
            )
        except KubeError as err:
            if not err.conflict:
                raise

    def _start_webhook(self) -> None:
        port = free_port()
        argv = webhook_command(
            port=port,
            cert_dir=self.cert_dir,
            server=None,
            kubeconfig=self.connection("webhook"),
            default_strategy=self.options.default_strategy,
            jobset_takeover=self.options.jobset_takeover,
            extra_args=[webhook_follower_shards_flag(self.chart_objects)],
        )
        self.webhook = ManagedProcess("webhook", argv, self.log_dir / "webhook.log")
        self.webhook.start()
        self.webhook_url = f"https://{LOCAL_HOST}:{port}"
        wait_http_ok(
            self.webhook, f"{self.webhook_url}/readyz", self.options.startup_timeout, ca_file=self.ca_file
        )

    def restart_webhook(self) -> None:
        """Stop the webhook and start it again on the same port (admissions fail while it is down)."""
        if self.webhook is None:
            raise ProcessError("the stack is not started")
        self.webhook.stop()
        self.webhook.start()
        wait_http_ok(
            self.webhook, f"{self.webhook_url}/readyz", self.options.startup_timeout, ca_file=self.ca_file
        )

    def register_webhooks(self) -> None:
        """Create (or replace) the chart's webhook configurations, pointed at the local webhook."""
        configurations = webhook_configurations(
            self.chart_objects, self.webhook_url, ca_bundle_b64(self.ca_file)
        )
        for configuration in configurations:
            self.client.create_or_replace(configuration)

    def add_resizer(self, extra_args: Sequence[str] = ()) -> ManagedProcess:
        """Start one more resizer replica (electing a leader through the Lease in the release namespace);
        `extra_args` are more resizer flags (e.g. `--all-or-nothing-timeout-seconds 2`)."""
        port = free_port()
        index = len(self.resizers)
        argv = resizer_command(
            server=None,
            kubeconfig=self.connection("resizer"),
            metrics_port=port,
            leader_elect=True,
            exempt_namespaces=resizer_exempt_namespaces(self.chart_objects),
            extra_args=[resizer_pin_followers_flag(self.chart_objects), *extra_args],
        )
        resizer = ManagedProcess(f"resizer-{index}", argv, self.log_dir / f"resizer-{index}.log")
        resizer.start()
        self.resizers.append(resizer)
        self.resizer_metrics_ports.append(port)
        wait_http_ok(resizer, self.resizer_readyz(index), self.options.startup_timeout)
        return resizer

    def resizer_readyz(self, index: int) -> str:
        return f"http://{LOCAL_HOST}:{self.resizer_metrics_ports[index]}/readyz"

    def resizer_roles(self) -> list[str]:
        """Per replica: "leader", "standby" (its /readyz body) or "down"."""
        roles: list[str] = []
        for index, resizer in enumerate(self.resizers):
            if not resizer.running:
                roles.append("down")
                continue
            try:
                response = httpx.get(self.resizer_readyz(index), timeout=2.0)
                roles.append(response.text.strip() if response.status_code == 200 else "down")
            except httpx.HTTPError:
                roles.append("down")
        return roles

    def resizer_metrics(self) -> list[str]:
        """The Prometheus /metrics page of every running resizer replica."""
        pages: list[str] = []
        for index, resizer in enumerate(self.resizers):
            if resizer.running:
                url = f"http://{LOCAL_HOST}:{self.resizer_metrics_ports[index]}/metrics"
                try:
                    pages.append(httpx.get(url, timeout=2.0).text)
                except httpx.HTTPError:
                    log.warning("resizer-%s /metrics unreachable", index)
        return pages

    def restart_resizer(self, index: int = 0, *, kill: bool = False) -> None:
        """Stop (SIGTERM, or SIGKILL with `kill`) resizer `index` and start it again on the same port."""
        resizer = self.resizers[index]
        if kill:
            resizer.kill()
        else:
            resizer.stop()
        resizer.start()
        wait_http_ok(resizer, self.resizer_readyz(index), self.options.startup_timeout)
