"""Pure Job controller decisions: index bookkeeping, pod construction, create/delete plans."""

from typing import Any

import pytest

from kubesim.controllers.job_pods import (
    build_pod,
    format_indexes,
    generate_name,
    parse_indexes,
    plan_indexed,
    plan_non_indexed,
)
from placement.constants import (
    CONTROLLER_UID_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_COMPLETION_INDEX_LABEL,
    JOB_NAME_LABEL,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
)


@pytest.mark.parametrize(
    ("indexes", "text"),
    [
        (set(), ""),
        ({3}, "3"),
        ({0, 1, 2}, "0-2"),
        ({0, 1, 2, 5, 7, 8}, "0-2,5,7-8"),
        ({9, 1, 10, 2}, "1-2,9-10"),
    ],
)
def test_completed_indexes_round_trip(indexes: set[int], text: str) -> None:
    assert format_indexes(indexes) == text
    assert parse_indexes(text) == indexes


@pytest.mark.parametrize("text", ["a", "1-b", "-3", "1,,x"])
def test_malformed_completed_indexes_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="malformed"):
        parse_indexes(text)


@pytest.mark.parametrize(
    ("job", "index", "expected"),
    [
        ("trainer", 3, "trainer-3-"),
        ("trainer", None, "trainer-"),
        ("x" * 60, 12, "x" * 54 + "-12-"),
    ],
)
def test_generate_name_keeps_the_index_within_58_characters(
    job: str, index: int | None, expected: str
) -> None:
    assert generate_name(job, index) == expected
    assert len(generate_name(job, index)) <= 58


def _job(indexed: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "js-workers-0", "namespace": "team", "uid": "u-1"},
        "spec": {
            "completionMode": "Indexed" if indexed else "NonIndexed",
            "template": {
                "metadata": {"labels": {"app": "x"}, "annotations": {"keep": "me"}},
                "spec": {"subdomain": "js", "containers": [{"name": "main", "image": "busybox"}]},
            },
        },
    }


def test_indexed_pod_carries_index_labels_hostname_and_owner() -> None:
    pod = build_pod(_job(), 5)
    meta = pod["metadata"]
    assert meta["generateName"] == "js-workers-0-5-"
    assert meta["namespace"] == "team"
    assert meta["annotations"] == {"keep": "me", JOB_COMPLETION_INDEX_ANNOTATION: "5"}
    assert meta["labels"] == {
        "app": "x",
        JOB_COMPLETION_INDEX_LABEL: "5",
        JOB_NAME_LABEL: "js-workers-0",
        CONTROLLER_UID_LABEL: "u-1",
        LEGACY_JOB_NAME_LABEL: "js-workers-0",
        LEGACY_CONTROLLER_UID_LABEL: "u-1",
    }
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "js-workers-0",
            "uid": "u-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert pod["spec"]["hostname"] == "js-workers-0-5"
    assert pod["spec"]["subdomain"] == "js"
    assert pod["spec"]["containers"][0]["env"][0]["name"] == "JOB_COMPLETION_INDEX"


def test_non_indexed_pod_has_no_index_and_no_hostname() -> None:
    pod = build_pod(_job(indexed=False), None)
    assert pod["metadata"]["generateName"] == "js-workers-0-"
    assert JOB_COMPLETION_INDEX_ANNOTATION not in pod["metadata"].get("annotations", {})
    assert "hostname" not in pod["spec"]


def test_building_a_pod_does_not_touch_the_job_template() -> None:
    job = _job()
    build_pod(job, 1)
    assert "env" not in job["spec"]["template"]["spec"]["containers"][0]
    assert "hostname" not in job["spec"]["template"]["spec"]


def _pod(index: int, name: str | None = None, node: str | None = None, ready: bool = False) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {
            "name": name or f"p{index}",
            "annotations": {JOB_COMPLETION_INDEX_ANNOTATION: str(index)},
        },
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": "Running" if ready else "Pending"},
    }
    if ready:
        pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return pod


@pytest.mark.parametrize(
    ("completions", "parallelism", "completed", "active", "creates", "deletes", "active_after"),
    [
        (4, 4, set(), [], [0, 1, 2, 3], [], 4),
        # elastic scale up 1 -> 4: exactly the new indexes
        (4, 4, set(), [0], [1, 2, 3], [], 4),
        # elastic scale down 4 -> 2: out-of-range indexes go
        (2, 2, set(), [0, 1, 2, 3], [], ["p2", "p3"], 2),
        # scaled to 0: everything goes
        (0, 0, set(), [0, 1], [], ["p0", "p1"], 0),
        # completed indexes are not recreated; parallelism caps creations
        (5, 2, {0, 1}, [], [2, 3], [], 2),
        # lowered parallelism deletes the highest indexes
        (4, 1, set(), [0, 1, 2], [], ["p2", "p1"], 1),
    ],
)
def test_plan_indexed(
    completions: int,
    parallelism: int,
    completed: set[int],
    active: list[int],
    creates: list[int],
    deletes: list[str],
    active_after: int,
) -> None:
    plan = plan_indexed(completions, parallelism, completed, [_pod(i) for i in active], 500)
    assert plan.create_indexes == creates
    assert [p["metadata"]["name"] for p in plan.delete] == deletes
    assert plan.active_after == active_after


def test_plan_indexed_keeps_the_running_duplicate_of_an_index() -> None:
    pending = _pod(1, name="pending")
    running = _pod(1, name="running", node="n1", ready=True)
    plan = plan_indexed(2, 2, set(), [pending, _pod(0), running], 500)
    assert [p["metadata"]["name"] for p in plan.delete] == ["pending"]
    assert plan.create_indexes == []


def test_plan_indexed_caps_creations_per_sync() -> None:
    plan = plan_indexed(1000, 1000, set(), [], 500)
    assert plan.create_indexes == list(range(500))


@pytest.mark.parametrize(
    ("completions", "parallelism", "succeeded", "active", "creates", "deletes"),
    [
        (5, 2, 0, 0, 2, 0),
        (5, 3, 4, 0, 1, 0),
        (5, 3, 0, 5, 0, 2),
        (None, 3, 0, 1, 2, 0),
        # work queue: after one success no new pods start
        (None, 3, 1, 1, 0, 0),
    ],
)
def test_plan_non_indexed(
    completions: int | None, parallelism: int, succeeded: int, active: int, creates: int, deletes: int
) -> None:
    plan = plan_non_indexed(completions, parallelism, succeeded, [_pod(i) for i in range(active)], 500)
    assert plan.create_count == creates
    assert len(plan.delete) == deletes
