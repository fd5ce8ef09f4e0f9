"""The leader directory (informers of leader pods and nodes, live lookup on a miss) against the fake API
server over real HTTP. The informer itself is tested in tests/kubekit."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from placement.admission import LeaderStatus, PodPlan, plan_pod
from placement.constants import Strategy
from tests.support.fake_api import FakeKubeApi
from tests.support.metrics import sample
from tests.support.waiting import eventually
from tests.webhook.webhook_support import leader_from_fixture, node_obj, settings_for
from webhook.cache import LeaderDirectory
from webhook.metrics import Metrics
from webhook.server import build_directory, kube_for


def _follower_plan() -> PodPlan:
    from tests.webhook.webhook_support import fixture_review

    review = fixture_review("follower-pod.json")
    plan = plan_pod(review["request"]["object"], review["request"]["namespace"], Strategy.ELASTIC)
    assert isinstance(plan, PodPlan)
    return plan


class Harness:
    def __init__(self, api: FakeKubeApi, watch_timeout: int = 5) -> None:
        self.metrics = Metrics()
        settings = settings_for(api.url, watch_timeout_seconds=watch_timeout)
        self.directory: LeaderDirectory = build_directory(settings, self.metrics, kube_for(settings))
        self.pods = self.directory.pods
        self.nodes = self.directory.nodes

    def sample(self, name: str, labels: dict[str, str]) -> float:
        return sample(self.metrics.registry, name, **labels)


@pytest.fixture
def harness(fake_api: FakeKubeApi) -> Iterator[Harness]:
    h = Harness(fake_api)
    yield h
    h.directory.stop()


def test_informers_sync_and_follow_watch_events(fake_api: FakeKubeApi, harness: Harness) -> None:
    fake_api.put("nodes", node_obj("node-1", "pool-a"))
    harness.directory.start()
    eventually(harness.directory.ready, "the informers synced")
    plan = _follower_plan()
    assert harness.directory.from_cache(plan) is None

    leader = fake_api.put("pods", leader_from_fixture(None))
    eventually(lambda: len(harness.pods.store) == 1, "the leader cached")
    assert harness.directory.from_cache(plan) is None  # known but not bound: not a hit

    leader["spec"]["nodeName"] = "node-1"
    fake_api.put("pods", leader)
    eventually(lambda: harness.directory.from_cache(plan) is not None, "the bound leader cached")
    state = asyncio.run(harness.directory.leader_state(plan))
    assert (state.status, state.domain) == (LeaderStatus.BOUND, "pool-a")

    fake_api.delete("pods", leader)
    eventually(lambda: len(harness.pods.store) == 0, "the leader gone from the cache")
    assert harness.directory.from_cache(plan) is None


def test_only_leader_pods_are_cached(fake_api: FakeKubeApi, harness: Harness) -> None:
    follower = leader_from_fixture("node-1")
    follower["metadata"]["name"] = "a-follower"
    follower["metadata"]["labels"]["exclusive-placement.io/role"] = "follower"
    fake_api.put("pods", follower)
    fake_api.put("pods", leader_from_fixture("node-1"))
    harness.directory.start()
    eventually(harness.directory.ready, "the informers synced")
    assert len(harness.pods.store) == 1


def test_cache_miss_makes_one_live_lookup(fake_api: FakeKubeApi, harness: Harness) -> None:
    # Informers never started: every lookup misses and goes live over HTTP.
    fake_api.put("nodes", node_obj("node-1", "pool-b"))
    fake_api.put("pods", leader_from_fixture("node-1"))
    before = dict(fake_api.requests)
    state = asyncio.run(harness.directory.leader_state(_follower_plan()))
    assert (state.status, state.domain) == (LeaderStatus.BOUND, "pool-b")
    assert fake_api.requests["list"] - before.get("list", 0) == 1
    assert fake_api.requests["get"] - before.get("get", 0) == 1
    assert harness.sample("exclusive_placement_leader_cache_total", {"result": "miss"}) == 1
    assert harness.sample("exclusive_placement_live_lookups_total", {"kind": "pod", "outcome": "found"}) == 1
    assert harness.sample("exclusive_placement_live_lookups_total", {"kind": "node", "outcome": "found"}) == 1


def test_live_lookup_reports_missing_leader_and_missing_node(fake_api: FakeKubeApi, harness: Harness) -> None:
    plan = _follower_plan()
    assert asyncio.run(harness.directory.leader_state(plan)).status is LeaderStatus.NOT_FOUND
    fake_api.put("pods", leader_from_fixture("node-gone"))
    state = asyncio.run(harness.directory.leader_state(plan))
    assert (state.status, state.node_name) == (LeaderStatus.NODE_MISSING, "node-gone")
    assert (
        harness.sample("exclusive_placement_live_lookups_total", {"kind": "node", "outcome": "not_found"})
        == 1
    )


def test_leaders_of_a_previous_job_uid_are_ignored(fake_api: FakeKubeApi, harness: Harness) -> None:
    stale = leader_from_fixture("node-1")
    stale["metadata"]["ownerReferences"][0]["uid"] = "uid-of-the-deleted-job"
    fake_api.put("nodes", node_obj("node-1", "pool-a"))
    fake_api.put("pods", stale)
    harness.directory.start()
    eventually(
        lambda: len(harness.pods.store) == 1 and len(harness.nodes.store) == 1, "the pod and the node cached"
    )
    assert harness.directory.from_cache(_follower_plan()) is None
    assert asyncio.run(harness.directory.leader_state(_follower_plan())).status is LeaderStatus.NOT_FOUND


def test_watch_restarts_and_cache_sizes_are_counted(fake_api: FakeKubeApi) -> None:
    harness = Harness(fake_api, watch_timeout=1)
    try:
        harness.directory.start()
        eventually(harness.directory.ready, "the informers synced")
        fake_api.put("nodes", node_obj("node-1", "pool-a"))
        eventually(
            lambda: harness.sample("exclusive_placement_cache_objects", {"kind": "nodes"}) == 1,
            "one node cached",
        )
        fake_api.compact()  # the next watch (after the 1 s server timeout) resumes from a forgotten version
        restarts = "exclusive_placement_watch_restarts_total"
        eventually(
            lambda: harness.sample(restarts, {"informer": "nodes", "reason": "gone"}) >= 1,
            "a watch restart on 410",
        )
        assert harness.sample("exclusive_placement_cache_objects", {"kind": "pods"}) == 0
    finally:
        harness.directory.stop()


def test_caches_keep_only_what_the_rules_read(fake_api: FakeKubeApi, harness: Harness) -> None:
    """Issue 16: a node's status, images and annotations and a leader pod's spec, status and foreign
    labels are never stored, from the list or from a watch event (a node's cordon and allocatable are read on
    arrival, beside it); the lookup still hits."""
    node = node_obj("node-1", "pool-a")
    node["metadata"]["annotations"] = {"big": "x" * 1000}
    node["status"] = {"images": [{"names": ["image"], "sizeBytes": 1}], "capacity": {"cpu": "8"}}
    fake_api.put("nodes", node)
    leader = leader_from_fixture("node-1")
    leader["metadata"]["labels"]["team"] = "research"
    leader["metadata"]["annotations"]["note"] = "y" * 1000
    harness.directory.start()
    eventually(harness.directory.ready, "the informers synced")
    fake_api.put("pods", leader)
    eventually(lambda: harness.directory.from_cache(_follower_plan()) is not None, "the bound leader cached")
    cached_node = harness.nodes.store.get("node-1") or {}
    assert set(cached_node) == {"metadata"}
    assert set(cached_node["metadata"]) <= {"name", "resourceVersion", "labels"}
    (cached_pod,) = harness.pods.store.items()
    assert set(cached_pod) <= {"metadata", "spec", "status"}
    assert set(cached_pod["spec"]) == {"nodeName"}
    assert set(cached_pod["status"]) == {"phase"}
    assert "team" not in cached_pod["metadata"]["labels"]
    assert "note" not in cached_pod["metadata"]["annotations"]
    assert "managedFields" not in cached_pod["metadata"]


def test_nodes_are_listed_and_watched_whole_for_their_allocatable(harness: Harness) -> None:
    """The capacity warnings read a node's allocatable and cordon, which PartialObjectMetadata lacks: whole
    nodes are listed and watched, and the projection trims them (above)."""
    assert not harness.nodes.metadata_only
    assert not harness.pods.metadata_only
