"""Per-Job state is released when the Job goes (issues 16 and 23): after a Job's objects leave the caches,
every structure of the resizer that grows with Jobs is empty again (`Resizer.footprint`), whatever path
the Job took: resized, never bound, deleted mid-retry, gated followers in dry-run, and all-or-nothing
JobSets released, waiting, timed out (also on a leader already gone), or only noted in dry-run. Every
change reaches the resizer through its own informers (`World.upsert`, `World.delete`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from placement.constants import TARGET_COMPLETIONS_ANNOTATION, TARGET_PARALLELISM_ANNOTATION
from resizer.gangs import GANG_KEY
from tests.resizer.resizer_world import (
    GANG_TIMEOUT,
    KEY,
    NS,
    T0,
    MakeWorld,
    World,
    gang_job,
    gang_pod,
    job,
    pod,
    resized_job,
)

Obj = dict[str, Any]

EVERY_STRUCTURE = {
    "pending_jobs",
    "leaders",
    "leader_index",
    "followers",
    "follower_index",
    "bind_times",
    "gangs",
    "gang_leaders",
    "gang_leaders_released",
    "gang_jobs",
    "holders",
    "resize_dry_run_notes",
    "resize_refusal_notes",
    "follower_dry_run_notes",
    "gang_dry_run_notes",
    "gang_blocked_notes",
    "gang_unfit_notes",
    "gang_stepped_over_notes",
    "gang_waiting_since",
    "gang_suspended",
    "finished_pinning",
    "retire_dry_run_notes",
    *(
        f"{controller}_queue_{part}"
        for controller in ("resize", "followers", "all-or-nothing", "retire")
        for part in ("queued", "dirty", "processing", "waiting", "failures")
    ),
}


FOUR_POOLS = {f"node-{i}": f"pool-{i}" for i in range(4)}


# --- one Job ---------------------------------------------------------------------------------------------


def resized_then_deleted(world: World) -> None:
    world.upsert("jobs", job())
    world.upsert("leaders", pod(0))
    world.drain()
    world.upsert("leaders", pod(0, node="node-5"))
    world.drain()
    assert world.api.stored("jobs", NS, "train-0")["spec"]["completions"] == 8
    world.delete("jobs", job())
    world.delete("leaders", pod(0))


def deleted_before_the_leader_bound(world: World) -> None:
    world.upsert("jobs", job())
    world.upsert("leaders", pod(0))
    world.drain()
    world.delete("leaders", pod(0))
    world.delete("jobs", job())


def deleted_mid_retry(world: World) -> None:
    world.upsert("jobs", job())
    world.api.fail_next(503)
    world.upsert("leaders", pod(0, node="node-5"))
    world.resizer.resize.process(KEY)
    assert world.resizer.resize.queue.failures(KEY) == 1
    world.delete("jobs", job())
    world.delete("leaders", pod(0))


def gated_followers_in_dry_run(world: World) -> None:
    world.upsert("jobs", job())
    world.upsert("leaders", pod(0, node="node-5"))
    for index in (1, 2):
        world.upsert("followers", pod(index, gated=True))
    world.drain()
    footprint = world.resizer.footprint()  # the resize and the two releases, each noted once
    assert (footprint["resize_dry_run_notes"], footprint["follower_dry_run_notes"]) == (1, 2)
    for index in (1, 2):
        world.delete("followers", pod(index, gated=True))
    world.delete("jobs", job())
    world.delete("leaders", pod(0))


def refused_then_deleted(world: World) -> None:
    """A target larger than the pod template's record: said once, forgotten with the Job."""
    forged = job()
    forged["metadata"]["annotations"].update(
        {TARGET_COMPLETIONS_ANNOTATION: "100000", TARGET_PARALLELISM_ANNOTATION: "100000"}
    )
    world.upsert("jobs", forged)
    world.upsert("leaders", pod(0, node="node-5"))
    world.drain()
    assert world.resizer.footprint()["resize_refusal_notes"] == 1
    world.delete("jobs", forged)
    world.delete("leaders", pod(0))


def finished_retired_then_deleted(world: World) -> None:
    """A finished Job labelled pin-followers: retired (the watch then says it left the selector), deleted."""
    world.upsert("pinning", resized_job("done-0"))
    world.drain()
    assert world.metric("pin_followers_retired_total") == 1
    world.leave("pinning", resized_job("done-0"))
    world.api.delete("jobs", resized_job("done-0"))


def finished_deleted_before_the_retire(world: World) -> None:
    """Deleted (the watch says so) before the retire worked its key: nothing to do, nothing left."""
    world.upsert("pinning", resized_job("done-0"))
    world.delete("pinning", resized_job("done-0"))


def finished_in_dry_run(world: World) -> None:
    world.upsert("pinning", resized_job("done-0"))
    world.drain()
    assert world.resizer.footprint()["retire_dry_run_notes"] == 1
    world.delete("pinning", resized_job("done-0"))


def bound_leader_of_a_job_never_pending(world: World) -> None:
    """A leader of a Job of another strategy: its bind time is noted, and forgotten with the leader."""
    world.upsert("leaders", pod(0, node="node-5"))
    assert world.resizer.footprint()["bind_times"] == 1
    world.drain()
    world.delete("leaders", pod(0))


# --- all-or-nothing JobSets of 3 Jobs on 4 pools -------------------------------------------------------


def jobset_queued(world: World, jobset: str, *, queued_at: float = T0) -> None:
    for number in range(3):
        world.upsert("jobs", gang_job(jobset, number, queued_at=queued_at))
        world.gang_leader(jobset, number, queued_at=queued_at)


