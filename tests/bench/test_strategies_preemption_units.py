"""Pure parts of the benchmark's preemption scenario: the scenario, its JobSets, its figures, its table."""

from __future__ import annotations

from typing import Any

import pytest

from bench.contenders import JOBSET
from bench.counters import SchedulerCounts
from bench.measures import LowPriorityState, low_priority_state, preemption_fields
from bench.repeats import aggregate
from bench.report import markdown_table, scenario_label
from bench.scenarios import FULL_SCENARIOS, GPUS_PER_NODE, Backlog, Scenario, jobset_manifest
from bench.strategies import (
    high_priority_outcome,
    jobset_namespaces,
    low_priority_namespace,
    priority_class_names,
    side_namespaces,
)

PREEMPTION = Scenario("p", jobs=4, pods_per_job=2, pools=4, preemption=True)


def test_a_preemption_scenario_fills_every_pool_with_one_job() -> None:
    (scenario,) = [s for s in FULL_SCENARIOS if s.preemption]
    assert scenario.pools == scenario.jobs
    assert scenario.gpus_per_pod == GPUS_PER_NODE  # each pod a whole node
    assert scenario.nodes == scenario.jobs * scenario.pods_per_job  # a pool holds exactly one Job
    assert scenario.fields()["preemption"] is True


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pools": 5}, "one pool per Job"),
        ({"pools": 2, "pod_run_seconds": 30.0}, "one pool per Job"),
        ({"pod_run_seconds": 30.0}, "run until preempted"),
        ({"backlog": Backlog(1, 10)}, "neither a backlog"),
    ],
)
def test_preemption_scenario_validation(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Scenario("x", **{"jobs": 4, "pods_per_job": 2, "pools": 4, **kwargs}, preemption=True)


def test_the_jobsets_carry_their_priority_class_and_whole_node_pods() -> None:
    low = jobset_manifest(
        PREEMPTION, None, name="low", namespace="ns-low", priority_class_name="c-low", max_restarts=5
    )
    assert low["spec"]["failurePolicy"] == {"maxRestarts": 5}
    pod = low["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "c-low"
    assert pod["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == str(GPUS_PER_NODE)
    plain = jobset_manifest(FULL_SCENARIOS[0], None, name="b", namespace="ns")
    plain_pod = plain["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert "priorityClassName" not in plain_pod
    assert plain_pod["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "1"


def test_the_low_priority_jobset_has_its_own_namespace_exempt_like_the_run() -> None:
    namespace = "bench-p-jobset-r1"
    low = low_priority_namespace(namespace)
    assert low == "bench-p-jobset-r1-low"
    assert jobset_namespaces(PREEMPTION, namespace) == [namespace, low]
    assert side_namespaces(PREEMPTION, namespace) == [low]
    assert jobset_namespaces(FULL_SCENARIOS[0], namespace) == [namespace]
    assert side_namespaces(FULL_SCENARIOS[0], namespace) == []
    assert priority_class_names("ns") == ("ns-low", "ns-high")
    assert not JOBSET.uses_project_webhooks


def jobset(restarts: int = 0, failed: bool = False) -> dict[str, Any]:
    conditions = [{"type": "Failed", "status": "True"}] if failed else [{"type": "Failed", "status": "False"}]
    return {"status": {"restarts": restarts, "conditions": conditions}}


@pytest.mark.parametrize(
    ("obj", "running", "state"),
    [
        (jobset(), 8, LowPriorityState.RUNNING),
        (jobset(restarts=2), 0, LowPriorityState.RESTARTED_WAITING),
        (jobset(restarts=2), 8, LowPriorityState.RUNNING),
        (jobset(), 3, LowPriorityState.PREEMPTED_NOT_RESTARTED),
        (jobset(restarts=5, failed=True), 0, LowPriorityState.FAILED),
        ({}, 0, LowPriorityState.PREEMPTED_NOT_RESTARTED),
    ],
)
def test_low_priority_state(obj: dict[str, Any], running: int, state: LowPriorityState) -> None:
    assert low_priority_state(obj, running, 8) is state


def test_preemption_fields_read_the_scheduler_counters_and_the_low_jobset() -> None:
    scheduler = SchedulerCounts(
        attempts=20, unschedulable=8, preemptions=5, preemption_victims=8, queue_moves_by_event={}
    )
    assert preemption_fields(scheduler, jobset(restarts=1), 0, 8) == {
        "pods_preempted": 8,
        "preemptions": 5,
        "low_priority_restarts": 1,
        "low_priority_state": "restarted-waiting",
        "low_priority_pods_running": 0,
    }


@pytest.mark.parametrize(
    ("seconds", "ran", "stopped_by", "expected"),
    [
        (
            2.0004,
            8,
            120.0,
            {
                "high_priority_all_running": True,
                "high_priority_seconds_to_all_running": 2.0,
                "high_priority_pods_running": 8,
            },
        ),
        (
            None,
            7,
            120.0,
            {
                "high_priority_all_running": False,
                "high_priority_seconds_to_all_running": None,
                "seconds_to_all_running": None,
                "high_priority_pods_running": 7,
                "high_priority_not_running_because": "7/8 pods ran (timeout after 120s)",
            },
        ),
        (
            None,
            0,
            "the pod watch ended",
            {
                "high_priority_all_running": False,
                "high_priority_seconds_to_all_running": None,
                "seconds_to_all_running": None,
                "high_priority_pods_running": 0,
                "high_priority_not_running_because": "0/8 pods ran (the pod watch ended)",
            },
        ),
    ],
)
def test_high_priority_outcome(
    seconds: float | None, ran: int, stopped_by: str | float, expected: dict[str, Any]
) -> None:
    assert high_priority_outcome(seconds, ran, 8, stopped_by) == expected


def test_the_preemption_table_lists_preemption_scenarios_only() -> None:
    shape = {"jobs": 4, "pods_per_job": 2, "pools": 4, "contended": False}
    result = {
        "high_priority_all_running": True,
        "high_priority_seconds_to_all_running": 1.5,
        "pods_preempted": 8,
        "low_priority_state": "restarted-waiting",
        "exclusive_violations": 0,
    }
    report: dict[str, Any] = {
        "repeat": 1,
        "scenarios": [
            {**shape, "name": "plain", "results": {"elastic": aggregate([{}])}},
            {**shape, "name": "p", "preemption": True, "results": {"elastic": aggregate([result])}},
        ],
    }
    label = "4x2 on 4 pools, high priority preempting low"
    assert scenario_label(report["scenarios"][1]) == label
    table = markdown_table(report)
    assert "elastic / jobset" not in table  # no scenario ran jobset: no ratios table
    preemption = table[table.index("Preemption:") : table.index("A low-priority JobSet")].splitlines()
    rows = [line for line in preemption if line.startswith("| 4x2")]
    cells = "yes | 1.50 | 8 | n/a | n/a | restarted-waiting | n/a | n/a | n/a | n/a | 0"
    assert rows[0] == f"| {label} | `elastic` | {cells} |"
    assert not [line for line in preemption if line.startswith("| 4x2 on 4 pools |")]
    assert "Preemption:" not in markdown_table({**report, "scenarios": report["scenarios"][:1]})
