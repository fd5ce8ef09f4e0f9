"""The cluster shape a stack asks for, and the Node objects kwok runs for it."""

from __future__ import annotations

from collections import Counter

import pytest

from devstack.shape import ClusterShape, cluster_nodes
from placement.constants import GKE_NODEPOOL_LABEL, GPU_RESOURCE, HOSTNAME_LABEL, RACK_LABEL, ZONE_LABEL


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"nodes": 0}, "nodes and pools must be >= 1"),
        ({"pools": 0}, "nodes and pools must be >= 1"),
        ({"nodes": 2, "pools": 4}, r"pools \(4\) cannot exceed nodes \(2\)"),
        ({"gpus_per_node": -1}, "GPUs per node must be >= 0"),
    ],
)
def test_a_shape_that_cannot_be_built_is_refused(fields: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ClusterShape(**fields)


def test_nodes_are_split_into_contiguous_pools_differing_by_one_node_at_most() -> None:
    nodes = cluster_nodes(ClusterShape(nodes=10, pools=4), cluster_name="kwok")
    pools = [node["metadata"]["labels"][GKE_NODEPOOL_LABEL] for node in nodes]
    assert pools == sorted(pools)  # contiguous
    assert sorted(Counter(pools).values()) == [2, 2, 3, 3]
    assert sorted(Counter(pools)) == ["pool-00", "pool-01", "pool-02", "pool-03"]
    names = [node["metadata"]["name"] for node in nodes]
    assert len(set(names)) == 10
    assert names[:3] == ["gke-kwok-pool-00-000", "gke-kwok-pool-00-001", "gke-kwok-pool-00-002"]


def test_every_topology_label_names_a_domain_and_the_capacity_is_declared() -> None:
    nodes = cluster_nodes(ClusterShape(nodes=6, pools=6, gpus_per_node=4), cluster_name="c")
    for node in nodes:
        labels, status = node["metadata"]["labels"], node["status"]
        assert labels[HOSTNAME_LABEL] == node["metadata"]["name"]
        assert labels[RACK_LABEL] == f"{labels[GKE_NODEPOOL_LABEL]}-rack-00"
        assert status["capacity"] == status["allocatable"]
        assert status["capacity"][GPU_RESOURCE] == "4"
        assert status["capacity"]["pods"] == "110"
    zones = [node["metadata"]["labels"][ZONE_LABEL] for node in nodes]
    assert zones == ["us-central1-a", "us-central1-b", "us-central1-c"] * 2  # one zone per pool, round-robin


def test_nodes_without_gpus_declare_none() -> None:
    (node,) = cluster_nodes(ClusterShape(nodes=1, pools=1, gpus_per_node=0), cluster_name="c")
    assert GPU_RESOURCE not in node["status"]["capacity"]
    assert "cloud.google.com/gke-accelerator" not in node["metadata"]["labels"]
