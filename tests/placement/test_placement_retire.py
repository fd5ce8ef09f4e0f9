"""`placement.retire.decide_retire`: a finished Job leaves the follower policy's params, with a patch that
tests what it read."""

from __future__ import annotations

import jsonpatch
import pytest

from placement.constants import (
    LEADER_DOMAIN_ANNOTATION,
    PIN_FOLLOWERS,
    PIN_FOLLOWERS_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
)
from placement.objects import Obj
from placement.patch import apply
from placement.retire import KeepReason, decide_retire, pins_followers
from tests.support.builders import JobWrapper, make_job


def resized(*conditions: tuple[str, str]) -> JobWrapper:
    """A Job the resizer resized on the policy path, with `conditions` (type, status)."""
    job = (
        make_job("train-0", "team")
        .uid("job-uid")
        .indexed(8)
        .label(RESIZE_LABEL, RESIZE_DONE)
        .label(PIN_FOLLOWERS_LABEL, PIN_FOLLOWERS)
        .annotation(LEADER_DOMAIN_ANNOTATION, "pool-2")
    )
    for kind, status in conditions:
        job.condition(kind, status)
    return job


@pytest.mark.parametrize(
    "condition", ["Complete", "Failed", "SuccessCriteriaMet", "FailureTarget"], ids=lambda c: c
)
def test_a_finished_job_loses_the_label_and_nothing_else(condition: str) -> None:
    job = resized(("Suspended", "False"), (condition, "True")).obj()
    decision = decide_retire(job)
    assert decision.reason is None
    assert decision.patch is not None
    retired = apply(job, decision.patch)
    assert PIN_FOLLOWERS_LABEL not in retired["metadata"]["labels"]
    expected = resized(("Suspended", "False"), (condition, "True")).obj()
    del expected["metadata"]["labels"][PIN_FOLLOWERS_LABEL]
    assert retired == expected
    assert not pins_followers(retired)
    assert decide_retire(retired).reason is KeepReason.NOT_PINNING


@pytest.mark.parametrize(
    ("job", "reason"),
    [
        (resized().obj(), KeepReason.RUNNING),
        (resized(("Complete", "False"), ("Suspended", "True")).obj(), KeepReason.RUNNING),
        (
            make_job("train-0", "team")
            .uid("job-uid")
            .label(RESIZE_LABEL, RESIZE_DONE)
            .condition("Complete")
            .obj(),
            KeepReason.NOT_PINNING,
        ),
        (resized(("Complete", "True")).label(PIN_FOLLOWERS_LABEL, "false").obj(), KeepReason.NOT_PINNING),
        (resized(("Complete", "True")).uid("").obj(), KeepReason.NO_UID),
    ],
    ids=["running", "not finished", "label absent", "label not true", "no uid"],
)
def test_a_job_keeps_the_label_or_has_none_to_lose(job: Obj, reason: KeepReason) -> None:
    decision = decide_retire(job)
    assert (decision.reason, decision.patch, decision.retire) == (reason, None, False)


def test_the_patch_tests_the_uid_and_the_label_first() -> None:
    """A Job re-created under the same name, or whose label someone else already removed, refuses the
    patch (the API server's 422) instead of losing a label it needs."""
    job = resized(("Complete", "True")).obj()
    decision = decide_retire(job)
    assert decision.patch is not None
    assert decision.patch[:2] == [
        {"op": "test", "path": "/metadata/uid", "value": "job-uid"},
        {"op": "test", "path": "/metadata/labels/exclusive-placement.io~1pin-followers", "value": "true"},
    ]
    recreated = resized().uid("other-uid").obj()
    already_retired = make_job("train-0", "team").uid("job-uid").label(RESIZE_LABEL, RESIZE_DONE).obj()
    for changed in (recreated, already_retired):
        with pytest.raises(jsonpatch.JsonPatchTestFailed):
            apply(changed, decision.patch)
