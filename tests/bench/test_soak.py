"""`python -m bench soak --quick` end to end on the real control plane (invariants, never timings), and the
soak's pure checks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.soak import (
    NAMESPACE,
    QUICK,
    PodFollower,
    SimultaneousExclusivity,
    SoakError,
    create_job,
    job_names,
    job_outcomes,
    main,
    pending_pods,
    project_answers,
    soak_job,
    watch_restart_reasons,
)
from devstack.controlplane.audit import Request
from devstack.controlplane.kwok import run_time_annotations
from devstack.exclusivity import PodState
from placement.constants import RESIZE_DONE, RESIZE_LABEL, Strategy
from tests.support.builders import make_job

REQUIRED_FIELDS = (
    "jobs",
    "faults_injected",
    "jobs_at_target",
    "jobs_resized_twice",
    "jobs_pending",
    "exclusive_violations",
    "seconds_to_converge",
)


@pytest.mark.kube
@pytest.mark.xdist_group("kube-soak")
@pytest.mark.timeout(900)
def test_quick_soak_converges_through_every_fault(tmp_path: Path) -> None:
    code = main(["--quick", "--out", str(tmp_path)])
    result: dict[str, Any] = json.loads((tmp_path / "soak.json").read_text())
    print(json.dumps({k: v for k, v in result.items() if k != "plan"}))
    assert code == 0, result.get("problems")
    assert all(field in result for field in REQUIRED_FIELDS)
    assert result["control_plane"] == "kube"
    assert result["jobs"] == QUICK.jobs
    assert result["jobs_by_strategy"] == {Strategy.ELASTIC: 4, Strategy.SCHEDULING_GATE: 4}
    assert result["faults_injected"] == {fault: QUICK.faults.count(fault) for fault in QUICK.faults}
    effects = result["fault_effects"]
    assert effects["api_429"] > 0  # API Priority and Fairness rejected the project's requests
    assert effects["process_watch_restarts"].get("gone", 0) > 0  # watches expired and re-listed
    assert result["pod_watch"].get("watch_expired", 0) > 0
    assert result["jobs_at_target"] == result["jobs"]
    assert result["jobs_resized_twice"] == 0
    assert result["jobs_pending"] == 0
    assert result["pods_pending"] == 0
    assert result["exclusive_violations"] == 0
    assert result["elastic_jobs_patched_once"] == result["elastic_jobs"] == 4
    assert result["seconds_to_converge"] > 0


# --- the pure checks: each must be able to fail ----------------------------------------------------------

DOMAINS = {"n1": "pool-a", "n2": "pool-b"}


def state(pod: str, job: str, node: str, *, active: bool = True) -> PodState:
    return PodState(f"soak/{pod}", f"soak/{job}" if job else "", node, active)


@pytest.mark.parametrize(
    ("events", "violations"),
    [
        ([state("a-0", "a", "n1"), state("a-1", "a", "n1")], 0),
        ([state("a-0", "a", "n1"), state("b-0", "b", "n1")], 1),  # two Jobs in one domain
        ([state("a-0", "a", "n1"), state("a-1", "a", "n2")], 1),  # one Job in two domains
        # the pool failed: a's pods there ended, then a restarted in another pool: fine
        ([state("a-0", "a", "n1"), state("a-0", "a", "n1", active=False), state("a-0b", "a", "n2")], 0),
        # the domain reused after a finished: fine
        ([state("a-0", "a", "n1"), state("a-0", "a", "n1", active=False), state("b-0", "b", "n1")], 0),
        ([state("x", "", "n1"), state("b-0", "b", "n1")], 0),  # pods of no Job are ignored
    ],
)
def test_simultaneous_exclusivity(events: list[PodState], violations: int) -> None:
    replay = SimultaneousExclusivity(DOMAINS)
    for event in events:
        replay.observe(event)
    assert replay.violations == violations, replay.problems


def finished_job(
    name: str, *, generation: int, completions: int, succeeded: int, resized: bool
) -> dict[str, Any]:
    built = make_job(name).generation(generation).spec(completions=completions)
    built.status(succeeded=succeeded).condition("Complete")
    return (built.label(RESIZE_LABEL, RESIZE_DONE) if resized else built).obj()


def test_job_outcomes_classify_every_failure_mode() -> None:
    strategies: dict[str, str] = {
        "ok-el": Strategy.ELASTIC,
        "ok-sg": Strategy.SCHEDULING_GATE,
        "twice": Strategy.ELASTIC,
        "size-one": Strategy.ELASTIC,
        "sg-changed": Strategy.SCHEDULING_GATE,
        "running": Strategy.ELASTIC,
        "never-created": Strategy.ELASTIC,
    }
    jobs = [
        finished_job("ok-el", generation=2, completions=3, succeeded=3, resized=True),
        finished_job("ok-sg", generation=1, completions=3, succeeded=3, resized=False),
        finished_job("twice", generation=3, completions=3, succeeded=3, resized=True),
        finished_job("size-one", generation=1, completions=1, succeeded=1, resized=False),
        finished_job("sg-changed", generation=2, completions=3, succeeded=3, resized=False),
        {"metadata": {"name": "running", "generation": 2}, "spec": {"completions": 3}, "status": {}},
    ]
    outcomes = job_outcomes(jobs, strategies, target=3)
    assert outcomes["at_target"] == ["ok-el", "ok-sg", "sg-changed", "twice"]
    assert outcomes["resized_twice"] == ["sg-changed", "twice"]
    assert outcomes["pending"] == ["running"]
    assert outcomes["missing"] == ["never-created"]
    assert "size-one" not in outcomes["at_target"]


def test_pending_pods_are_the_non_terminal_ones() -> None:
    pods = [
        {"metadata": {"name": name}, "status": {"phase": phase}}
        for name, phase in (("a", "Succeeded"), ("b", "Failed"), ("c", "Pending"), ("d", "Running"))
    ]
    assert pending_pods(pods) == ["c", "d"]


def test_jobs_interleave_strategies_and_carry_the_annotations() -> None:
    names = job_names(QUICK)
    assert len(names) == QUICK.jobs
    assert list(names.values())[:2] == [Strategy.ELASTIC, Strategy.SCHEDULING_GATE]
    job = soak_job("el-0000", Strategy.ELASTIC, 4, 30)
    template_notes = job["spec"]["template"]["metadata"]["annotations"]
    assert template_notes == {**job["metadata"]["annotations"], **run_time_annotations(30)}
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 4
    assert job["spec"]["backoffLimit"] >= 4  # a whole pool failing must not fail the Job
    assert job["spec"]["podReplacementPolicy"] == "Failed"  # never in the old pool and a new one at once


def _request(
    user: str, verb: str, resource: str, code: int, *, name: str = "", namespace: str = NAMESPACE
) -> Request:
    return Request(user, "agent", verb, "", resource, "", namespace, name, code)


def test_project_answers_count_the_projects_errors_patches_and_refused_pods() -> None:
    project = {"system:serviceaccount:ep:resizer"}
    requests = [
        _request("system:serviceaccount:ep:resizer", "list", "pods", 429),
        _request("system:serviceaccount:ep:resizer", "patch", "jobs", 200, name="el-0000"),
        _request("system:serviceaccount:ep:resizer", "patch", "jobs", 200, name="el-0000"),
        _request("system:serviceaccount:ep:resizer", "patch", "jobs", 409, name="el-0001"),
        _request("system:serviceaccount:ep:resizer", "get", "jobs", 503),
        _request("system:kube-controller-manager", "list", "pods", 429),  # not the project's
        _request("system:serviceaccount:kube-system:job-controller", "create", "pods", 500),
        _request("system:serviceaccount:kube-system:job-controller", "create", "pods", 201),
    ]
    answers = project_answers(requests, project)
    assert answers == {
        "codes": {"api_429": 1, "api_5xx": 1},
        "job_patches": {"el-0000": 2},
        "pod_creates_refused": 1,
    }


def test_watch_restart_reasons_sum_every_informer() -> None:
    page = """# HELP exclusive_placement_resizer_watch_restarts_total Watches restarted
