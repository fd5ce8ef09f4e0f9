"""The custom kinds devstack, the benchmarks and the kube tier address by name: JobSet and Kueue's.

Declared here for `kubekit.generic.GenericClient`, which names no one's CRDs; `stack_client` is how the
tools connect to the stack's cluster with them.
"""

from __future__ import annotations

from pathlib import Path

from kubekit.credentials import Credentials
from kubekit.generic import GenericClient
from kubekit.resources import ResourceType
from placement.constants import JOBSET_GROUP, JOBSET_VERSION
from placement.kueue import KUEUE_GROUP, KUEUE_VERSION, WORKLOADS

JOBSETS = f"apis/{JOBSET_GROUP}/{JOBSET_VERSION}"
KUEUE = f"apis/{KUEUE_GROUP}/{KUEUE_VERSION}"

STACK_KINDS: dict[str, ResourceType] = {
    "JobSet": ResourceType(JOBSETS, "jobsets", True),
    "Workload": ResourceType(KUEUE, WORKLOADS, True),
    "LocalQueue": ResourceType(KUEUE, "localqueues", True),
    "ClusterQueue": ResourceType(KUEUE, "clusterqueues", False),
    "ResourceFlavor": ResourceType(KUEUE, "resourceflavors", False),
    "Topology": ResourceType(KUEUE, "topologies", False),
    "WorkloadPriorityClass": ResourceType(KUEUE, "workloadpriorityclasses", False),
}


def stack_client(kubeconfig: Path, *, timeout: float = 30.0) -> GenericClient:
    """A client as the kubeconfig's user, knowing the stack's custom kinds."""
    return GenericClient.from_kubeconfig(kubeconfig, timeout=timeout, kinds=STACK_KINDS)


def stack_client_at(server: str, credentials: Credentials, *, timeout: float = 30.0) -> GenericClient:
    """A client with `credentials` (a ServiceAccount's token), knowing the stack's custom kinds."""
    return GenericClient.connect(server, credentials=credentials, timeout=timeout, kinds=STACK_KINDS)
