"""The gang scenario's pure parts: the timeline figures (bench/gang.py), its recorder, scenario, manifests,
contenders and report."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bench.contenders import BY_KEY, CONTENDERS, GANG_CONTENDER_KEYS, for_scenario, placement_problems
from bench.gang import GangOutcome, Holding, PodEvent, PodStage, gang_outcome, stage_of
from bench.recorder import GangRecorder
from bench.repeats import aggregate
from bench.report import markdown_table, scenario_label, write_outputs
from bench.scenarios import (
    FULL_SCENARIOS,
    GANG_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    TOPOLOGY_KEY,
    Backlog,
    Scenario,
    gang_jobset_manifest,
    gang_jobset_names,
    scenarios_named,
)
from bench.strategies import measured_jobsets, run_namespace
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    JOB_NAME_LABEL,
    JOBSET_NAME_LABEL,
    RESIZE_LABEL,
    STRATEGY_ANNOTATION,
    Strategy,
)
from tests.support.builders import make_job, make_pod

B, R, S, G = PodStage.BOUND, PodStage.RUNNING, PodStage.SUCCEEDED, PodStage.GONE


def ev(at: float, pod: str, stage: PodStage, domain: str = "d0") -> PodEvent:
    """pod "a1" belongs to JobSet "a"."""
    return PodEvent(at, pod, pod[0], domain if stage is not PodStage.PENDING else "", stage)


@pytest.mark.parametrize(
    ("events", "end", "completed", "max_partial", "partial_seconds", "all_complete"),
    [
        pytest.param([], 10.0, 0, 0, 0.0, None, id="nothing happened"),
        pytest.param(
            [ev(1, "a1", B), ev(1, "a2", B), ev(2, "a1", R), ev(3, "a2", R), ev(6, "a1", S), ev(6, "a2", S)],
            10.0,
            1,
            1,
            2.0,
            None,
            id="a whole then done; b never started: not all complete",
        ),
        pytest.param(
            [ev(1, "a1", B, "d0"), ev(1, "a2", B, "d1"), ev(2, "a1", R, "d0"), ev(2, "a2", R, "d1")],
            10.0,
            0,
            1,
            2.0,
            None,
            id="two domains held one second before the JobSet is whole",
        ),
        pytest.param(
            [ev(1, "a1", R, "d0"), ev(1, "b1", R, "d1")],
            11.0,
            0,
            2,
            20.0,
            None,
            id="deadlock: two half JobSets hold a domain each until the end",
        ),
        pytest.param(
            [ev(1, "a1", R, "d0"), ev(4, "a1", G, "d0")],
            10.0,
            0,
            1,
            3.0,
            None,
            id="a pod gone stops holding",
        ),
        pytest.param(
            [ev(1, "a1", R, "d0"), ev(20, "b1", R, "d1")],
            10.0,
            0,
            1,
            9.0,
            None,
            id="events after the end are ignored",
        ),
        pytest.param(
            [
                *(ev(0, p, R, "d0") for p in ("a1", "a2")),
                *(ev(0, p, R, "d1") for p in ("b1", "b2")),
                *(ev(4, p, S, "d0") for p in ("a1", "a2")),
                *(ev(5, p, S, "d1") for p in ("b1", "b2")),
            ],
            9.0,
            2,
            0,
            0.0,
            5.0,
            id="both whole at once: nothing partial, all complete at the last completion",
        ),
    ],
)
def test_gang_outcome_figures(
    events: list[PodEvent],
    end: float,
    completed: int,
    max_partial: int,
    partial_seconds: float,
    all_complete: float | None,
) -> None:
    outcome = gang_outcome(events, {"a": 2, "b": 2}, end)
    fields = outcome.fields()
    assert fields["jobsets_completed"] == completed
    assert fields["max_partially_placed_jobsets"] == max_partial
    assert fields["partial_domain_seconds"] == partial_seconds
    assert fields["seconds_to_all_complete"] == all_complete


def test_a_jobset_shrunk_by_elastic_is_partial_until_all_of_its_pods_run() -> None:
    # Size 4 (the gang), but only the two leaders exist yet: both Running is not whole.
    outcome = gang_outcome([ev(0, "a1", R, "d0"), ev(0, "a2", R, "d1")], {"a": 4}, 5.0)
    assert (outcome.max_partially_placed_jobsets, outcome.partial_domain_seconds) == (1, 10.0)
    assert outcome.whole_at == {}


def test_holdings_are_split_where_the_jobset_becomes_whole() -> None:
    events = [ev(1, "a1", B), ev(1, "a2", B), ev(2, "a1", R), ev(3, "a2", R), ev(6, "a1", S), ev(7, "a2", S)]
    outcome = gang_outcome(events, {"a": 2}, 10.0)
    assert outcome.holdings == [Holding("a", "d0", 1, 3, True), Holding("a", "d0", 3, 7, False)]
    assert (outcome.whole_at, outcome.completed_at) == ({"a": 3}, {"a": 7})
    assert outcome.fields()["domain_timeline"] == [
        {"jobset": "a", "domain": "d0", "from": 1, "to": 3, "partial": True},
        {"jobset": "a", "domain": "d0", "from": 3, "to": 7, "partial": False},
    ]


def test_the_events_may_come_in_any_order() -> None:
    events = [ev(3, "a2", R), ev(1, "a1", B), ev(2, "a1", R), ev(1, "a2", B)]
    assert gang_outcome(events, {"a": 2}, 5.0) == gang_outcome(
        sorted(events, key=lambda e: e.at), {"a": 2}, 5.0
    )


def test_no_jobsets_complete_trivially() -> None:
    assert GangOutcome(jobsets=0).seconds_to_all_complete == 0.0


def pod(phase: str | None, node: str = "", labels: dict[str, str] | None = None) -> dict[str, Any]:
    built = make_pod("p", "ns").index(0).node(node or None).phase(phase)
    for key, value in (labels or {}).items():
        built.label(key, value)
    return built.obj()


@pytest.mark.parametrize(
    ("obj", "deleted", "stage"),
    [
        (pod("Pending"), False, PodStage.PENDING),
        (pod(None), False, PodStage.PENDING),
        (pod("Pending", "n1"), False, PodStage.BOUND),
        (pod("Running", "n1"), False, PodStage.RUNNING),
        (pod("Succeeded", "n1"), False, PodStage.SUCCEEDED),
        (pod("Failed", "n1"), False, PodStage.GONE),
        (pod("Running", "n1"), True, PodStage.GONE),
    ],
)
def test_stage_of_a_pod(obj: dict[str, Any], deleted: bool, stage: PodStage) -> None:
    assert stage_of(obj, deleted=deleted) is stage


def test_gang_recorder_records_changes_once_and_signals_completion() -> None:
    async def scenario() -> None:
        recorder = GangRecorder({"n1": "pool-01"}, {"a": 1}, clock=lambda: 12.5)
        labels = {JOBSET_NAME_LABEL: "a", JOB_NAME_LABEL: "a-w-0"}
        recorder.observe("ADDED", pod("Pending", labels=labels))
        recorder.observe("MODIFIED", pod("Pending", "n1", labels))
        recorder.observe("MODIFIED", pod("Pending", "n1", labels))  # no change: no event
        recorder.observe("MODIFIED", pod("Running", "n1", labels))
        recorder.observe("ADDED", pod("Running", "n1", {JOB_NAME_LABEL: "other"}))  # not a measured JobSet
        assert not recorder.all_complete.is_set()
        recorder.observe("MODIFIED", pod("Succeeded", "n1", labels))
        assert recorder.all_complete.is_set()
        stages = [(e.domain, e.stage) for e in recorder.pod_events]
        assert stages == [
            ("", "pending"),
            ("pool-01", "bound"),
            ("pool-01", "running"),
            ("pool-01", "succeeded"),
        ]
        assert {e.at for e in recorder.relative_to(10.0)} == {2.5}

    asyncio.run(scenario())


GANG = Scenario(
    "g", jobs=3, pods_per_job=4, pools=4, pod_run_seconds=30, gang=True, jobsets=3, gang_deadline_seconds=200
)


def test_a_gang_scenario_counts_every_jobset() -> None:
    assert (GANG.total_pods, GANG.jobset_pods, GANG.contended, GANG.nodes) == (36, 12, True, 4)
    assert GANG.fields()["gang"] is True
    assert (GANG.fields()["jobsets"], GANG.fields()["gang_deadline_seconds"]) == (3, 200)
    assert gang_jobset_names(GANG) == ["gang-0", "gang-1", "gang-2"] == measured_jobsets(GANG)
    plain = Scenario("p", jobs=2, pods_per_job=2, pools=2)
    assert measured_jobsets(plain) == ["bench"]
    assert (plain.fields()["gang"], plain.fields()["jobsets"]) == (False, 1)


def test_the_gang_scenario_is_in_the_full_bench() -> None:
    assert [s.name for s in FULL_SCENARIOS if s.gang] == ["gang-4x3"]
    assert [s.jobsets for s in scenarios_named(["gang-3x3", "gang-4x3"])] == [3, 4]
    for scenario in scenarios_named(["gang-3x3", "gang-4x3"]):
        # One JobSet fits, two do not: the race can end with both partial (3 Jobs each on 4 pools).
        assert scenario.jobs <= scenario.pools < 2 * scenario.jobs


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gang_deadline_seconds": None}, "needs pod_run_seconds and a deadline"),
        ({"pod_run_seconds": None}, "needs pod_run_seconds and a deadline"),
        ({"pools": 2}, "one gang JobSet alone must fit"),
        ({"jobsets": 0}, "must be >= 1"),
        ({"gang": False}, "need a gang or Kueue scenario"),
        ({"backlog": Backlog(1, 1)}, "a gang combines with neither"),
    ],
)
def test_gang_scenario_validation(kwargs: dict[str, Any], message: str) -> None:
    base: dict[str, Any] = {
        "jobs": 3,
        "pods_per_job": 2,
        "pools": 4,
        "pod_run_seconds": 5.0,
        "gang": True,
        "jobsets": 3,
        "gang_deadline_seconds": 60.0,
    }
    with pytest.raises(ValueError, match=message):
        Scenario("bad", **{**base, **kwargs})


@pytest.mark.parametrize("all_or_nothing", [False, True])
def test_gang_jobsets_make_every_pod_a_member_of_the_jobsets_gang(all_or_nothing: bool) -> None:
    manifest = gang_jobset_manifest(
        GANG, Strategy.ELASTIC, name="gang-1", namespace="ns", all_or_nothing=all_or_nothing
    )
    template = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert template["metadata"]["annotations"] == {
        STRATEGY_ANNOTATION: "elastic",
        GANG_ANNOTATION: "gang-1",
        GANG_SIZE_ANNOTATION: "12",
    }
    assert (ALL_OR_NOTHING_ANNOTATION in manifest["metadata"]["annotations"]) is all_or_nothing
    if all_or_nothing:
        assert manifest["metadata"]["annotations"][ALL_OR_NOTHING_ANNOTATION] == "true"
    baseline = gang_jobset_manifest(GANG, None, name="gang-0", namespace="ns", all_or_nothing=False)
    assert (
        STRATEGY_ANNOTATION
        not in baseline["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"][
            "annotations"
        ]
    )


def test_each_scenario_runs_the_contenders_that_apply_to_it() -> None:
    gang = [c.key for c in for_scenario(CONTENDERS, gang=True)]
    assert gang == [
        "jobset",
        "elastic",
        "scheduling-gate",
        "elastic+all-or-nothing",
        "scheduling-gate+all-or-nothing",
    ]
    assert set(gang) == GANG_CONTENDER_KEYS
    assert [c.key for c in for_scenario(CONTENDERS, gang=False)] == [
        "jobset",
        "gate",
        "elastic",
        "scheduling-gate",
        "affinity",
    ]
    assert BY_KEY["elastic+all-or-nothing"].strategy is Strategy.ELASTIC
    assert BY_KEY["scheduling-gate+all-or-nothing"].all_or_nothing
    assert run_namespace(GANG, BY_KEY["elastic+all-or-nothing"]) == "bench-g-elastic-all-or-nothing-r1"


def job(name: str, resize: str | None) -> dict[str, Any]:
    built = make_job(name)
    return (built.label(RESIZE_LABEL, resize) if resize else built).obj()


def gang_pod(job_name: str, index: int, node: str) -> dict[str, Any]:
    built = make_pod(f"{job_name}-{index}").job_label(job_name).index(index)
    return (built.node(node) if node else built.gated("g")).obj()


@pytest.mark.parametrize(
    ("strategy", "jobs", "pods", "count"),
    [
        pytest.param("elastic", [job("a", "pending")], [gang_pod("a", 0, "")], 0, id="leader waiting"),
        pytest.param("elastic", [job("a", "pending")], [gang_pod("a", 0, "n1")], 1, id="bound, not resized"),
        pytest.param("scheduling-gate", [job("a", None)], [gang_pod("a", 1, "")], 0, id="gated follower"),
        pytest.param("scheduling-gate", [job("a", None)], [gang_pod("a", 1, "n1")], 1, id="bound, unpinned"),
    ],
)
def test_a_gang_run_checks_only_what_was_placed(
    strategy: str, jobs: list[dict[str, Any]], pods: list[dict[str, Any]], count: int
) -> None:
    problems = placement_problems(
        BY_KEY[strategy], jobs, pods, expected_jobs=1, topology_key=TOPOLOGY_KEY, only_placed=True
    )
    assert len(problems) == count, problems


def gang_report() -> dict[str, Any]:
    result = {
        **gang_outcome(
            [ev(0, "a1", R, "pool-00"), ev(1, "b1", R, "pool-01")], {"a": 2, "b": 2}, 3.0
        ).fields(),
        "deadline_seconds": 3.0,
        "exclusive_violations": 0,
    }
    scenario = {
        **GANG.fields(),
        "jobsets": 2,
        "results": {"jobset": aggregate([result]), "elastic": aggregate([{"error": "BenchError: boom"}])},
    }
    return {"repeat": 1, "scenarios": [scenario]}


def test_the_report_has_a_gang_table_and_a_domain_chart(tmp_path: Path) -> None:
    report = gang_report()
    assert scenario_label(report["scenarios"][0]) == "2 gang JobSets of 3x4 on 4 pools, contended"
    table = markdown_table(report)
    assert "Gang JobSets racing for pools:" in table
    row = "| 2 gang JobSets of 3x4 on 4 pools, contended | `jobset` | 0 | n/a | 2 | 5.00 | 3.00 |"
    assert row in table
    paths = write_outputs(report, tmp_path)
    assert tmp_path / "gang_domains_g.png" in paths
    assert (tmp_path / "gang_domains_g.png").stat().st_size > 0
    plain = {"repeat": 1, "scenarios": [{**report["scenarios"][0], "gang": False}]}
    assert "Gang JobSets" not in markdown_table(plain)