def jobset_deleted(world: World, jobset: str) -> None:
    """One Job after the other, the resizer working each change as it comes."""
    for number in range(3):
        world.delete("jobs", gang_job(jobset, number))
        world.delete("gang_jobs", gang_job(jobset, number))
        world.delete("leaders", gang_pod(jobset, number))
        world.delete("holders", gang_pod(jobset, number))
        world.drain()


def bind(world: World, name: str, node: str) -> None:
    bound = world.api.stored("pods", NS, name)
    bound["spec"]["nodeName"] = node
    world.upsert("leaders", bound)
    world.upsert("holders", bound)


def jobset_released_grown_and_deleted(world: World) -> None:
    jobset_queued(world, "a")
    world.drain()
    for number in range(3):
        bind(world, f"a-w-{number}-0", f"node-{number}")
    world.drain()
    grown = [world.api.stored("jobs", NS, f"a-w-{number}")["spec"]["completions"] for number in range(3)]
    assert (grown, world.resizer.footprint()["gang_leaders_released"]) == ([4, 4, 4], 3)
    jobset_deleted(world, "a")


def jobset_waiting_behind_another(world: World) -> None:
    jobset_queued(world, "a")
    jobset_queued(world, "b", queued_at=world.epoch.now + 1)
    world.drain()
    assert world.resizer.footprint()["gang_blocked_notes"] == 1
    jobset_deleted(world, "a")
    jobset_deleted(world, "b")


def jobset_larger_than_the_cluster(world: World) -> None:
    for node in ("node-2", "node-3"):
        world.delete("nodes", {"metadata": {"name": node}})
    jobset_queued(world, "a")
    world.drain()
    assert world.resizer.footprint()["gang_unfit_notes"] == 1
    jobset_deleted(world, "a")


def jobset_timed_out(world: World) -> None:
    jobset_queued(world, "a")
    world.drain()
    bind(world, "a-w-0-0", "node-0")
    world.epoch.advance(GANG_TIMEOUT)
    world.resizer.all_or_nothing.process(GANG_KEY)
    suspended = [world.api.stored("jobs", NS, f"a-w-{n}")["spec"].get("suspend") for n in range(3)]
    assert (suspended, world.resizer.footprint()["gang_suspended"]) == ([True] * 3, 3)
    jobset_deleted(world, "a")  # the watch delivers the deletions


def jobset_timed_out_with_a_job_recreated(world: World) -> None:
    """A timed-out Job was deleted and re-created under its name (another uid) before the suspension: the
    new Job is left alone (the uid precondition fails)."""
    jobset_queued(world, "a")
    world.drain()
    world.epoch.advance(GANG_TIMEOUT)
    world.api.put("jobs", {**gang_job("a", 1), "metadata": {**gang_job("a", 1)["metadata"], "uid": "new"}})
    world.resizer.all_or_nothing.process(GANG_KEY)
    suspended = [world.api.stored("jobs", NS, f"a-w-{n}")["spec"].get("suspend") for n in range(3)]
    assert suspended == [True, None, True]
    jobset_deleted(world, "a")


def jobset_in_dry_run(world: World) -> None:
    jobset_queued(world, "a")
    world.drain()
    assert world.resizer.footprint()["gang_dry_run_notes"] == 1
    jobset_deleted(world, "a")


SCENARIOS: list[tuple[Callable[[World], None], dict[str, Any]]] = [
    (resized_then_deleted, {}),
    (deleted_before_the_leader_bound, {}),
    (deleted_mid_retry, {}),
    (gated_followers_in_dry_run, {"dry_run": True}),
    (refused_then_deleted, {}),
    (bound_leader_of_a_job_never_pending, {}),
    (finished_retired_then_deleted, {}),
    (finished_deleted_before_the_retire, {}),
    (finished_in_dry_run, {"dry_run": True}),
    (jobset_released_grown_and_deleted, {"nodes": FOUR_POOLS}),
    (jobset_waiting_behind_another, {"nodes": FOUR_POOLS}),
    (jobset_larger_than_the_cluster, {"nodes": FOUR_POOLS}),
    (jobset_timed_out, {"nodes": FOUR_POOLS}),
    (jobset_timed_out_with_a_job_recreated, {"nodes": FOUR_POOLS}),
    (jobset_in_dry_run, {"nodes": FOUR_POOLS, "dry_run": True}),
]


@pytest.mark.parametrize(
    ("scenario", "options"), SCENARIOS, ids=[scenario.__name__ for scenario, _options in SCENARIOS]
)
def test_jobs_gone_leave_nothing_behind(
    make_world: MakeWorld, scenario: Callable[[World], None], options: dict[str, Any]
) -> None:
    world = make_world(**options)
    scenario(world)
    world.drain()
    footprint = world.resizer.footprint()
    assert footprint.keys() >= EVERY_STRUCTURE
    assert {name: count for name, count in footprint.items() if count} == {}


def test_footprint_counts_what_a_live_job_holds(make_world: MakeWorld) -> None:
    """The check above cannot pass vacuously: a live Job shows up in the footprint."""
    world = make_world()
    world.upsert("jobs", job())
    world.upsert("leaders", pod(0))
    world.upsert("followers", pod(1, gated=True))
    world.upsert("pinning", resized_job("done-0"))
    footprint = world.resizer.footprint()
    assert footprint["pending_jobs"] == footprint["leaders"] == footprint["followers"] == 1
    assert footprint["finished_pinning"] == footprint["retire_queue_queued"] == 1
    assert footprint["leader_index"] == footprint["follower_index"] == 1
    assert footprint["resize_queue_queued"] == footprint["followers_queue_queued"] == 1
