"""The node search of a scheduling cycle (pure, on a scheduler cache): kubesim answers a nodeSelector from
its label index instead of visiting the nodes the selector rejects, and must still count, stop, rotate
and explain exactly like the node-by-node search upstream makes."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kubesim.controllers.filtering import NodeFinder
from kubesim.controllers.nodecache import SchedulerCache
from kubesim.controllers.podinfo import PodInfo
from kubesim.stats import Stats

Obj = dict[str, Any]


def _cluster(seed: int, count: int, pools: int) -> SchedulerCache:
    """`count` nodes in `pools` pools, a few cordoned or tainted, some already full."""
    rng = random.Random(seed)
    cache = SchedulerCache()
    for number in range(count):
        spec: Obj = {}
        if rng.random() < 0.05:
            spec["unschedulable"] = True
        if rng.random() < 0.05:
            spec["taints"] = [{"key": "dedicated", "value": rng.choice(["a", "b"]), "effect": "NoSchedule"}]
        name = f"node-{number:04d}"
        cache.set_node(
            {
                "metadata": {
                    "name": name,
                    "labels": {"pool": f"p{number % pools}", "kubernetes.io/hostname": name},
                },
                "spec": spec,
                "status": {
                    "allocatable": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8", "pods": "110"}
                },
            }
        )
        if rng.random() < 0.4:
            filler = {
                "metadata": {"name": f"filler-{number}", "namespace": "default"},
                "spec": _requests("8"),
            }
            cache.assign(f"default/filler-{number}", filler, name)
    return cache


def _requests(gpus: str) -> Obj:
    return {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": gpus}}}]}


def _pod(pool: str, by_selector: bool, tolerate: str | None) -> Obj:
    spec: Obj = _requests("1")
    if by_selector:
        spec["nodeSelector"] = {"pool": pool}
    else:
        expression = {"key": "pool", "operator": "In", "values": [pool]}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expression]}]
                }
            }
        }
    if tolerate:
        spec["tolerations"] = [{"key": "dedicated", "value": tolerate, "effect": "NoSchedule"}]
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec}


@pytest.mark.parametrize(
    ("seed", "count", "pools", "percentage"),
    [(1, 60, 6, 0), (2, 400, 6, 0), (3, 400, 2, 10), (4, 1200, 2, 20), (5, 1200, 12, 0)],
)
def test_the_selector_shortcut_searches_counts_and_explains_like_visiting_every_node(
    seed: int, count: int, pools: int, percentage: int
) -> None:
    """The same pod constraint as a nodeSelector (label index) and as required node affinity (node by node):
    same node chosen, same filter calls, same stop and next start, same Unschedulable message. With few
    pools and a low percentageOfNodesToScore the search stops before the end of the selected nodes."""
    rng = random.Random(seed)
    by_selector, by_affinity = Stats(), Stats()
    cache_a, cache_b = _cluster(seed, count, pools), _cluster(seed, count, pools)
    fast = NodeFinder(cache_a, by_selector, percentage, seed)
    slow = NodeFinder(cache_b, by_affinity, percentage, seed)
    for cycle in range(40):
        pool = f"p{rng.randrange(pools + 1)}"  # the last one selects no node at all
        tolerate = rng.choice([None, "a", "b"])
        chosen = fast.find(PodInfo.of(_pod(pool, True, tolerate)))
        expected = slow.find(PodInfo.of(_pod(pool, False, tolerate)))
        assert chosen == expected, cycle
        assert by_selector.scheduler_filter_evaluations == by_affinity.scheduler_filter_evaluations, cycle
        assert fast.next_start == slow.next_start, cycle
        if chosen.node is not None:
            pod = {"metadata": {"name": f"c{cycle}", "namespace": "default"}, "spec": _requests("1")}
            cache_a.assign(f"default/c{cycle}", pod, chosen.node)
            cache_b.assign(f"default/c{cycle}", pod, chosen.node)
    assert by_selector.scheduler_filter_evaluations > 0


def test_the_search_stops_after_enough_feasible_nodes_and_the_next_one_starts_there() -> None:
    """numFeasibleNodesToFind(1000 nodes) = 420 (50% - 1000/125 = 42%): a pod that fits everywhere visits
    420 nodes, 4 filter calls each (NodeUnschedulable, NodeName, TaintToleration, NodeResourcesFit)."""
    cache = SchedulerCache()
    for number in range(1000):
        cache.set_node(
            {
                "metadata": {"name": f"n{number:04d}", "labels": {}},
                "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}},
            }
        )
    stats = Stats()
    finder = NodeFinder(cache, stats, 0, 0)
    info = PodInfo.of(
        {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c"}]}}
    )
    assert finder.find(info).node is not None
    assert stats.scheduler_filter_evaluations == 420 * 4
    assert finder.next_start == 420
    finder.find(info)
    assert finder.next_start == 840


def _empty_nodes(count: int) -> SchedulerCache:
    cache = SchedulerCache()
    for number in range(count):
        cache.set_node(
            {
                "metadata": {"name": f"n{number}", "labels": {"pool": f"p{number % 2}"}},
                "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}},
            }
        )
    return cache


def test_equal_scores_are_broken_uniformly_at_random() -> None:
    """selectHost: every top-scored node is equally likely (reservoir sampling with the seeded RNG)."""
    finder = NodeFinder(_empty_nodes(4), Stats(), 0, 7)
    info = PodInfo.of(
        {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c"}]}}
    )
    picks = [finder.find(info).node for _ in range(400)]
    assert {name: picks.count(name) for name in sorted(set(picks), key=str)} == pytest.approx(
        {"n0": 100, "n1": 100, "n2": 100, "n3": 100}, abs=30
    )


def test_affinity_evaluations_count_prefilter_matches_and_filter_lookups() -> None:
    """PreFilter matches every placed pod against the pod's 2 terms and each placed pod's anti-affinity term
    against the pod; Filter looks up each term (and the existing-anti-affinity map) on each node it visits."""
    cache = _empty_nodes(4)
    anti = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "pool"}
    for number in range(3):
        placed = {"metadata": {"name": f"e{number}", "namespace": "default", "labels": {"app": "y"}}}
        placed["spec"] = {
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [anti]}}
        }
        cache.assign(f"default/e{number}", placed, f"n{number}")
    term = {"labelSelector": {"matchLabels": {"app": "y"}}, "topologyKey": "pool"}
    spec = {
        "containers": [{"name": "c"}],
        "affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [anti]},
        },
    }
    stats = Stats()
    info = PodInfo.of(
        {"metadata": {"name": "p", "namespace": "default", "labels": {"app": "z"}}, "spec": spec}
    )
    assert NodeFinder(cache, stats, 0, 0).find(info).node is not None
    assert stats.scheduler_affinity_evaluations == 3 * 2 + 3 + 4 * 2


# --- nominated pods: RunFilterPluginsWithNominatedPods, for NodeResourcesFit -----------------------------


def _one_node_nominated(nominated_priority: int) -> SchedulerCache:
    cache = SchedulerCache()
    cache.set_node(
        {
            "metadata": {"name": "node-a", "labels": {}},
            "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8", "pods": "110"}},
        }
    )
    preemptor = {"metadata": {"name": "high", "namespace": "default"}, "spec": _requests("8")}
    request = PodInfo.of(preemptor).request
    cache.set_nomination("default/high", "node-a", nominated_priority, request)
    return cache


@pytest.mark.parametrize(
    ("pod_priority", "nominated_priority", "fits"),
    [
        (10, 1000, False),  # a lower-priority pod may not take the node a preemptor was nominated to
        (1000, 1000, False),  # nor may one of equal priority (nominated pods of >= priority count)
        (2000, 1000, True),  # a higher-priority pod ignores the nomination, as upstream
    ],
)
def test_a_nominated_node_is_held_for_its_preemptor(
    pod_priority: int, nominated_priority: int, fits: bool
) -> None:
    cache = _one_node_nominated(nominated_priority)
    pod = {
        "metadata": {"name": "other", "namespace": "default"},
        "spec": {**_requests("8"), "priority": pod_priority},
    }
    result = NodeFinder(cache, Stats(), 0, seed=1).find(PodInfo.of(pod))
    assert (result.node == "node-a") is fits
    if not fits:
        assert result.message == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def test_the_preemptor_itself_is_not_held_off_by_its_own_nomination() -> None:
    cache = _one_node_nominated(1000)
    pod = {"metadata": {"name": "high", "namespace": "default"}, "spec": {**_requests("8"), "priority": 1000}}
    assert NodeFinder(cache, Stats(), 0, seed=1).find(PodInfo.of(pod)).node == "node-a"
    cache.set_nomination("default/high", None)
    other = {"metadata": {"name": "low", "namespace": "default"}, "spec": {**_requests("8"), "priority": 10}}
    assert NodeFinder(cache, Stats(), 0, seed=1).find(PodInfo.of(other)).node == "node-a"
