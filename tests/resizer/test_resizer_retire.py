"""The retire controller against the in-memory API (fakes, not mocks): a finished Job labelled pin-followers
loses the label once, through its own informer; a label already gone, a Job re-created or deleted
meanwhile, dry-run, standby and the start-up list. And the resize that sets the label."""

from __future__ import annotations

import logging

import pytest

from placement.constants import LEADER_DOMAIN_ANNOTATION, PIN_FOLLOWERS, PIN_FOLLOWERS_LABEL, RESIZE_LABEL
from tests.resizer.resizer_world import KEY, NS, MakeWorld, job, pod, resized_job

RETIRE_KEY = f"{NS}/done-0"


def labels(world_kube_job: dict[str, object]) -> dict[str, str]:
    metadata = world_kube_job["metadata"]
    assert isinstance(metadata, dict)
    return dict(metadata.get("labels") or {})


def retire_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "resizer.retire"]


def test_the_resize_labels_the_job_pin_followers_with_its_leaders_domain(make_world: MakeWorld) -> None:
    for pin_followers in (True, False):
        world = make_world(pin_followers=pin_followers)
        world.add_job(job())
        world.add_pod(pod(0, node="node-5"), "leaders")
        world.resizer.resize.process(KEY)
        stored = world.api.stored("jobs", NS, "train-0")
        assert stored["metadata"]["annotations"][LEADER_DOMAIN_ANNOTATION] == "pool-2"
        assert labels(stored).get(PIN_FOLLOWERS_LABEL) == (PIN_FOLLOWERS if pin_followers else None)
        assert (labels(stored)[RESIZE_LABEL], world.api.count("patch")) == ("done", 1)


def test_a_finished_job_loses_the_label_once_and_a_running_one_keeps_it(
    make_world: MakeWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="resizer.retire")
    world = make_world()
    running = resized_job("done-0", finished=None)
    assert world.upsert("pinning", running) is None  # not kept: nothing to do yet
    world.drain()
    assert (
        world.api.count("patch"),
        labels(world.api.stored("jobs", NS, "done-0"))[PIN_FOLLOWERS_LABEL],
    ) == (
        0,
        PIN_FOLLOWERS,
    )
    assert world.upsert("pinning", resized_job("done-0")) is not None
    world.drain()
    stored = world.api.stored("jobs", NS, "done-0")
    assert PIN_FOLLOWERS_LABEL not in labels(stored)
    assert stored["metadata"]["annotations"][LEADER_DOMAIN_ANNOTATION] == "pool-2"  # the record stays
    assert (world.api.count("patch"), world.metric("pin_followers_retired_total")) == (1, 1)
    assert retire_lines(caplog) == [
        "finished: removed the pin-followers label (no longer a param of the follower policy)"
    ]
    world.leave("pinning", resized_job("done-0"))  # the label is gone: the watch says so
    world.drain()
    assert (world.api.count("patch"), world.resizer.footprint()["finished_pinning"]) == (1, 0)


def test_a_label_someone_else_removed_first_is_read_again_and_left(make_world: MakeWorld) -> None:
    world = make_world()
    world.upsert("pinning", resized_job("done-0"))
    unlabelled = world.api.stored("jobs", NS, "done-0")
    del unlabelled["metadata"]["labels"][PIN_FOLLOWERS_LABEL]
    world.api.put("jobs", unlabelled)
    world.resizer.retire.process(RETIRE_KEY)
    assert (world.api.count("patch"), world.api.count("get")) == (1, 1)  # refused (422), read again
    assert (world.metric("conflicts_total"), world.metric("pin_followers_retired_total")) == (1, 0)
    assert world.resizer.retire.queue.failures(RETIRE_KEY) == 0


def test_a_job_recreated_under_the_same_name_keeps_its_label(make_world: MakeWorld) -> None:
    """The cache holds the finished Job; the API a new, running one of the same name: the uid test refuses
    the patch, and the new Job, read again, is running."""
    world = make_world()
    world.upsert("pinning", resized_job("done-0"))
    world.api.put("jobs", resized_job("done-0", finished=None, uid="new-uid"))
    world.resizer.retire.process(RETIRE_KEY)
    assert labels(world.api.stored("jobs", NS, "done-0"))[PIN_FOLLOWERS_LABEL] == PIN_FOLLOWERS
    assert (world.metric("conflicts_total"), world.metric("pin_followers_retired_total")) == (1, 0)


def test_a_job_deleted_meanwhile_is_dropped_quietly(make_world: MakeWorld) -> None:
    world = make_world()
    world.upsert("pinning", resized_job("done-0"))
    world.api.delete("jobs", resized_job("done-0"))
    world.resizer.retire.process(RETIRE_KEY)
    assert world.metric("pin_followers_retired_total") == 0
    assert world.resizer.retire.queue.failures(RETIRE_KEY) == 0
    assert world.resizer.footprint()["finished_pinning"] == 0


def test_dry_run_says_once_what_it_would_do_and_patches_nothing(
    make_world: MakeWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="resizer.retire")
    world = make_world(dry_run=True)
    world.upsert("pinning", resized_job("done-0"))
    world.drain()
    world.resizer.retire.process(RETIRE_KEY)
    assert world.api.count("patch") == 0
    assert labels(world.api.stored("jobs", NS, "done-0"))[PIN_FOLLOWERS_LABEL] == PIN_FOLLOWERS
    assert retire_lines(caplog) == ["dry-run: would remove the pin-followers label of a finished Job"]
    assert world.resizer.footprint()["retire_dry_run_notes"] == 1


def test_a_standby_patches_nothing_and_retires_once_it_leads(make_world: MakeWorld) -> None:
    world = make_world(leader=False)
    world.upsert("pinning", resized_job("done-0"))
    world.drain()
    assert world.api.count("patch") == 0
    world.leading.leader = True
    world.resizer.enqueue_all()  # what becoming the leader does
    world.drain()
    assert PIN_FOLLOWERS_LABEL not in labels(world.api.stored("jobs", NS, "done-0"))


def test_the_first_list_retires_the_jobs_that_finished_while_no_resizer_ran(make_world: MakeWorld) -> None:
    """Also the upgrade: Jobs finished before this version, listed at its start."""
    listed = [
        resized_job("done-0"),
        resized_job("done-1", finished="Failed"),
        resized_job("run-0", finished=None),
    ]
    world = make_world(listed={"pinning": listed})
    assert world.resizer.footprint()["finished_pinning"] == 2
    world.drain()
    pinned = {
        name: PIN_FOLLOWERS_LABEL in labels(world.api.stored("jobs", NS, name))
        for name in ("done-0", "done-1", "run-0")
    }
    assert pinned == {"done-0": False, "done-1": False, "run-0": True}
    assert (world.api.count("patch"), world.metric("pin_followers_retired_total")) == (2, 2)
