"""The rewind controller against the in-memory API (fakes, not mocks): a suspended Job the resizer had
resized goes back to size 1, `resize: pending`, with no recorded domain, once, through its own informer; a
Job resumed, re-created or deleted meanwhile, one that made progress, dry-run, standby and the start-up
list. Then the resumed Job grows again beside its new leader, pinning its followers to the new domain."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from placement.constants import (
    LEADER_DOMAIN_ANNOTATION,
    PIN_FOLLOWERS,
    PIN_FOLLOWERS_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    RESIZE_PENDING,
)
from tests.resizer.resizer_world import KEY, NS, MakeWorld, pod, resized_job
from tests.support.builders import make_job

Obj = dict[str, Any]


def suspended(name: str = "train-0", *, uid: str = "", **status: Any) -> Obj:
    """Job `name` as the webhook admitted it (its record of 8 on the Job and its pod template), resized to
    8 beside a leader in pool-2, then suspended."""
    built = (
        make_job(name, NS)
        .uid(uid or ("job-uid" if name == "train-0" else f"{name}-uid"))
        .generation(2)
        .indexed(8)
        .pending(8)
        .label(RESIZE_LABEL, RESIZE_DONE)
        .label(PIN_FOLLOWERS_LABEL, PIN_FOLLOWERS)
        .annotation(LEADER_DOMAIN_ANNOTATION, "pool-2")
        .spec(suspend=True)
    )
    return (built.status(**status) if status else built).obj()


def rewind_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "resizer.rewind"]


def test_a_suspended_resized_job_goes_back_to_size_one_once(
    make_world: MakeWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="resizer.rewind")
    world = make_world()
    running = resized_job(finished=None)
    assert world.upsert("suspended", running) is None  # not suspended: not kept
    assert world.upsert("suspended", suspended()) is not None
    world.drain()
    stored = world.api.stored("jobs", NS, "train-0")
    assert (stored["spec"]["completions"], stored["spec"]["parallelism"]) == (1, 1)
    assert stored["metadata"]["labels"][RESIZE_LABEL] == RESIZE_PENDING
    assert PIN_FOLLOWERS_LABEL not in stored["metadata"]["labels"]
    assert LEADER_DOMAIN_ANNOTATION not in stored["metadata"]["annotations"]
    assert (world.api.count("patch"), world.metric("suspended_jobs_rewound_total")) == (1, 1)
    assert rewind_lines(caplog) == [
        "suspended: put back to size 1, resize pending (grown again beside its next leader)"
    ]
    assert world.resizer.footprint()["suspended_resized"] == 0
    world.resizer.rewind.process(KEY)  # the watch of the rewound Job has not come yet: nothing cached
    assert world.api.count("patch") == 1


def test_the_resumed_job_grows_again_beside_its_new_leader(make_world: MakeWorld) -> None:
    """After the rewind the Job is pending again: resumed, its new leader binds in pool-1 (node-1), the
    resize records pool-1 (the followers are pinned there, not to the old pool-2)."""
    world = make_world(nodes={"node-1": "pool-1", "node-5": "pool-2"})
    world.upsert("suspended", suspended())
    world.drain()
    rewound = world.api.stored("jobs", NS, "train-0")
    resumed = {**rewound, "spec": {**rewound["spec"], "suspend": False}}
    resumed["metadata"] = {**rewound["metadata"], "generation": 3}
    world.api.put("jobs", resumed)
    world.add_job(resumed)
    world.add_pod(pod(0, node="node-1"), "leaders")
    world.resizer.resize.process(KEY)
    stored = world.api.stored("jobs", NS, "train-0")
    assert (stored["spec"]["completions"], stored["metadata"]["labels"][RESIZE_LABEL]) == (8, "done")
    assert stored["metadata"]["annotations"][LEADER_DOMAIN_ANNOTATION] == "pool-1"


def test_a_job_resumed_before_the_patch_is_read_again_and_left_whole(make_world: MakeWorld) -> None:
    """The cache holds the suspended Job; the API the resumed one: the tests refuse the patch (422), the
    Job read again is not suspended, and it keeps its size (the follower repair covers it)."""
    world = make_world()
    world.upsert("suspended", suspended())
    resumed = suspended()
    resumed["spec"]["suspend"] = False
    resumed["metadata"]["generation"] = 3
    world.api.put("jobs", resumed)
    world.resizer.rewind.process(KEY)
    stored = world.api.stored("jobs", NS, "train-0")
    assert stored["spec"]["completions"] == 8
    assert (world.api.count("patch"), world.api.count("get")) == (1, 1)
    assert (world.metric("conflicts_total"), world.metric("suspended_jobs_rewound_total")) == (1, 0)
    assert world.resizer.rewind.queue.failures(KEY) == 0


def test_a_job_that_made_progress_keeps_its_size(make_world: MakeWorld) -> None:
    """A succeeded pod: shrunk, the Job controller would forget its index, and run it again once grown."""
    world = make_world()
    assert world.upsert("suspended", suspended(succeeded=2, completedIndexes="3-4")) is not None
    world.drain()
    assert world.api.count("patch") == 0
    assert world.api.stored("jobs", NS, "train-0")["spec"]["completions"] == 8


def test_a_job_deleted_meanwhile_is_dropped_quietly(make_world: MakeWorld) -> None:
    world = make_world()
    world.upsert("suspended", suspended())
    world.api.delete("jobs", suspended())
    world.resizer.rewind.process(KEY)
    assert world.metric("suspended_jobs_rewound_total") == 0
    assert world.resizer.rewind.queue.failures(KEY) == 0
    assert world.resizer.footprint()["suspended_resized"] == 0


def test_dry_run_says_once_what_it_would_do_and_patches_nothing(
    make_world: MakeWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="resizer.rewind")
    world = make_world(dry_run=True)
    world.upsert("suspended", suspended())
    world.drain()
    world.resizer.rewind.process(KEY)
    assert world.api.count("patch") == 0
    assert rewind_lines(caplog) == ["dry-run: would put a suspended, resized Job back to size 1"]
    assert world.resizer.footprint()["rewind_dry_run_notes"] == 1


def test_a_standby_patches_nothing_and_rewinds_once_it_leads(make_world: MakeWorld) -> None:
    world = make_world(leader=False)
    world.upsert("suspended", suspended())
    world.drain()
    assert world.api.count("patch") == 0
    world.leading.leader = True
    world.resizer.enqueue_all()  # what becoming the leader does
    world.drain()
    assert world.api.stored("jobs", NS, "train-0")["spec"]["completions"] == 1


def test_the_first_list_rewinds_the_jobs_suspended_while_no_resizer_ran(make_world: MakeWorld) -> None:
    listed = [suspended("a-0"), suspended("b-0"), resized_job("c-0", finished=None)]
    world = make_world(listed={"suspended": listed})
    assert world.resizer.footprint()["suspended_resized"] == 2
    world.drain()
    sizes = {
        name: world.api.stored("jobs", NS, name)["spec"]["completions"] for name in ("a-0", "b-0", "c-0")
    }
    assert sizes == {"a-0": 1, "b-0": 1, "c-0": 8}
    assert world.metric("suspended_jobs_rewound_total") == 2
