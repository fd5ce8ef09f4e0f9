"""Generated nodes: pools, zones, racks, capacity, readiness."""

from collections import Counter
from typing import Any

import pytest

from kubesim.cluster import make_nodes
from placement.constants import GKE_NODEPOOL_LABEL, GPU_RESOURCE, HOSTNAME_LABEL, RACK_LABEL, ZONE_LABEL


def test_nodes_are_split_evenly_into_pools_racks_and_zones() -> None:
    nodes = make_nodes(10, 3, racks_per_pool=2, zones=("z-a", "z-b"))
    pools = Counter(n["metadata"]["labels"][GKE_NODEPOOL_LABEL] for n in nodes)
    assert sorted(pools.values()) == [3, 3, 4]
    racks = Counter(n["metadata"]["labels"][RACK_LABEL] for n in nodes)
    assert len(racks) == 6
    assert all(rack.startswith("pool-0") for rack in racks)
    zone_of_pool = {
        n["metadata"]["labels"][GKE_NODEPOOL_LABEL]: n["metadata"]["labels"][ZONE_LABEL] for n in nodes
    }
    assert zone_of_pool == {"pool-00": "z-a", "pool-01": "z-b", "pool-02": "z-a"}
    for node in nodes:
        labels = node["metadata"]["labels"]
        assert labels[HOSTNAME_LABEL] == node["metadata"]["name"]
        assert node["status"]["allocatable"][GPU_RESOURCE] == "8"
        assert {"type": "Ready", "status": "True"}.items() <= node["status"]["conditions"][0].items()


def test_each_pool_lives_in_a_single_zone_and_racks_nest_in_pools() -> None:
    nodes = make_nodes(64, 8, racks_per_pool=4)
    for node in nodes:
        labels = node["metadata"]["labels"]
        assert labels[RACK_LABEL].startswith(labels[GKE_NODEPOOL_LABEL] + "-rack-")
    assert len({n["metadata"]["labels"][RACK_LABEL] for n in nodes}) == 32


def test_names_are_unique_and_seeded() -> None:
    first = [n["metadata"]["name"] for n in make_nodes(200, 4, seed=7)]
    assert len(set(first)) == 200
    assert first == [n["metadata"]["name"] for n in make_nodes(200, 4, seed=7)]
    assert first != [n["metadata"]["name"] for n in make_nodes(200, 4, seed=8)]


def test_cpu_only_nodes_have_no_gpu_resource() -> None:
    (node,) = make_nodes(1, 1, gpus_per_node=0)
    assert GPU_RESOURCE not in node["status"]["allocatable"]


@pytest.mark.parametrize(
    ("count", "pools", "kwargs", "message"),
    [
        (0, 1, {}, "node count"),
        (4, 5, {}, "pools must be between"),
        (4, 0, {}, "pools must be between"),
        (4, 2, {"racks_per_pool": 0}, "racks_per_pool"),
        (4, 2, {"zones": ()}, "zone"),
        (4, 2, {"gpus_per_node": -1}, "gpus_per_node"),
    ],
)
def test_bad_arguments_are_clear_errors(count: int, pools: int, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_nodes(count, pools, **kwargs)
