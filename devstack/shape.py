"""The shape of a devstack cluster, and the Node objects kwok runs for it.

`ClusterShape` is what a stack is asked for: `nodes` nodes split into `pools` contiguous node pools of equal
size (±1), each with `gpus_per_node` GPUs. `cluster_nodes` turns it into Node objects as a GKE GPU pool
labels them, so that each of the topology labels a Job may be made exclusive on has a meaning:

- `cloud.google.com/gke-nodepool`: the pool (`pool-00`, `pool-01`, ...), the examples' topology;
- `topology.kubernetes.io/zone`: one zone per pool, round-robin over three (GPU pools are single-zone);
- `topology.kubernetes.io/rack`: one rack per pool;
- `kubernetes.io/hostname`: the node itself.

Only the metadata and the capacity are built: kwok sets the conditions, addresses and heartbeats of the
nodes it runs (devstack.controlplane.kwok).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from placement.constants import GKE_NODEPOOL_LABEL, GPU_RESOURCE, HOSTNAME_LABEL, RACK_LABEL, ZONE_LABEL

ZONES: tuple[str, ...] = ("us-central1-a", "us-central1-b", "us-central1-c")
MAX_PODS_PER_NODE = 110
"""The kubelet's default `--max-pods`."""
NODE_CPU = "208"
NODE_MEMORY = "1872Gi"


@dataclass(frozen=True)
class ClusterShape:
    nodes: int = 32
    pools: int = 8
    gpus_per_node: int = 8

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.pools < 1:
            raise ValueError(f"nodes and pools must be >= 1, got nodes={self.nodes} pools={self.pools}")
        if self.pools > self.nodes:
            raise ValueError(f"pools ({self.pools}) cannot exceed nodes ({self.nodes})")
        if self.gpus_per_node < 0:
            raise ValueError(f"GPUs per node must be >= 0, got {self.gpus_per_node}")

    def describe(self) -> str:
        return f"{self.nodes} nodes, {self.pools} pools, {self.gpus_per_node} GPUs per node"


def pool_name(pool: int) -> str:
    return f"pool-{pool:02d}"


def pool_of(index: int, shape: ClusterShape) -> int:
    """The pool of node `index`: pools are contiguous and differ in size by one node at most."""
    return index * shape.pools // shape.nodes


def cluster_nodes(shape: ClusterShape, *, cluster_name: str) -> list[dict[str, Any]]:
    """Node objects for `shape`, named `gke-<cluster_name>-<pool>-<n>` (n counts inside the pool)."""
    nodes: list[dict[str, Any]] = []
    in_pool: dict[int, int] = {}
    for index in range(shape.nodes):
        pool = pool_of(index, shape)
        position = in_pool.get(pool, 0)
        in_pool[pool] = position + 1
        nodes.append(
            _node(f"gke-{cluster_name}-{pool_name(pool)}-{position:03d}", pool, gpus=shape.gpus_per_node)
        )
    return nodes


def _node(name: str, pool: int, *, gpus: int) -> dict[str, Any]:
    zone = ZONES[pool % len(ZONES)]
    resources = {
        "cpu": NODE_CPU,
        "memory": NODE_MEMORY,
        "pods": str(MAX_PODS_PER_NODE),
        "ephemeral-storage": "100Gi",
    }
    labels = {
        HOSTNAME_LABEL: name,
        ZONE_LABEL: zone,
        "topology.kubernetes.io/region": zone.rsplit("-", 1)[0],
        GKE_NODEPOOL_LABEL: pool_name(pool),
        RACK_LABEL: f"{pool_name(pool)}-rack-00",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "a3-highgpu-8g" if gpus else "n2-standard-96",
    }
    if gpus:
        resources[GPU_RESOURCE] = str(gpus)
        labels["cloud.google.com/gke-accelerator"] = "nvidia-h100-80gb"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }
