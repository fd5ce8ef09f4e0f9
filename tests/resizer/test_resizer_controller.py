"""The reconciler against an in-memory API (fakes, not mocks): resize once, conflicts, retries, gates."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubekit.client import KubeError
from placement.constants import (
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    LEADER_SCHEDULED_GATE,
    RESIZE_LABEL,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
)
from placement.resize import has_gate
from resizer.controller import Resizer, new_caches
from resizer.metrics import Metrics
from resizer.workqueue import WorkQueue
from tests.resizer.resizer_fakes import FakeKube

POOL = "cloud.google.com/gke-nodepool"
KEY = "team/train-0"


class Switch:
    def __init__(self, leader: bool = True) -> None:
        self.leader = leader

    def is_leader(self) -> bool:
        return self.leader


def job(**labels: str) -> dict[str, Any]:
    return {
        "kind": "Job",
        "metadata": {
            "name": "train-0",
            "namespace": "team",
            "uid": "job-uid",
            "labels": {RESIZE_LABEL: "pending", **labels},
            "annotations": {TARGET_COMPLETIONS_ANNOTATION: "8", TARGET_PARALLELISM_ANNOTATION: "8"},
        },
        "spec": {"completionMode": "Indexed", "completions": 1, "parallelism": 1},
    }


def pod(index: int, node: str | None = None, gated: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if node:
        spec["nodeName"] = node
    if gated:
        spec["schedulingGates"] = [{"name": LEADER_SCHEDULED_GATE}]
    return {
        "kind": "Pod",
        "metadata": {
            "name": f"train-0-{index}",
            "namespace": "team",
            "annotations": {
                JOB_COMPLETION_INDEX_ANNOTATION: str(index),
                JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: POOL,
            },
            "ownerReferences": [{"kind": "Job", "name": "train-0", "uid": "job-uid", "controller": True}],
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


class World:
    def __init__(self, *, leader: bool = True, dry_run: bool = False) -> None:
        self.kube = FakeKube()
        self.caches = new_caches()
        self.queue = WorkQueue(base_delay=0.01)
        self.metrics = Metrics()
        self.switch = Switch(leader)
        self.resizer = Resizer(
            self.kube,  # type: ignore[arg-type]
            self.caches,
            self.queue,
            self.metrics,
            self.switch,
            dry_run=dry_run,
            wall_clock=lambda: "2026-05-01T10:00:00Z",
        )
        self.kube.put("nodes", {"metadata": {"name": "node-5", "labels": {POOL: "pool-2"}}})

    def add_job(self, obj: dict[str, Any]) -> dict[str, Any]:
        stored = self.kube.put("jobs", obj)
        self.caches.jobs.upsert(stored)
        return stored

    def add_pod(self, obj: dict[str, Any], store: str) -> dict[str, Any]:
        stored = self.kube.put("pods", obj)
        getattr(self.caches, store).upsert(stored)
        return stored

    def metric(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(f"exclusive_placement_resizer_{name}", labels)
        return value or 0.0


def test_pending_job_is_resized_once_when_leader_is_bound() -> None:
    world = World()
    world.add_job(job())
    world.add_pod(pod(0, node="node-5"), "leaders")
    world.resizer.process(KEY)
    world.resizer.process(KEY)
    stored = world.kube.stored("jobs", "team", "train-0")
    assert (stored["spec"]["completions"], stored["spec"]["parallelism"]) == (8, 8)
    assert stored["metadata"]["labels"][RESIZE_LABEL] == "done"
    assert world.kube.count("patch") == 1
    assert world.metric("resizes_total") == 1


def test_waits_for_the_leader_to_bind() -> None:
    world = World()
    world.add_job(job())
    world.add_pod(pod(0), "leaders")
    world.resizer.process(KEY)
    assert world.kube.count("patch") == 0
    assert world.metric("skips_total", reason="leader-not-bound") == 1
    world.resizer.leader_seen(None, world.add_pod(pod(0, node="node-5"), "leaders"))
    world.resizer.process(KEY)
    assert world.kube.stored("jobs", "team", "train-0")["spec"]["completions"] == 8
    assert world.metric("bind_to_resize_seconds_count") == 1


def test_conflict_rereads_and_decides_again() -> None:
    world = World()
    cached = world.add_job(job())
    # Someone else changed the Job after our cache saw it (e.g. the Job controller's status write).
    world.kube.put("jobs", copy.deepcopy(cached))
    world.add_pod(pod(0, node="node-5"), "leaders")
    world.resizer.process(KEY)
    assert world.kube.stored("jobs", "team", "train-0")["spec"]["completions"] == 8
    assert world.kube.count("patch") == 2  # the stale one (409) and the fresh one
    assert world.metric("conflicts_total") == 1


def test_job_already_resized_elsewhere_is_not_patched_again() -> None:
    world = World()
    cached = world.add_job(job())
    done = copy.deepcopy(cached)
    done["metadata"]["labels"][RESIZE_LABEL] = "done"
    done["spec"].update(completions=8, parallelism=8)
    world.kube.put("jobs", done)
    world.add_pod(pod(0, node="node-5"), "leaders")
    world.resizer.process(KEY)
    assert world.kube.count("patch") == 1  # refused with 409, then re-read: already done
    assert world.metric("resizes_total") == 0
    assert world.caches.jobs.get(KEY) is None


@pytest.mark.parametrize(("status", "reason"), [(429, "429"), (500, "500"), (None, "connection")])
def test_transient_errors_are_retried_with_backoff(status: int | None, reason: str) -> None:
    world = World()
    world.add_job(job())
    world.add_pod(pod(0, node="node-5"), "leaders")
    world.kube.fail_next.append(KubeError(status, "Transient"))
    world.resizer.process(KEY)
    assert world.metric("retries_total", reason=reason) == 1
    assert world.queue.failures(KEY) == 1
    assert world.queue.get(timeout=2) == KEY
    world.resizer.process(KEY)
    assert world.kube.stored("jobs", "team", "train-0")["spec"]["completions"] == 8
    assert world.queue.failures(KEY) == 0


def test_job_deleted_meanwhile_is_dropped_quietly() -> None:
    world = World()
    world.add_job(job())
    world.add_pod(pod(0, node="node-5"), "leaders")
    del world.kube.objects[("jobs", "team", "train-0")]
    world.resizer.process(KEY)
    assert world.caches.jobs.get(KEY) is None
    assert world.queue.failures(KEY) == 0
    assert world.metric("errors_total", reason="404") == 0


def test_forbidden_is_an_error_not_a_retry() -> None:
    world = World()
    world.add_job(job())
    world.add_pod(pod(0, node="node-5"), "leaders")
    world.kube.fail_next.append(KubeError(403, "Forbidden"))
    world.resizer.process(KEY)
    assert world.metric("errors_total", reason="403") == 1
    assert world.queue.failures(KEY) == 0


def test_standby_and_dry_run_do_not_patch() -> None:
    for world in (World(leader=False), World(dry_run=True)):
        world.add_job(job())
        world.add_pod(pod(0, node="node-5"), "leaders")
        world.resizer.process(KEY)
        assert world.kube.count("patch") == 0
        assert world.kube.stored("jobs", "team", "train-0")["spec"]["completions"] == 1


def test_becoming_leader_enqueues_pending_and_gated_work() -> None:
    world = World(leader=False)
    world.add_job(job())
    other = pod(1, gated=True)
    other["metadata"]["ownerReferences"][0]["name"] = "train-1"
    world.add_pod(other, "followers")
    world.resizer.enqueue_all()
    assert {world.queue.get(timeout=0), world.queue.get(timeout=0)} == {KEY, "team/train-1"}


def test_gated_followers_are_pinned_to_the_leader_domain_and_released() -> None:
    world = World()
    world.add_pod(pod(0, node="node-5"), "leaders")
    for index in (1, 2, 3):
        world.add_pod(pod(index, gated=True), "followers")
    world.resizer.process(KEY)
    for index in (1, 2, 3):
        stored = world.kube.stored("pods", "team", f"train-0-{index}")
        assert stored["spec"]["nodeSelector"] == {POOL: "pool-2"}
        assert stored["spec"]["schedulingGates"] == []
    assert world.metric("gate_releases_total") == 3
    # kept, now pinned, until they bind: a leader re-created elsewhere would have them repaired
    assert not any(has_gate(follower) for follower in world.caches.followers.items())
    assert world.kube.count("get") == 1  # the leader's node, once


def test_gate_release_retries_when_gates_changed_under_it() -> None:
    world = World()
    world.add_pod(pod(0, node="node-5"), "leaders")
    cached = world.add_pod(pod(1, gated=True), "followers")
    changed = copy.deepcopy(cached)
    changed["spec"]["schedulingGates"].insert(0, {"name": "kueue.x-k8s.io/topology"})
    world.kube.put("pods", changed)
    world.resizer.process(KEY)
    stored = world.kube.stored("pods", "team", "train-0-1")
    assert stored["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    assert stored["spec"]["nodeSelector"] == {POOL: "pool-2"}
    assert world.metric("conflicts_total") == 1


def test_gated_followers_wait_for_the_leader() -> None:
    world = World()
    world.add_pod(pod(0), "leaders")
    world.add_pod(pod(1, gated=True), "followers")
    world.resizer.process(KEY)
    assert world.kube.count("patch") == 0
    assert world.metric("skips_total", reason="leader-not-bound") == 1


# --- repair: JobSet's pod reconciler, for followers pinned to a domain their leader left ------------------


def pinned(index: int, pool: str) -> dict[str, Any]:
    follower = pod(index)
    follower["metadata"]["uid"] = f"pod-uid-{index}"
    follower["spec"]["nodeSelector"] = {POOL: pool}
    return follower


def repair_world(*, dry_run: bool = False) -> World:
    """The leader was re-created and bound in pool-2; followers 1-2 still pinned to the old pool-1."""
    world = World(dry_run=dry_run)
    world.add_pod(pod(0, node="node-5"), "leaders")
    world.add_pod(pinned(1, "pool-1"), "followers")
    world.add_pod(pinned(2, "pool-1"), "followers")
    world.add_pod(pinned(3, "pool-2"), "followers")
    return world


def test_followers_pinned_where_the_leader_no_longer_is_are_marked_then_deleted() -> None:
    world = repair_world()
    world.resizer.process(KEY)
    assert sorted(p["metadata"]["name"] for p in world.kube.deleted) == ["train-0-1", "train-0-2"]
    for deleted in world.kube.deleted:
        (condition,) = deleted["status"]["conditions"]
        assert (condition["type"], condition["status"], condition["reason"]) == (
            "DisruptionTarget",
            "True",
            "ExclusivePlacementViolation",
        )
        assert condition["lastTransitionTime"] == "2026-05-01T10:00:00Z"
    assert world.kube.stored("pods", "team", "train-0-3")["spec"]["nodeSelector"] == {POOL: "pool-2"}
    # the leader is read again before anything is deleted; each follower: status first, then delete
    verbs = [verb for verb, _ in world.kube.calls]
    assert verbs == ["get", "get", "patch-status", "delete", "patch-status", "delete"]
    assert world.kube.calls[1] == ("get", "pods/train-0-0")
    assert world.metric("follower_repairs_total") == 2
    assert len(world.caches.followers) == 1
    world.resizer.process(KEY)
    assert world.metric("follower_repairs_total") == 2


def test_a_stale_copy_of_a_repaired_follower_is_not_counted_again() -> None:
    world = repair_world()
    world.resizer.process(KEY)
    # a late watch event (the status write) puts the deleted follower back into the cache
    (stale,) = [p for p in world.kube.deleted if p["metadata"]["name"] == "train-0-1"]
    world.caches.followers.upsert(copy.deepcopy(stale))
    world.resizer.process(KEY)
    assert world.metric("follower_repairs_total") == 2
    assert world.kube.calls[6:] == [("get", "pods/train-0-0"), ("get", "pods/train-0-1")]  # read, gone
    assert len(world.caches.followers) == 1


def test_a_stale_copy_of_a_follower_still_terminating_is_neither_deleted_nor_counted_again() -> None:
    """A pod with a grace period stays, terminating, after the delete; a late watch event puts its copy
    from before the delete back into the cache. The status write returns the pod as it is: terminating."""
    world = repair_world()
    world.kube.graceful_deletes = True
    world.resizer.process(KEY)
    assert world.metric("follower_repairs_total") == 2
    stale = copy.deepcopy(world.kube.deleted[0])
    assert "deletionTimestamp" not in stale["metadata"]
    world.caches.followers.upsert(stale)
    deletes = world.kube.count("delete")
    world.resizer.process(KEY)
    assert world.kube.count("delete") == deletes
    assert world.metric("follower_repairs_total") == 2
    assert stale["metadata"]["name"] not in {p["metadata"]["name"] for p in world.caches.followers.items()}


def test_a_leaders_node_is_read_from_the_node_informer_when_it_has_it() -> None:
    """The all-or-nothing queue's node informer already holds every node's labels: no GET per node."""
    world = repair_world()
    world.caches.nodes.upsert({"metadata": {"name": "node-5", "labels": {POOL: "pool-2"}}})
    world.resizer.process(KEY)
    assert world.kube.count("delete") == 2
    assert ("get", "nodes/node-5") not in world.kube.calls


def test_no_repair_when_the_api_server_shows_another_leader_than_the_cache() -> None:
    world = repair_world()
    moved = pod(0, node="node-7")
    world.kube.put("pods", moved)  # the cache still has it on node-5
    world.resizer.process(KEY)
    assert world.kube.deleted == []
    assert world.kube.count("delete") == 0
    assert world.metric("follower_repairs_total") == 0


def test_no_repair_while_two_live_leaders_sit_in_different_domains() -> None:
    world = repair_world()
    world.kube.put("nodes", {"metadata": {"name": "node-7", "labels": {POOL: "pool-1"}}})
    duplicate = pod(0, node="node-7")
    duplicate["metadata"]["name"] = "train-0-0-dup"
    world.add_pod(duplicate, "leaders")
    world.resizer.process(KEY)
    assert world.kube.count("delete") == 0
    assert world.kube.count("patch-status") == 0


def test_dry_run_deletes_nothing() -> None:
    world = repair_world(dry_run=True)
    world.resizer.process(KEY)
    assert world.kube.count("delete") == 0
    assert world.kube.count("patch-status") == 0
    assert world.metric("follower_repairs_total") == 0


def test_a_follower_gone_before_the_status_write_is_dropped_quietly() -> None:
    world = repair_world()
    del world.kube.objects[("pods", "team", "train-0-1")]
    world.resizer.process(KEY)
    assert [p["metadata"]["name"] for p in world.kube.deleted] == ["train-0-2"]
    assert world.metric("errors_total", reason="404") == 0
