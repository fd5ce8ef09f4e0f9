"""`placement.rewind.decide_rewind`: a suspended Job the resizer had resized goes back to where the Job
webhook left it (size 1, `resize: pending`, no recorded domain), with a patch that tests what it read; and
`decide_resize` does not grow a suspended Job."""

from __future__ import annotations

import jsonpatch
import pytest

from placement.constants import (
    LEADER_DOMAIN_ANNOTATION,
    PIN_FOLLOWERS,
    PIN_FOLLOWERS_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    RESIZE_PENDING,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_MAX_FAILED_INDEXES_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from placement.objects import Obj
from placement.patch import apply
from placement.resize import SkipReason, decide_resize
from placement.rewind import KeepReason, decide_rewind
from tests.support.builders import JobWrapper, make_job, make_node, make_pod

POOL = "cloud.google.com/gke-nodepool"


def suspended_resized(*, pin: bool = True) -> JobWrapper:
    """A Job of 8 the webhook shrank and the resizer grew beside a leader in pool-2, then suspended."""
    job = (
        make_job("train-0", "team")
        .uid("job-uid")
        .generation(3)
        .indexed(8)
        .template_annotation(TOPOLOGY_ANNOTATION, POOL)
        .annotation(TARGET_COMPLETIONS_ANNOTATION, "8")
        .annotation(TARGET_PARALLELISM_ANNOTATION, "8")
        .annotation(LEADER_DOMAIN_ANNOTATION, "pool-2")
        .label(RESIZE_LABEL, RESIZE_DONE)
        .spec(suspend=True)
    )
    return job.label(PIN_FOLLOWERS_LABEL, PIN_FOLLOWERS) if pin else job


@pytest.mark.parametrize("pin", [True, False], ids=["policy path", "webhook path"])
def test_a_suspended_resized_job_goes_back_to_size_one_pending_with_no_domain(pin: bool) -> None:
    job = suspended_resized(pin=pin).obj()
    decision = decide_rewind(job)
    assert decision.reason is None
    assert decision.patch is not None
    rewound = apply(job, decision.patch)
    assert (rewound["spec"]["completions"], rewound["spec"]["parallelism"]) == (1, 1)
    assert rewound["metadata"]["labels"] == {RESIZE_LABEL: RESIZE_PENDING}
    assert LEADER_DOMAIN_ANNOTATION not in rewound["metadata"]["annotations"]
    assert rewound["metadata"]["annotations"][TARGET_COMPLETIONS_ANNOTATION] == "8"  # grown again later
    assert rewound["spec"]["suspend"] is True
    assert decide_rewind(rewound).reason is KeepReason.NOT_RESIZED


def test_a_lowered_max_failed_indexes_is_lowered_again() -> None:
    job = (
        suspended_resized()
        .annotation(TARGET_MAX_FAILED_INDEXES_ANNOTATION, "3")
        .spec(maxFailedIndexes=3)
        .obj()
    )
    decision = decide_rewind(job)
    assert decision.patch is not None
    assert apply(job, decision.patch)["spec"]["maxFailedIndexes"] == 1
    untouched = suspended_resized().spec(maxFailedIndexes=1).obj()
    rewound_patch = decide_rewind(untouched).patch
    assert rewound_patch is not None
    assert all(op["path"] != "/spec/maxFailedIndexes" for op in rewound_patch)


@pytest.mark.parametrize(
    ("job", "reason"),
    [
        (suspended_resized().spec(suspend=False).obj(), KeepReason.NOT_SUSPENDED),
        (suspended_resized().label(RESIZE_LABEL, RESIZE_PENDING).obj(), KeepReason.NOT_RESIZED),
        (suspended_resized().condition("Failed").obj(), KeepReason.FINISHED),
        (suspended_resized().terminating().obj(), KeepReason.TERMINATING),
        (suspended_resized().status(succeeded=1).obj(), KeepReason.PROGRESS),
        (suspended_resized().status(completedIndexes="3").obj(), KeepReason.PROGRESS),
        (suspended_resized().status(failedIndexes="5").obj(), KeepReason.PROGRESS),
        (
            suspended_resized().annotations({LEADER_DOMAIN_ANNOTATION: "pool-2"}).obj(),
            KeepReason.NO_RECORD,
        ),
        (suspended_resized().uid("").obj(), KeepReason.NO_UID),
    ],
    ids=[
        "running",
        "pending",
        "finished",
        "terminating",
        "a pod succeeded",
        "an index completed",
        "an index failed",
        "no webhook record",
        "no uid",
    ],
)
def test_a_job_keeps_its_size(job: Obj, reason: KeepReason) -> None:
    decision = decide_rewind(job)
    assert (decision.reason, decision.patch, decision.rewind) == (reason, None, False)


def test_the_patch_tests_uid_generation_resize_and_suspend_first() -> None:
    """A Job resumed (which bumps its generation and clears suspend), re-created, or rewound by another
    resizer since it was read refuses the patch (the API server's 422)."""
    job = suspended_resized().obj()
    decision = decide_rewind(job)
    assert decision.patch is not None
    assert decision.patch[:4] == [
        {"op": "test", "path": "/metadata/uid", "value": "job-uid"},
        {"op": "test", "path": "/metadata/generation", "value": 3},
        {"op": "test", "path": "/metadata/labels/exclusive-placement.io~1resize", "value": RESIZE_DONE},
        {"op": "test", "path": "/spec/suspend", "value": True},
    ]
    resumed = suspended_resized().spec(suspend=False).generation(3).obj()
    edited = suspended_resized().generation(4).obj()
    recreated = suspended_resized().uid("other-uid").obj()
    rewound = apply(job, decision.patch)
    for changed in (resumed, edited, recreated, rewound):
        with pytest.raises(jsonpatch.JsonPatchTestFailed):
            apply(changed, decision.patch)


def test_a_suspended_job_is_not_grown_beside_a_leader_the_caches_still_show_bound() -> None:
    """The suspension's pod deletion may not have reached the leader cache yet: no resize of a suspended Job
    (which the rewind would have to undo, or which the resume would create whole beside a new leader)."""
    job = suspended_resized().label(RESIZE_LABEL, RESIZE_PENDING).indexed(1).obj()
    leader = (
        make_pod("train-0-0", "team").owned_by("train-0", "job-uid", labels=True).index(0).node("n1").obj()
    )
    node = make_node("n1").label(POOL, "pool-1").obj()
    decision = decide_resize(job, leader, gang=None, node=node)
    assert decision.reason is SkipReason.JOB_SUSPENDED
    assert decision.patch is None
    resumed = {**job, "spec": {**job["spec"], "suspend": False}}
    assert decide_resize(resumed, leader, gang=None, node=node).reason is None