exclusive_placement_resizer_watch_restarts_total{informer="pods",reason="gone"} 2.0
exclusive_placement_resizer_watch_restarts_total{informer="jobs",reason="gone"} 1.0
exclusive_placement_resizer_watch_restarts_total{informer="jobs",reason="dropped"} 3.0
exclusive_placement_watch_restarts_total{informer="pods",reason="ended"} 1.0
exclusive_placement_resizer_resizes_total 9.0
"""
    assert watch_restart_reasons(page) == {"gone": 3, "dropped": 3, "ended": 1}


def _pod(name: str, version: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": str(version)}}


@pytest.mark.parametrize(
    ("known", "final", "seen"),
    [
        ([], [], True),
        ([("a", 5)], [("a", 5)], True),
        ([("a", 7)], [("a", 5)], True),
        ([("a", 4)], [("a", 5)], False),
        ([], [("a", 5)], False),
        ([("a", 5), ("gone", 3)], [("a", 5)], False),
    ],
)
def test_the_pod_watch_has_caught_up_only_with_every_final_state_and_deletion(
    known: list[tuple[str, int]], final: list[tuple[str, int]], seen: bool
) -> None:
    follower = PodFollower(lambda _state: None)
    for name, version in known:
        follower.known[name] = _pod(name, version)
    assert follower.has_seen([_pod(name, version) for name, version in final]) is seen


def create_answered(status: int) -> None:
    """`create_job` against an API server that answers every request with `status`."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json={"kind": "Status", "code": status})

    async def create() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://api") as http:
            await create_job(http, {"metadata": {"name": "j"}})

    asyncio.run(create())


def test_creating_a_job_that_an_earlier_attempt_created_is_not_an_error() -> None:
    create_answered(409)


@pytest.mark.parametrize("status", [403, 404, 422])
def test_creating_a_job_refused_otherwise_is_an_error_with_the_status(status: int) -> None:
    with pytest.raises(SoakError, match=f"HTTP {status}") as refused:
        create_answered(status)
    assert refused.value.status == status
