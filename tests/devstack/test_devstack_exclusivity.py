"""The exclusivity replay: every Job whole in one domain, no domain shared at the same time."""

from __future__ import annotations

from typing import Any

import pytest

from devstack.exclusivity import ExclusivityReplay, PodState, node_domains, pod_state
from placement.constants import JOBSET_RESTART_ATTEMPT_LABEL
from tests.support.builders import make_pod

DOMAINS = {"n1": "pool-a", "n2": "pool-a", "n3": "pool-b"}


def active(key: str, job: str, node: str) -> PodState:
    return PodState(key, job, node, True)


def gone(key: str, job: str, node: str) -> PodState:
    return PodState(key, job, node, False)


@pytest.mark.parametrize(
    ("events", "violations"),
    [
        pytest.param(
            [active("p1", "a", "n1"), active("p2", "a", "n2"), active("p3", "b", "n3")], 0, id="exclusive"
        ),
        pytest.param([active("p1", "a", "n1"), active("p2", "b", "n2")], 1, id="pool-shared"),
        pytest.param([active("p1", "a", "n1"), active("p2", "a", "n3")], 1, id="job-split"),
        pytest.param(
            [active("p1", "a", "n1"), gone("p1", "a", "n1"), active("p2", "b", "n2")],
            0,
            id="pool-reused-after-finish",
        ),
        pytest.param(
            [active("p1", "a", "n1"), active("p2", "b", "n1"), active("p3", "b", "n2")],
            1,
            id="one-pair-counted-once",
        ),
        pytest.param([PodState("p1", "", "n1", True), active("p2", "b", "n1")], 0, id="non-job-pod-ignored"),
        pytest.param(
            [PodState("p1", "a", "n1", True, "0"), PodState("p2", "a", "n3", True, "1")],
            0,
            id="restarted-job-in-another-pool",
        ),
        pytest.param(
            [PodState("p1", "a", "n1", True, "0"), PodState("p2", "a", "n2", True, "1")],
            0,
            id="restarted-job-beside-its-terminating-attempt",
        ),
        pytest.param(
            [PodState("p1", "a", "n1", True, "1"), PodState("p2", "a", "n3", True, "1")],
            1,
            id="one-attempt-split",
        ),
        pytest.param(
            [PodState("p1", "a", "n1", True, "0"), PodState("p2", "b", "n2", True, "1")],
            1,
            id="attempts-of-two-jobs-share-a-pool",
        ),
    ],
)
def test_replay_counts_violations(events: list[PodState], violations: int) -> None:
    replay = ExclusivityReplay(DOMAINS)
    replay.observe_all(events)
    assert replay.violations == violations
    assert len(replay.describe()) == violations


def pod(name: str, node: str = "", phase: str = "Pending", job: str = "train") -> dict[str, Any]:
    built = make_pod(name, "ns").job_label(job).label(JOBSET_RESTART_ATTEMPT_LABEL, "2")
    return built.node(node or None).phase(phase).obj()


@pytest.mark.parametrize(
    ("obj", "deleted", "is_active"),
    [
        (pod("p", "n1", "Running"), False, True),
        (pod("p", "n1", "Pending"), False, True),
        (pod("p", "", "Pending"), False, False),
        (pod("p", "n1", "Succeeded"), False, False),
        (pod("p", "n1", "Failed"), False, False),
        (pod("p", "n1", "Running"), True, False),
    ],
)
def test_pod_state_is_active_while_bound_and_not_terminal(
    obj: dict[str, Any], deleted: bool, is_active: bool
) -> None:
    state = pod_state(obj, deleted=deleted)
    assert state.active is is_active
    assert state.key == "ns/p"
    assert (state.job, state.attempt) == ("ns/train", "2")


def test_a_pod_of_no_job_is_ignored() -> None:
    orphan = pod("p", "n1", "Running")
    del orphan["metadata"]["labels"]
    assert pod_state(orphan).job == ""


def test_node_domains_reads_the_topology_label() -> None:
    nodes = [
        {"metadata": {"name": "n1", "labels": {"pool": "a"}}},
        {"metadata": {"name": "n2", "labels": {}}},
    ]
    assert node_domains(nodes, "pool") == {"n1": "a", "n2": ""}
