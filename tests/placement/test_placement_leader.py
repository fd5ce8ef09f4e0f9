"""The one rule for "the leader of this Job", shared by the webhook and the resizer (placement/leader.py)."""

from __future__ import annotations

from typing import Any

import pytest

from placement.leader import LeaderProblem, leader_problem, pick_leader
from placement.objects import JobRef
from placement.resize import SkipReason
from tests.support.builders import make_pod

JOB = JobRef(name="train-0", uid="uid-now")


def pod(
    tag: str,
    *,
    index: str = "0",
    uid: str = "uid-now",
    job: str = "train-0",
    node: str | None = "node-1",
    deleting: bool = False,
    phase: str = "Running",
    owner: bool = True,
) -> dict[str, Any]:
    built = make_pod(tag, "team-a").index(index).job_label(job).node(node).phase(phase)
    if owner:
        built.owned_by(job, uid)
    return (built.terminating() if deleting else built).obj()


CASES: list[tuple[str, list[dict[str, Any]], JobRef, str | None, LeaderProblem | None]] = [
    # (case, candidates, job, picked tag, its problem)
    ("no candidate", [], JOB, None, LeaderProblem.NO_LEADER),
    ("bound leader", [pod("a")], JOB, "a", None),
    ("not yet bound", [pod("a", node=None)], JOB, "a", LeaderProblem.LEADER_NOT_BOUND),
    ("bound preferred over unbound", [pod("a", node=None), pod("b")], JOB, "b", None),
    (
        "live preferred over terminating",
        [pod("a", deleting=True), pod("b", node=None)],
        JOB,
        "b",
        LeaderProblem.LEADER_NOT_BOUND,
    ),
    ("only a terminating one", [pod("a", deleting=True)], JOB, "a", LeaderProblem.LEADER_TERMINATING),
    ("only a finished one", [pod("a", phase="Succeeded")], JOB, "a", LeaderProblem.LEADER_FINISHED),
    ("only a failed one", [pod("a", phase="Failed")], JOB, "a", LeaderProblem.LEADER_FINISHED),
    (
        "this uid preferred over a stale one",
        [pod("old", uid="uid-before"), pod("b", node=None)],
        JOB,
        "b",
        LeaderProblem.LEADER_NOT_BOUND,
    ),
    ("only a stale uid", [pod("old", uid="uid-before")], JOB, "old", LeaderProblem.LEADER_OF_OTHER_JOB),
    ("another Job's name", [pod("a", job="train-1")], JOB, "a", LeaderProblem.LEADER_OF_OTHER_JOB),
    ("a follower is no leader", [pod("f", index="3")], JOB, "f", LeaderProblem.NOT_A_LEADER),
    ("leader preferred over a follower", [pod("f", index="3"), pod("a")], JOB, "a", None),
    # uids are compared only when both are known
    ("Job uid unknown", [pod("a", uid="uid-x")], JobRef("train-0", ""), "a", None),
    ("pod known by its label only", [pod("a", owner=False)], JOB, "a", None),
]


@pytest.mark.parametrize(
    ("candidates", "job", "picked", "problem"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_pick_leader_and_its_problem(
    candidates: list[dict[str, Any]], job: JobRef, picked: str | None, problem: LeaderProblem | None
) -> None:
    leader = pick_leader(candidates, job)
    assert (leader["metadata"]["name"] if leader else None) == picked
    assert leader_problem(leader, job) is problem


def test_pick_does_not_depend_on_candidate_order() -> None:
    candidates = [
        pod("old", uid="uid-before"),
        pod("dying", deleting=True),
        pod("unbound", node=None),
        pod("b"),
    ]
    assert pick_leader(candidates, JOB) is candidates[-1]
    assert pick_leader(list(reversed(candidates)), JOB) is candidates[-1]


@pytest.mark.parametrize("problem", list(LeaderProblem))
def test_every_leader_problem_is_a_resizer_skip_reason(problem: LeaderProblem) -> None:
    assert SkipReason(problem.value).value == problem.value
