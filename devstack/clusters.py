"""`KubeCluster`: the real control plane built by `make kube` (devstack.controlplane), set up for a Stack.

On top of the control plane it creates the release namespace, the chart's RBAC and ValidatingAdmissionPolicies
as rendered, and a kubeconfig per component with the token of the chart's ServiceAccount for it: the webhook
and the resizer reach kube-apiserver as the chart's identities, so the real authorizer checks what the chart
grants. It offers the admin client, its processes (stopped by the Stack), the kubeconfig that connects each
component, and the admin kubeconfig a user can point kubectl at.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devstack.commands import RELEASE_NAMESPACE
from devstack.controlplane.cluster import KubeClusterOptions, KubeControlPlane
from devstack.controlplane.identities import (
    Identity,
    apply_objects,
    chart_identities,
    ensure_namespace,
    rbac_objects,
    write_kubeconfig,
)
from devstack.processes import ManagedProcess, ProcessError
from devstack.webhooks import admission_policies
from kubekit.generic import GenericClient

COMPONENTS = ("webhook", "resizer")


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

    def start(self) -> GenericClient:
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
                server=self.control_plane.component_server,
            )
        return client

    def component_kubeconfig(self, component: str) -> Path:
        return self.workdir / f"{component}.kubeconfig"

    def processes(self) -> list[ManagedProcess]:
        return self.control_plane.processes()

    def connection(self, component: str) -> Path:
        """The kubeconfig `component` (`webhook`, `resizer`) reaches kube-apiserver with."""
        return self.component_kubeconfig(component)

    def describe(self) -> str:
        options = self.control_plane.options
        versions = self.control_plane.versions
        return (
            f"Kubernetes {versions.kubernetes} (etcd {versions.etcd}, kwok {versions.kwok}, "
            f"JobSet {versions.jobset}; {options.nodes} nodes, {options.pools} pools)"
        )

    def close(self) -> None:
        self.control_plane.close()
