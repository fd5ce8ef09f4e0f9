"""Generated Node objects: node pools spread over zones, racks inside pools, GPU capacity, Ready.

Nodes are grouped into `pools` contiguous node pools (GKE-style `cloud.google.com/gke-nodepool`), each pool
lives in one zone (pools are assigned to zones round-robin, as GPU/TPU pools usually are single-zone) and is
split into `racks_per_pool` racks. Any of the four topology labels can serve as the exclusive topology key.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from placement.constants import (
    GKE_NODEPOOL_LABEL,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    RACK_LABEL,
    ZONE_LABEL,
)

DEFAULT_ZONES: tuple[str, ...] = ("us-central1-a", "us-central1-b", "us-central1-c")
MAX_PODS_PER_NODE = 110
"""The kubelet's default `--max-pods`."""

_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The alphabet Kubernetes uses for generated name suffixes (no vowels, no confusable digits)."""


def pool_name(pool: int) -> str:
    return f"pool-{pool:02d}"


def rack_name(pool: int, rack: int) -> str:
    return f"{pool_name(pool)}-rack-{rack:02d}"


def make_nodes(
    count: int,
    pools: int,
    *,
    gpus_per_node: int = 8,
    cpu: str = "208",
    memory: str = "1872Gi",
    zones: tuple[str, ...] = DEFAULT_ZONES,
    racks_per_pool: int = 1,
    seed: int = 0,
    cluster_name: str = "kubesim",
) -> list[dict[str, Any]]:
    """`count` Ready nodes split into `pools` equal (±1) contiguous pools; names are seeded and stable."""
    if count < 1:
        raise ValueError(f"node count must be at least 1, got {count}")
    if not 1 <= pools <= count:
        raise ValueError(f"pools must be between 1 and the node count ({count}), got {pools}")
    if racks_per_pool < 1:
        raise ValueError(f"racks_per_pool must be at least 1, got {racks_per_pool}")
    if gpus_per_node < 0:
        raise ValueError(f"gpus_per_node must not be negative, got {gpus_per_node}")
    if not zones:
        raise ValueError("at least one zone is required")
    rng = random.Random(seed)
    pool_ids = [rng.getrandbits(32) for _ in range(pools)]
    nodes: list[dict[str, Any]] = []
    for index in range(count):
        pool = index * pools // count
        first_in_pool = -(-pool * count // pools)
        next_pool_first = -(-(pool + 1) * count // pools)
        position = index - first_in_pool
        rack = position * racks_per_pool // (next_pool_first - first_in_pool)
        suffix = "".join(rng.choice(_SUFFIX_ALPHABET) for _ in range(4))
        name = f"gke-{cluster_name}-{pool_name(pool)}-{pool_ids[pool]:08x}-{suffix}"
        nodes.append(
            _node(
                name=name,
                zone=zones[pool % len(zones)],
                pool=pool_name(pool),
                rack=rack_name(pool, rack),
                gpus=gpus_per_node,
                cpu=cpu,
                memory=memory,
                address=f"10.{(index >> 16) & 255}.{(index >> 8) & 255}.{index & 255}",
            )
        )
    return nodes


def _node(
    *, name: str, zone: str, pool: str, rack: str, gpus: int, cpu: str, memory: str, address: str
) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": memory, "pods": str(MAX_PODS_PER_NODE), "ephemeral-storage": "100Gi"}
    labels = {
        HOSTNAME_LABEL: name,
        ZONE_LABEL: zone,
        "topology.kubernetes.io/region": zone.rsplit("-", 1)[0],
        GKE_NODEPOOL_LABEL: pool,
        RACK_LABEL: rack,
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
        "spec": {"providerID": f"gce://kubesim/{zone}/{name}"},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [
                _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
                _condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "sufficient memory"),
                _condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "no disk pressure"),
                _condition("PIDPressure", "False", "KubeletHasSufficientPID", "sufficient PID"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {  # every field the official client's V1NodeSystemInfo requires
                "machineID": hashlib.sha256(name.encode()).hexdigest()[:32],
                "systemUUID": hashlib.sha256(name.encode()).hexdigest()[32:64],
                "bootID": hashlib.sha256(name.encode()).hexdigest()[:36],
                "kernelVersion": "6.1.100+",
                "osImage": "Container-Optimized OS from Google",
                "kubeProxyVersion": "v1.33.0",
                "kubeletVersion": "v1.33.0",
                "containerRuntimeVersion": "containerd://1.7.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": message}
