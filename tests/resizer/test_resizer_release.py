"""Per-Job state is released when the Job goes (issue 16): after a Job's objects leave the caches, every
structure of the resizer that grows with Jobs is empty again (`Resizer.footprint`), whatever path the Job
took (resized, never bound, deleted mid-retry, gated followers in dry-run)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from kubekit.client import KubeError
from kubekit.informer import Handler, Store
from kubekit.keys import object_key
from kubekit.projection import FieldProjection
from placement.cached_fields import LEADER_POD_FIELDS
from resizer.controller import FollowerHandler, JobHandler, LeaderHandler
from tests.resizer.test_resizer_controller import KEY, World, job, pod

Obj = dict[str, Any]


class Feed:
    """Delivers changes to a World as the resizer's informers do: the projected object into the store,
    then the handler (what `kubekit.informer.Informer._apply` does for ADDED/MODIFIED and DELETED)."""

    def __init__(self, world: World) -> None:
        self.world = world
        resizer = world.resizer
        self.routes: dict[str, tuple[Store, Handler, Callable[[Obj], Obj]]] = {
            "jobs": (world.caches.jobs, JobHandler(resizer), copy.deepcopy),
            "leaders": (world.caches.leaders, LeaderHandler(resizer), FieldProjection(LEADER_POD_FIELDS)),
            "followers": (world.caches.followers, FollowerHandler(resizer), copy.deepcopy),
        }

    def upsert(self, route: str, obj: Obj) -> Obj:
        store, handler, project = self.routes[route]
        kind = "jobs" if route == "jobs" else "pods"
        stored = project(self.world.kube.put(kind, obj))
        handler.on_upsert(store.upsert(stored), stored)
        return stored

    def delete(self, route: str, obj: Obj) -> None:
        store, handler, _project = self.routes[route]
        kind = "jobs" if route == "jobs" else "pods"
        meta = obj["metadata"]
        self.world.kube.objects.pop((kind, meta["namespace"], meta["name"]), None)
        old = store.delete(object_key(obj))
        if old is not None:
            handler.on_delete(old)

    def drain(self) -> None:
        """Work the queue as the workers do until nothing is queued or waiting."""
        queue = self.world.queue
        for _ in range(50):
            if not len(queue):
                return
            key = queue.get(timeout=0.5)
            if key is not None:
                try:
                    self.world.resizer.process(key)
                finally:
                    queue.done(key)


def follower(index: int) -> Obj:
    return pod(index, gated=True)


def resized_then_deleted(feed: Feed) -> None:
    feed.upsert("jobs", job())
    feed.upsert("leaders", pod(0))
    feed.drain()
    feed.upsert("leaders", pod(0, node="node-5"))
    feed.drain()
    assert feed.world.kube.stored("jobs", "team", "train-0")["spec"]["completions"] == 8
    feed.delete("jobs", job())
    feed.delete("leaders", pod(0))


def deleted_before_the_leader_bound(feed: Feed) -> None:
    feed.upsert("jobs", job())
    feed.upsert("leaders", pod(0))
    feed.drain()
    feed.delete("leaders", pod(0))
    feed.delete("jobs", job())
    feed.drain()


def deleted_mid_retry(feed: Feed) -> None:
    feed.upsert("jobs", job())
    feed.world.kube.fail_next.append(KubeError(503, "ServiceUnavailable"))
    feed.upsert("leaders", pod(0, node="node-5"))
    feed.world.resizer.process(KEY)
    assert feed.world.queue.failures(KEY) == 1
    feed.delete("jobs", job())
    feed.delete("leaders", pod(0))
    feed.drain()


def gated_followers_in_dry_run(feed: Feed) -> None:
    feed.upsert("jobs", job())
    feed.upsert("leaders", pod(0, node="node-5"))
    for index in (1, 2):
        feed.upsert("followers", follower(index))
    feed.drain()
    assert feed.world.resizer.footprint()["dry_run_notes"] == 3  # the resize and two releases noted once
    for index in (1, 2):
        feed.delete("followers", follower(index))
    feed.delete("jobs", job())
    feed.delete("leaders", pod(0))


def bound_leader_of_a_job_never_pending(feed: Feed) -> None:
    """A leader of a Job of another strategy: its bind time is noted, and forgotten with the leader."""
    feed.upsert("leaders", pod(0, node="node-5"))
    assert feed.world.resizer.footprint()["bind_times"] == 1
    feed.drain()
    feed.delete("leaders", pod(0))


@pytest.mark.parametrize(
    ("dry_run", "scenario"),
    [
        (False, resized_then_deleted),
        (False, deleted_before_the_leader_bound),
        (False, deleted_mid_retry),
        (True, gated_followers_in_dry_run),
        (False, bound_leader_of_a_job_never_pending),
    ],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_a_deleted_job_leaves_nothing_behind(dry_run: bool, scenario: Callable[[Feed], None]) -> None:
    world = World(dry_run=dry_run)
    feed = Feed(world)
    scenario(feed)
    feed.drain()
    assert world.resizer.footprint() == dict.fromkeys(world.resizer.footprint(), 0)


def test_footprint_counts_what_a_live_job_holds() -> None:
    """The check above cannot pass vacuously: a live Job shows up in the footprint."""
    world = World()
    feed = Feed(world)
    feed.upsert("jobs", job())
    feed.upsert("leaders", pod(0))
    feed.upsert("followers", follower(1))
    footprint = world.resizer.footprint()
    assert footprint["pending_jobs"] == footprint["leaders"] == footprint["followers"] == 1
    assert footprint["leader_index"] == footprint["follower_index"] == 1
    assert footprint["queue_queued"] == 1
