"""Gang progress bookkeeping (kubesim/controllers/gang.py): membership from the pod's annotations and the
gang clock that runs only while every member runs."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.controllers.gang import (
    GANG_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    GangProgress,
    Membership,
    membership,
)


def _pod(annotations: dict[str, str] | None, namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": namespace, "annotations": annotations}}


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({GANG_ANNOTATION: "js", GANG_SIZE_ANNOTATION: "9"}, Membership("ns/js", 9)),
        ({GANG_ANNOTATION: "js", GANG_SIZE_ANNOTATION: "1"}, Membership("ns/js", 1)),
        ({GANG_SIZE_ANNOTATION: "9"}, None),
        ({GANG_ANNOTATION: "", GANG_SIZE_ANNOTATION: "9"}, None),
        ({GANG_ANNOTATION: "js"}, None),
        ({GANG_ANNOTATION: "js", GANG_SIZE_ANNOTATION: "0"}, None),
        ({GANG_ANNOTATION: "js", GANG_SIZE_ANNOTATION: "-2"}, None),
        ({GANG_ANNOTATION: "js", GANG_SIZE_ANNOTATION: "three"}, None),
        (None, None),
    ],
)
def test_membership_comes_from_the_pods_own_annotations(
    annotations: dict[str, str] | None, expected: Membership | None
) -> None:
    assert membership(_pod(annotations)) == expected


def test_gangs_are_per_namespace() -> None:
    annotations = {GANG_ANNOTATION: "js", GANG_SIZE_ANNOTATION: "2"}
    assert membership(_pod(annotations, "a")) != membership(_pod(annotations, "b"))


GANG = Membership("ns/g", 2)
RUN = 100.0

# (pod, running, at) steps, then pod a's remaining seconds at the last step's time.
Step = tuple[str, bool, float]


@pytest.mark.parametrize(
    ("steps", "remaining"),
    [
        pytest.param([("a", True, 0)], None, id="one of two running: paused before starting"),
        pytest.param([("a", True, 0), ("b", False, 50)], None, id="the other member pending: paused"),
        pytest.param([("a", True, 0), ("b", True, 10)], 100.0, id="whole at 10: the whole run left"),
        pytest.param([("a", True, 0), ("b", True, 10), ("a", True, 40)], 70.0, id="running: counts down"),
        pytest.param([("a", True, 0), ("b", True, 10), ("b", False, 40)], None, id="a member stops: paused"),
        pytest.param(
            [("a", True, 0), ("b", True, 10), ("b", False, 40), ("b", True, 500)],
            70.0,
            id="whole again: resumes from what it accumulated",
        ),
        pytest.param(
            [("a", True, 0), ("b", True, 0), ("b", False, 100), ("a", True, 300)],
            0.0,
            id="done stays done when a member has finished",
        ),
        pytest.param([("a", True, 0), ("b", True, 0), ("a", True, 150)], 0.0, id="overdue: done"),
    ],
)
def test_the_gang_clock_runs_only_while_the_gang_is_whole(steps: list[Step], remaining: float | None) -> None:
    gangs = GangProgress()
    for key, running, at in steps:
        gangs.observe(key, GANG, running, at)
    assert gangs.remaining("a", RUN, steps[-1][2]) == remaining


def test_the_running_members_resume_when_the_gang_becomes_whole() -> None:
    gangs = GangProgress()
    assert gangs.observe("a", GANG, True, 0) == []
    assert gangs.observe("b", GANG, False, 1) == []
    assert gangs.observe("b", GANG, True, 2) == ["a", "b"]
    assert gangs.observe("a", GANG, True, 3) == []  # already whole: nothing to resume


def test_a_replacement_member_rejoins_the_gangs_clock() -> None:
    gangs = GangProgress()
    gangs.observe("a", GANG, True, 0)
    gangs.observe("b", GANG, True, 0)
    gangs.forget("b", 30)
    assert gangs.remaining("a", RUN, 60) is None
    assert gangs.observe("b2", GANG, True, 60) == ["a", "b2"]
    assert gangs.remaining("b2", RUN, 60) == 70.0
    assert gangs.elapsed("a", 60) == 30.0


def test_a_gang_is_forgotten_with_its_last_member() -> None:
    gangs = GangProgress()
    gangs.observe("a", GANG, True, 0)
    gangs.observe("b", GANG, True, 0)
    gangs.forget("a", 50)
    gangs.forget("b", 50)
    assert not gangs.is_member("a")
    gangs.observe("a", GANG, True, 60)
    gangs.observe("b", GANG, True, 60)
    assert gangs.remaining("a", RUN, 60) == 100.0


def test_more_running_than_the_size_is_whole_and_a_pod_in_no_gang_is_ignored() -> None:
    gangs = GangProgress()
    one = Membership("ns/solo", 1)
    assert gangs.observe("a", one, True, 0) == ["a"]
    assert gangs.observe("b", one, True, 0) == []
    assert gangs.observe("plain", None, True, 0) == []
    assert not gangs.is_member("plain")
    assert gangs.remaining("plain", RUN, 0) is None
    assert gangs.elapsed("plain", 0) is None
    gangs.forget("plain", 1)  # never a member: nothing to forget
