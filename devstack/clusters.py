"""The two control planes a `Stack` runs on, behind one interface.

- `KubesimCluster` (`--control-plane kubesim`, the default): kubesim, one Python process; the webhook and
  the resizer reach it by plain URL with no credentials.
- `KubeCluster` (`--control-plane kube`): the real control plane built by `make kube` (devstack.controlplane);
  the webhook and the resizer reach it as the chart's ServiceAccounts, with tokens, under the chart's RBAC
  as rendered, so the real authorizer checks what the chart grants.

Each offers the admin client, its processes (stopped by the Stack), the flags that connect a component,
and a kubeconfig a user can point kubectl at.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Protocol

from devstack.commands import RELEASE_NAMESPACE, KubesimFlags, kubesim_command
from devstack.controlplane.cluster import KubeClusterOptions, KubeControlPlane
from devstack.controlplane.identities import (
    Identity,
    apply_objects,
    chart_identities,
    ensure_namespace,
    rbac_objects,
    write_kubeconfig,
)
from devstack.kube import KubeClient
from devstack.processes import ManagedProcess, ProcessError
from devstack.readiness import wait_for_log_line, wait_http_ok
from devstack.webhooks import admission_policies

KUBESIM_LISTENING = re.compile(r"kubesim listening on (?P<url>http://\S+) kubeconfig=(?P<kubeconfig>\S+)")
CONTROL_PLANES = ("kubesim", "kube")
COMPONENTS = ("webhook", "resizer")


class Cluster(Protocol):
    server: str
    kubeconfig: Path

    def start(self) -> KubeClient: ...

    def processes(self) -> list[ManagedProcess]: ...

    def connection(self, component: str) -> tuple[str | None, Path | None]:
        """How `component` (`webhook`, `resizer`) reaches the API server: a plain URL or a kubeconfig."""
        ...

    def describe(self) -> str: ...

    def close(self) -> None: ...


class KubesimCluster:
    def __init__(
        self,
        flags: KubesimFlags,
        *,
        workdir: Path,
        log_dir: Path,
        startup_timeout: float,
        extra_args: tuple[str, ...],
    ) -> None:
        self.flags = flags
        self.workdir = workdir
        self.log_dir = log_dir
        self.startup_timeout = startup_timeout
        self.extra_args = extra_args
        self.server = ""
        self.kubeconfig = Path()
        self.process: ManagedProcess | None = None

    def start(self) -> KubeClient:
        argv = kubesim_command(
            self.flags, port=0, kubeconfig=self.workdir / "kubeconfig", extra_args=self.extra_args
        )
        self.process = ManagedProcess("kubesim", argv, self.log_dir / "kubesim.log")
        self.process.start()
        match = wait_for_log_line(self.process, KUBESIM_LISTENING, self.startup_timeout)
        self.server = match["url"]
        self.kubeconfig = Path(match["kubeconfig"])
        wait_http_ok(self.process, f"{self.server}/version", self.startup_timeout)
        return KubeClient(self.server)

    def processes(self) -> list[ManagedProcess]:
        return [self.process] if self.process is not None else []

    def connection(self, component: str) -> tuple[str | None, Path | None]:
        del component
        return self.server, None

    def describe(self) -> str:
        flags = self.flags
        return f"kubesim ({flags.nodes} nodes, {flags.pools} pools, time scale {flags.time_scale:g})"

    def close(self) -> None:
        return None


class KubeCluster:
    def __init__(
        self,
        options: KubeClusterOptions,
        *,
        workdir: Path,
        cert_dir: Path,
        log_dir: Path,
        startup_timeout: float,
        chart_objects: list[dict[str, Any]],
    ) -> None:
        self.control_plane = KubeControlPlane(
            options, workdir=workdir, cert_dir=cert_dir, log_dir=log_dir, startup_timeout=startup_timeout
        )
        self.workdir = workdir
        self.chart_objects = chart_objects
        self.identities: dict[str, Identity] = {}
        self.server = ""
        self.kubeconfig = self.control_plane.kubeconfig

    def start(self) -> KubeClient:
        client = self.control_plane.start()
        self.server = client.server
        ensure_namespace(client, RELEASE_NAMESPACE)
        apply_objects(client, rbac_objects(self.chart_objects))
        apply_objects(client, admission_policies(self.chart_objects))
        self.identities = chart_identities(self.chart_objects)
        missing = [component for component in COMPONENTS if component not in self.identities]
        if missing:
            raise ProcessError(f"the chart renders no ServiceAccount for {', '.join(missing)}")
        for component in COMPONENTS:
            write_kubeconfig(
                client,
                self.identities[component],
                self.control_plane.ca_file,
                self.component_kubeconfig(component),
            )
        return client

    def component_kubeconfig(self, component: str) -> Path:
        return self.workdir / f"{component}.kubeconfig"

    def processes(self) -> list[ManagedProcess]:
        return self.control_plane.processes()

    def connection(self, component: str) -> tuple[str | None, Path | None]:
        return None, self.component_kubeconfig(component)

    def describe(self) -> str:
        options = self.control_plane.options
        versions = self.control_plane.versions
        return (
            f"Kubernetes {versions.kubernetes} (etcd {versions.etcd}, kwok {versions.kwok}, "
            f"JobSet {versions.jobset}; {options.nodes} nodes, {options.pools} pools)"
        )

    def close(self) -> None:
        self.control_plane.close()
