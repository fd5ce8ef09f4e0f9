"""All-or-nothing per JobSet: the admission queue's decisions (placement/gang.py) and the webhook's part
(the JobSet's annotation onto its Jobs, the gate onto their leaders), as tables."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jsonpatch
import pytest

from placement.admission import (
    LeaderState,
    LeaderStatus,
    PodPlan,
    gang_annotations,
    mutate_job,
    mutate_pod,
    plan_pod,
)
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_GATE,
    ALL_OR_NOTHING_LABEL,
    GANG_QUEUED_AT_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    GKE_NODEPOOL_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_KEY_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_NAME_LABEL,
    JOBSET_NODE_SELECTOR_ANNOTATION,
    JOBSET_RESTART_ATTEMPT_LABEL,
    PRIORITY_LABEL,
    RELEASED_AT_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    Strategy,
)
from placement.gang import (
    AdmissionPlan,
    Gang,
    GangId,
    GangState,
    Holding,
    NodeView,
    admitted_gang,
    as_released,
    build_gang,
    format_time,
    gang_complete,
    gang_of,
    gang_size,
    gang_state,
    held_nodes,
    parse_time,
    plan_admission,
    record_of_pods,
    release_patch,
    trusted_member,
)
from placement.jobset import JobSetRef, JobSetStartup, JobSetUnknown, exclusive_jobs, jobset_startup
from placement.reserved import GANG_KEYS
from tests.placement.placement_pods import without_resize_keys

Obj = dict[str, Any]
NS = "team"
T0 = 1_800_000_000.0
TIMEOUT = 300.0


def stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def leader(
    jobset: str,
    job: int,
    *,
    gated: bool = True,
    node: str | None = None,
    size: int = 3,
    priority: int = 0,
    queued_at: float = T0,
    released_at: float | None = None,
    phase: str = "Pending",
) -> Obj:
    annotations = {
        JOB_COMPLETION_INDEX_ANNOTATION: "0",
        TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL,
        ALL_OR_NOTHING_ANNOTATION: "true",
        GANG_SIZE_ANNOTATION: str(size),
        GANG_QUEUED_AT_ANNOTATION: stamp(queued_at),
    }
    if released_at is not None:
        annotations[RELEASED_AT_ANNOTATION] = stamp(released_at)
    spec: Obj = {"priority": priority}
    if gated:
        spec["schedulingGates"] = [{"name": ALL_OR_NOTHING_GATE}]
    if node:
        spec["nodeName"] = node
    name = f"{jobset}-w-{job}"
    return {
        "metadata": {
            "name": f"{name}-0-abc",
            "namespace": NS,
            "uid": f"{name}-uid",
            "creationTimestamp": stamp(queued_at),
            "labels": {JOBSET_NAME_LABEL: jobset, JOBSET_RESTART_ATTEMPT_LABEL: "0"},
            "annotations": annotations,
            "ownerReferences": [{"kind": "Job", "name": name, "uid": f"{name}-job", "controller": True}],
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def gang(jobset: str, pods: list[Obj]) -> Gang:
    built = build_gang(GangId(NS, jobset), pods, record_of_pods(GangId(NS, jobset), pods))
    assert built is not None
    return built


def gated_gang(jobset: str, jobs: int = 3, **kwargs: Any) -> Gang:
    return gang(jobset, [leader(jobset, job, size=jobs, **kwargs) for job in range(jobs)])


def pools(count: int = 4, *, unschedulable: frozenset[int] = frozenset()) -> list[NodeView]:
    """`count` pools of one node each: node-<i> in pool-<i>."""
    return [
        NodeView(f"node-{i}", {GKE_NODEPOOL_LABEL: f"pool-{i}"}, unschedulable=i in unschedulable)
        for i in range(count)
    ]


def held(*nodes: str, priority: int = 0) -> dict[str, Holding]:
    """Nodes holding a bound exclusive leader, and that leader's priority."""
    return dict.fromkeys(nodes, Holding(priority, frozenset({str(priority)})))


def blocked(plan: AdmissionPlan) -> GangId | None:
    return plan.blocked.gang if plan.blocked is not None else None


def released(plan_releases: Any) -> list[str]:
    return [release.gang.jobset for release in plan_releases]


# --- the queue ------------------------------------------------------------------------------------------


def test_two_jobsets_of_three_on_four_pools_one_is_released_the_other_waits_whole() -> None:
    plan = plan_admission([gated_gang("b", queued_at=T0 + 1), gated_gang("a")], pools(), {}, T0 + 2, TIMEOUT)
    assert released(plan.releases) == ["a"]
    assert len(plan.releases[0].pods) == 3
    assert plan.blocked is not None
    assert (plan.blocked.gang, plan.blocked.needs, plan.blocked.free) == (GangId(NS, "b"), 3, 1)


@pytest.mark.parametrize(
    ("a_leaders", "held_by_a", "expected_released", "expected_blocked"),
    [
        # a released, none bound yet: its 3 domains are promised, b cannot have 3 of the 4
        ([dict(gated=False, released_at=T0)] * 3, [], [], "b"),
        # a bound in 3 pools: they are held, 1 free
        (
            [dict(gated=False, released_at=T0, node=f"node-{i}") for i in range(3)],
            ["node-0", "node-1", "node-2"],
            [],
            "b",
        ),
        # a finished: its nodes are free again
        ([dict(gated=False, node=f"node-{i}", phase="Succeeded") for i in range(3)], [], ["b"], None),
    ],
    ids=["promised", "held", "finished"],
)
def test_domains_promised_or_held_by_another_jobset_are_not_free(
    a_leaders: list[dict[str, Any]],
    held_by_a: list[str],
    expected_released: list[str],
    expected_blocked: str | None,
) -> None:
    a = gang("a", [leader("a", job, **kwargs) for job, kwargs in enumerate(a_leaders)])
    plan = plan_admission([a, gated_gang("b", queued_at=T0 + 1)], pools(), held(*held_by_a), T0 + 2, TIMEOUT)
    assert released(plan.releases) == expected_released
    assert (plan.blocked.gang.jobset if plan.blocked else None) == expected_blocked


def test_higher_priority_goes_first_then_older_then_name() -> None:
    gangs = [
        gated_gang("old"),
        gated_gang("urgent", priority=100, queued_at=T0 + 50),
        gated_gang("new", queued_at=T0 + 9),
    ]
    plan = plan_admission(gangs, pools(9), {}, T0 + 60, TIMEOUT)
    assert released(plan.releases) == ["urgent", "old", "new"]
    tie = plan_admission([gated_gang("y", jobs=1), gated_gang("x", jobs=1)], pools(1), {}, T0, TIMEOUT)
    assert (released(tie.releases), blocked(tie)) == (["x"], GangId(NS, "y"))


def test_strict_fifo_a_small_jobset_does_not_overtake_the_head_waiting_for_domains() -> None:
    gangs = [gated_gang("big", jobs=3), gated_gang("small", jobs=1, queued_at=T0 + 1)]
    plan = plan_admission(gangs, pools(3), held("node-0"), T0, TIMEOUT)
    assert (released(plan.releases), blocked(plan)) == ([], GangId(NS, "big"))


def test_a_jobset_needing_more_domains_than_exist_is_passed_over_not_waited_for() -> None:
    """Strict FIFO would let it block the queue forever: it stays queued, the next JobSet goes."""
    gangs = [gated_gang("huge", jobs=5), gated_gang("next", jobs=2, queued_at=T0 + 1)]
    plan = plan_admission(gangs, pools(4), {}, T0, TIMEOUT)
    assert (released(plan.releases), blocked(plan), plan.unfit) == (
        ["next"],
        None,
        ((GangId(NS, "huge"), 5, 4),),
    )
    cordoned = pools(5, unschedulable=frozenset({4}))  # a cordoned node's domain may come back: wait for it
    plan = plan_admission(gangs, cordoned, {}, T0, TIMEOUT)
    assert (released(plan.releases), blocked(plan), plan.unfit) == ([], GangId(NS, "huge"), ())


def test_unschedulable_nodes_and_unlabelled_nodes_give_no_domain() -> None:
    nodes = [*pools(4, unschedulable=frozenset({3})), NodeView("bare", {}, unschedulable=False)]
    assert blocked(plan_admission([gated_gang("a", jobs=4)], nodes, {}, T0, TIMEOUT)) == GangId(NS, "a")
    assert released(plan_admission([gated_gang("a", jobs=3)], nodes, {}, T0, TIMEOUT).releases) == ["a"]


def test_a_domain_with_one_held_node_is_not_free_even_with_other_free_nodes() -> None:
    nodes = [*pools(3), NodeView("node-0b", {GKE_NODEPOOL_LABEL: "pool-0"}, unschedulable=False)]
    plan = plan_admission([gated_gang("a")], nodes, held("node-0"), T0, TIMEOUT)
    assert plan.blocked is not None
    assert (plan.blocked.gang, plan.blocked.free) == (GangId(NS, "a"), 2)


@pytest.mark.parametrize(("held_priority", "released_now"), [(0, True), (100, False), (500, False)])
def test_a_domain_held_at_a_lower_priority_is_free_to_preempt(held_priority: int, released_now: bool) -> None:
    """Exclusivity holds within a priority level: a higher-priority JobSet's leaders preempt their way into
    domains held by lower-priority Jobs (docs/design.md, "Priorities and preemption")."""
    plan = plan_admission(
        [gated_gang("high", priority=100)], pools(3), held("node-0", priority=held_priority), T0, TIMEOUT
    )
    assert (released(plan.releases) == ["high"]) is released_now


def test_a_jobset_not_all_of_whose_leaders_exist_waits_without_blocking_the_queue() -> None:
    partial = gang("partial", [leader("partial", 0), leader("partial", 1)])
    plan = plan_admission([partial, gated_gang("later", jobs=2, queued_at=T0 + 5)], pools(), {}, T0, TIMEOUT)
    assert released(plan.releases) == ["later"]
    assert plan.states[GangId(NS, "partial")] is GangState.WAITING_FOR_PODS


def test_a_gang_whose_suspension_is_deleting_some_leaders_is_not_released_in_part() -> None:
    """Kueue evicts an admitted all-or-nothing JobSet waiting for 3 domains with 1 free: JobSet suspends its
    Jobs and the Job controller deletes their gated leaders one by one. The one still live fits the free
    domain, but it is a third of the gang: it waits (measured on the kube tier before this: released, bound
    beside the JobSet holding the other pools)."""
    terminating = [leader("evicted", job) for job in (1, 2)]
    for pod in terminating:
        pod["metadata"]["deletionTimestamp"] = stamp(T0 + 30)
    evicted = gang("evicted", [leader("evicted", 0), *terminating])
    plan = plan_admission([evicted], pools(), held("node-0", "node-1", "node-2"), T0 + 30, TIMEOUT)
    assert plan.releases == ()
    assert plan.states[GangId(NS, "evicted")] is GangState.WAITING_FOR_PODS
    whole = gated_gang("evicted")
    taken = held("node-0", "node-1", "node-2")
    assert plan_admission([whole], pools(), taken, T0 + 30, TIMEOUT).releases == ()
    assert released(plan_admission([whole], pools(), {}, T0 + 30, TIMEOUT).releases) == ["evicted"]


def test_a_release_cut_short_is_finished_first_and_its_domains_stay_promised() -> None:
    """A resizer killed after ungating one of three leaders: the next one ungates the other two (and only
    them), before anything else, even when the domains look short."""
    half = gang(
        "half", [leader("half", 0, gated=False, released_at=T0), leader("half", 1), leader("half", 2)]
    )
    plan = plan_admission(
        [gated_gang("next", jobs=2, queued_at=T0 - 100), half], pools(4), {}, T0 + 1, TIMEOUT
    )
    assert [(r.gang.jobset, len(r.pods), r.resumed) for r in plan.releases] == [("half", 2, True)]
    assert plan.blocked is not None
    assert (plan.blocked.gang, plan.blocked.free) == (GangId(NS, "next"), 1)


def test_a_release_that_does_not_bind_within_the_timeout_is_undone_and_frees_its_promise() -> None:
    stuck = gang(
        "stuck",
        [
            leader("stuck", 0, gated=False, released_at=T0, node="node-0"),
            leader("stuck", 1, gated=False, released_at=T0),
            leader("stuck", 2, gated=False, released_at=T0),
        ],
    )
    early = plan_admission(
        [stuck, gated_gang("b", jobs=2)], pools(), held("node-0"), T0 + TIMEOUT - 1, TIMEOUT
    )
    assert (early.timeouts, blocked(early), early.next_deadline) == ((), GangId(NS, "b"), T0 + TIMEOUT)
    late = plan_admission([stuck, gated_gang("b", jobs=2)], pools(), held("node-0"), T0 + TIMEOUT, TIMEOUT)
    assert [(t.gang.jobset, [uid for _key, uid in t.jobs]) for t in late.timeouts] == [
        ("stuck", ["stuck-w-0-job", "stuck-w-1-job", "stuck-w-2-job"])
    ]
    assert released(late.releases) == ["b"]  # 3 free pools (node-0 still held until its leader goes)


def test_a_gate_removed_by_someone_else_starts_no_timeout_clock() -> None:
    """Only the queue's own releases carry `released-at`; a leader ungated by hand is not timed out."""
    by_hand = gang("h", [leader("h", job, gated=False) for job in range(3)])
    plan = plan_admission([by_hand], pools(), {}, T0 + 10 * TIMEOUT, TIMEOUT)
    assert (plan.timeouts, plan.next_deadline, plan.states[GangId(NS, "h")]) == (
        (),
        None,
        GangState.RELEASING,
    )


def test_as_released_removes_only_our_gate_and_leaves_the_pod_alone() -> None:
    pod = leader("a", 0)
    pod["spec"]["schedulingGates"].append({"name": "someone.else/gate"})
    seen = as_released(pod, stamp(T0))
    assert seen["spec"]["schedulingGates"] == [{"name": "someone.else/gate"}]
    assert seen["metadata"]["annotations"][RELEASED_AT_ANNOTATION] == stamp(T0)
    assert {"name": ALL_OR_NOTHING_GATE} in pod["spec"]["schedulingGates"]  # a copy
    assert RELEASED_AT_ANNOTATION not in pod["metadata"]["annotations"]
    ungated = leader("a", 0, gated=False, released_at=T0 - 5)
    assert as_released(ungated, stamp(T0)) is ungated


def test_a_placed_jobset_never_times_out() -> None:
    placed = gang("p", [leader("p", j, gated=False, released_at=T0, node=f"node-{j}") for j in range(3)])
    plan = plan_admission([placed], pools(), held("node-0", "node-1", "node-2"), T0 + 10 * TIMEOUT, TIMEOUT)
    assert (plan.timeouts, plan.releases, plan.states[GangId(NS, "p")]) == ((), (), GangState.PLACED)


@pytest.mark.parametrize(
    ("leaders", "state", "complete"),
    [
        ([dict()] * 3, GangState.QUEUED, False),
        ([dict(gated=False, released_at=T0)] * 3, GangState.RELEASING, False),
        (
            [dict(gated=False, node="n0"), dict(gated=False, node="n1"), dict(gated=False)],
            GangState.RELEASING,
            False,
        ),
        ([dict(gated=False, node=f"n{i}") for i in range(3)], GangState.PLACED, True),
        (
            [
                dict(gated=False, node="n0", phase="Succeeded"),
                dict(gated=False, node="n1"),
                dict(gated=False, node="n2"),
            ],
            GangState.PLACED,
            True,
        ),
        ([dict(phase="Failed")] * 3, GangState.IDLE, False),
    ],
    ids=["all gated", "released", "two of three bound", "all bound", "one done, two bound", "none live"],
)
def test_gang_state_and_completeness(leaders: list[dict[str, Any]], state: GangState, complete: bool) -> None:
    built = gang("g", [leader("g", job, **kwargs) for job, kwargs in enumerate(leaders)])
    assert (gang_state(built), gang_complete(built)) == (state, complete)


# --- patches and projections -----------------------------------------------------------------------------


def test_release_patch_removes_only_our_gate_and_records_the_time() -> None:
    pod = leader("a", 0)
    pod["spec"]["schedulingGates"].insert(0, {"name": "someone.else/gate"})
    patch = release_patch(pod, "2026-05-01T10:00:00Z")
    assert patch is not None
    patched = jsonpatch.apply_patch(pod, patch)
    assert patched["spec"]["schedulingGates"] == [{"name": "someone.else/gate"}]
    assert patched["metadata"]["annotations"][RELEASED_AT_ANNOTATION] == "2026-05-01T10:00:00Z"
    assert release_patch(patched, "later") is None
    bare = leader("a", 0)
    del bare["metadata"]["annotations"]
    bare_patch = release_patch(bare, "t")
    assert bare_patch is not None
    assert jsonpatch.apply_patch(bare, bare_patch)["metadata"]["annotations"] == {RELEASED_AT_ANNOTATION: "t"}


@pytest.mark.parametrize("seconds", [T0, T0 + 0.25, T0 + 59.999999])
def test_release_times_keep_their_fraction_of_a_second(seconds: float) -> None:
    assert parse_time(format_time(seconds)) == pytest.approx(seconds, abs=1e-6)
    assert format_time(seconds).endswith("Z")


# --- the webhook's part ------------------------------------------------------------------------------------


def jobset(annotations: dict[str, str], *replicated: tuple[int, dict[str, str]]) -> Obj:
    return {
        "metadata": {
            "name": "js",
            "uid": "u",
            "creationTimestamp": "2026-05-01T10:00:00Z",
            "annotations": annotations,
        },
        "spec": {
            "replicatedJobs": [
                {"name": f"r{i}", "replicas": replicas, "template": {"metadata": {"annotations": own}}}
                for i, (replicas, own) in enumerate(replicated)
            ]
        },
    }


EXCLUSIVE = {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL}


@pytest.mark.parametrize(
    ("the_jobset", "count"),
    [
        (jobset(EXCLUSIVE, (3, {}), (1, {})), 4),
        (jobset({}, (3, {TOPOLOGY_ANNOTATION: "zone"}), (2, {})), 3),
        (jobset({**EXCLUSIVE, JOBSET_NODE_SELECTOR_ANNOTATION: "true"}, (3, {})), 0),
        (jobset({}, (2, {})), 0),
    ],
    ids=["JobSet-wide", "one replicated Job", "node-selector mode", "none"],
)
def test_the_exclusive_jobs_of_a_jobset(the_jobset: Obj, count: int) -> None:
    assert exclusive_jobs(the_jobset) == count


@pytest.mark.parametrize(
    ("annotation", "default", "expected"),
    [
        ("true", False, True),
        ("false", True, False),
        (None, True, True),
        (None, False, False),
        ("yes", False, False),
    ],
)
def test_the_jobset_annotation_overrides_the_default(
    annotation: str | None, default: bool, expected: bool
) -> None:
    annotations = dict(EXCLUSIVE) | ({ALL_OR_NOTHING_ANNOTATION: annotation} if annotation else {})
    owner = jobset_startup(jobset(annotations, (3, {})))
    gang_keys, warning = gang_annotations(owner, default)
    assert (bool(gang_keys), warning) == (expected, None)
    if expected:
        assert gang_keys == {
            ALL_OR_NOTHING_ANNOTATION: "true",
            GANG_SIZE_ANNOTATION: "3",
            GANG_QUEUED_AT_ANNOTATION: "2026-05-01T10:00:00Z",
        }


@pytest.mark.parametrize(
    ("owner", "needle"),
    [
        (JobSetStartup(in_order=True, all_or_nothing=True, exclusive_jobs=2), "InOrder"),
        (JobSetUnknown(JobSetRef(NS, "js", "u"), "forbidden"), "could not be read (forbidden)"),
    ],
    ids=["InOrder", "unreadable"],
)
def test_all_or_nothing_that_cannot_be_honoured_is_not_applied_with_a_warning(
    owner: JobSetStartup | JobSetUnknown, needle: str
) -> None:
    gang_keys, warning = gang_annotations(owner, True)
    assert gang_keys == {}
    assert needle in (warning or "")


def child_job() -> Obj:
    return {
        "kind": "Job",
        "metadata": {
            "name": "js-r0-0",
            "namespace": NS,
            "labels": {JOBSET_NAME_LABEL: "js", JOBSET_RESTART_ATTEMPT_LABEL: "2"},
            "annotations": dict(EXCLUSIVE),
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": "js",
                    "uid": "u",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": 4,
            "parallelism": 4,
            "template": {
                "metadata": {"annotations": dict(EXCLUSIVE)},
                "spec": {"containers": [{"name": "c"}]},
            },
        },
    }


@pytest.mark.parametrize("strategy", list(Strategy))
def test_the_leader_of_an_all_or_nothing_job_is_gated_and_its_followers_are_not(strategy: Strategy) -> None:
    owner = JobSetStartup(all_or_nothing=True, exclusive_jobs=3, created="2026-05-01T10:00:00Z")
    job = jsonpatch.apply_patch(child_job(), mutate_job(child_job(), strategy, owner=owner).patch)
    assert gang_of(job) == GangId(NS, "js", "2")
    template = job["spec"]["template"]
    assert template["metadata"]["annotations"][GANG_SIZE_ANNOTATION] == "3"
    readmitted = jsonpatch.apply_patch(job, mutate_job(job, strategy, owner=owner).patch)
    # the gang annotations are not added twice (an elastic Job's target record is not the client's to send)
    assert without_resize_keys(readmitted["spec"]["template"]) == without_resize_keys(template)

    def pod(index: int) -> Obj:
        meta = template["metadata"]
        annotations = {**meta["annotations"], JOB_COMPLETION_INDEX_ANNOTATION: str(index)}
        return {
            "metadata": {
                "name": f"js-r0-0-{index}",
                "namespace": NS,
                "labels": job["metadata"]["labels"],
                "annotations": annotations,
                "ownerReferences": [{"kind": "Job", "name": "js-r0-0", "uid": "j", "controller": True}],
            },
            "spec": {"containers": [{"name": "c"}]},
        }

    leader_plan = plan_pod(pod(0), NS, strategy)
    assert isinstance(leader_plan, PodPlan)
    assert leader_plan.all_or_nothing
    follower_plan = plan_pod(pod(1), NS, strategy)
    assert isinstance(follower_plan, PodPlan)
    verdict = mutate_pod(pod(0), leader_plan, None)
    gated = jsonpatch.apply_patch(pod(0), verdict.patch)
    assert {"name": ALL_OR_NOTHING_GATE} in gated["spec"]["schedulingGates"]
    assert verdict.reason == "leader-gated"
    assert mutate_pod(gated, leader_plan, None).patch == []
    bound = LeaderState(LeaderStatus.BOUND, "l", "n", "pool-0")
    follower = jsonpatch.apply_patch(pod(1), mutate_pod(pod(1), follower_plan, bound).patch)
    assert {"name": ALL_OR_NOTHING_GATE} not in (follower["spec"].get("schedulingGates") or [])


def test_a_job_of_a_jobset_without_the_annotation_is_left_alone() -> None:
    verdict = mutate_job(child_job(), Strategy.GATE, owner=JobSetStartup(exclusive_jobs=3))
    job = jsonpatch.apply_patch(child_job(), verdict.patch)
    assert gang_of(job) is None
    assert ALL_OR_NOTHING_ANNOTATION not in job["spec"]["template"]["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("3", 3), ("", None), ("0", None), ("\u00b2", None), ("9" * 5_000, None), (" 3", None)],
)
def test_a_gang_size_is_read_strictly(raw: str, expected: int | None) -> None:
    """ "²".isdigit() is true and int() refuses 5,000 digits: neither may raise in the resizer's queue."""
    assert gang_size({ALL_OR_NOTHING_ANNOTATION: "true", GANG_SIZE_ANNOTATION: raw}) == expected


# --- trust: what a client writes puts nothing in the queue -----------------------------------------------

FORGED = {
    ALL_OR_NOTHING_ANNOTATION: "true",
    GANG_SIZE_ANNOTATION: "4",
    GANG_QUEUED_AT_ANNOTATION: "2000-01-01T00:00:00Z",
}


def forged_job(*, owned: bool) -> Obj:
    job = child_job()
    if not owned:
        del job["metadata"]["ownerReferences"]
    job["metadata"]["annotations"].update(FORGED)
    job["metadata"]["labels"][ALL_OR_NOTHING_LABEL] = "true"
    job["spec"]["template"]["metadata"]["annotations"].update(FORGED)
    job["spec"]["template"]["metadata"]["labels"] = {ALL_OR_NOTHING_LABEL: "true"}
    return job


@pytest.mark.parametrize(
    "owner",
    [None, JobSetUnknown(JobSetRef(NS, "js", "u"), 'jobsets.jobset.x-k8s.io "js" not found')],
    ids=["no JobSet owner", "JobSet not found"],
)
def test_gang_keys_a_client_sent_are_removed_and_no_gang_comes_without_a_jobset(
    owner: JobSetUnknown | None,
) -> None:
    job = forged_job(owned=owner is not None)
    verdict = mutate_job(job, Strategy.GATE, owner=owner, all_or_nothing=True)
    admitted = jsonpatch.apply_patch(job, verdict.patch)
    reserved = set(GANG_KEYS)
    assert not reserved & set(admitted["metadata"].get("annotations", {}))
    assert not reserved & set(admitted["metadata"].get("labels", {}))
    assert not reserved & set(admitted["spec"]["template"]["metadata"].get("annotations", {}))
    assert not reserved & set(admitted["spec"]["template"]["metadata"].get("labels", {}))
    assert (gang_of(admitted), admitted_gang(admitted)) == (None, None)
    assert any("removed" in warning for warning in verdict.warnings)


def test_a_plain_job_with_gang_keys_is_admitted_without_them() -> None:
    job = forged_job(owned=False)
    del job["metadata"]["annotations"][JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION]
    del job["spec"]["template"]["metadata"]["annotations"][JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION]
    verdict = mutate_job(job, Strategy.ELASTIC)
    assert verdict.reason == "not-exclusive"
    admitted = jsonpatch.apply_patch(job, verdict.patch)
    assert gang_of(admitted) is None
    assert admitted["spec"]["template"]["metadata"]["annotations"] == {}


def test_the_webhook_derives_the_gang_from_the_jobset_whatever_the_client_sent() -> None:
    owner = JobSetStartup(all_or_nothing=True, exclusive_jobs=2, created="2026-05-01T10:00:00Z")
    job = forged_job(owned=True)
    admitted = jsonpatch.apply_patch(job, mutate_job(job, Strategy.GATE, owner=owner).patch)
    record = admitted_gang(admitted)
    assert record is not None
    assert (record.gang, record.size, record.queued_at) == (
        GangId(NS, "js", "2"),
        2,
        parse_time(stamp_2026()),
    )
    assert admitted["spec"]["template"]["metadata"]["annotations"][GANG_QUEUED_AT_ANNOTATION] == stamp_2026()


def stamp_2026() -> str:
    return "2026-05-01T10:00:00Z"


def test_a_leader_is_a_member_only_through_its_controlling_admitted_job() -> None:
    owner = JobSetStartup(all_or_nothing=True, exclusive_jobs=3, created=stamp_2026())
    job = jsonpatch.apply_patch(child_job(), mutate_job(child_job(), Strategy.GATE, owner=owner).patch)
    job["metadata"]["uid"] = "js-r0-0-uid"
    record = admitted_gang(job)
    pod = leader("js", 0)
    pod["metadata"]["labels"][JOBSET_RESTART_ATTEMPT_LABEL] = "2"
    pod["metadata"]["ownerReferences"][0]["uid"] = "js-r0-0-uid"
    assert trusted_member(pod, GangId(NS, "js", "2"), record)
    assert not trusted_member(pod, GangId(NS, "other", "2"), record)
    impostor = leader("js", 0)  # another Job's pod, or a bare pod labelled as the Job's
    impostor["metadata"]["labels"][JOBSET_RESTART_ATTEMPT_LABEL] = "2"
    assert not trusted_member(impostor, GangId(NS, "js", "2"), record)
    assert not trusted_member(pod, GangId(NS, "js", "2"), None)
    relabelled = {**job, "metadata": {**job["metadata"], "labels": {**job["metadata"]["labels"]}}}
    relabelled["metadata"]["labels"][JOBSET_NAME_LABEL] = "other"  # disagrees with its JobSet owner
    assert admitted_gang(relabelled) is None


def holder(node: str, *, spec_priority: int = 0, label: str | None = None, job_key: bool = True) -> Obj:
    labels = {"exclusive-placement.io/role": "leader"}
    if job_key:
        labels[JOB_KEY_LABEL] = "x"
    if label is not None:
        labels[PRIORITY_LABEL] = label
    return {
        "metadata": {"name": f"p-{node}", "namespace": "tenant", "labels": labels},
        "spec": {"nodeName": node, "priority": spec_priority},
        "status": {"phase": "Running"},
    }


def test_a_domain_is_held_by_pods_carrying_the_job_key_label_and_not_by_a_role_label_alone() -> None:
    role_only = held_nodes([holder("node-0", job_key=False), holder("node-1", job_key=False)])
    assert role_only == {}
    assert released(plan_admission([gated_gang("b")], pools(3), role_only, T0, TIMEOUT).releases) == ["b"]
    repelling = held_nodes([holder("node-0")])
    assert blocked(plan_admission([gated_gang("b")], pools(3), repelling, T0, TIMEOUT)) == GangId(NS, "b")
    finished = {**holder("node-0"), "status": {"phase": "Succeeded"}}
    assert held_nodes([finished, {**holder("node-1"), "spec": {}}]) == {}


@pytest.mark.parametrize(
    ("spec_priority", "label", "blocks"),
    [(0, "0", {0: True, 100: False}), (0, "100", {0: True, 100: True}), (100, None, {0: True, 100: True})],
    ids=["level 0", "labelled level 100, runs at 0", "runs at 100, unlabelled"],
)
def test_a_holder_keeps_out_the_levels_its_labels_repel_and_those_that_cannot_preempt_it(
    spec_priority: int, label: str | None, blocks: dict[int, bool]
) -> None:
    (holding,) = held_nodes([holder("node-0", spec_priority=spec_priority, label=label)]).values()
    assert {priority: holding.blocks(priority) for priority in blocks} == blocks


def test_a_head_holds_up_the_queue_for_the_bound_then_is_stepped_over_and_keeps_its_place() -> None:
    gangs = [gated_gang("big", jobs=3), gated_gang("small", jobs=1, queued_at=T0 + 1)]
    first = plan_admission(gangs, pools(3), held("node-0"), T0, TIMEOUT, bound=TIMEOUT)
    assert (released(first.releases), blocked(first), first.next_deadline) == (
        [],
        GangId(NS, "big"),
        T0 + TIMEOUT,
    )
    assert first.blocked is not None
    since = {first.blocked.gang: first.blocked.since}
    early = plan_admission(
        gangs, pools(3), held("node-0"), T0 + TIMEOUT - 1, TIMEOUT, waiting_since=since, bound=TIMEOUT
    )
    assert (released(early.releases), early.stepped_over) == ([], ())
    late = plan_admission(
        gangs, pools(3), held("node-0"), T0 + TIMEOUT, TIMEOUT, waiting_since=since, bound=TIMEOUT
    )
    assert released(late.releases) == ["small"]
    assert [(w.gang.jobset, w.needs, w.free) for w in late.stepped_over] == [("big", 3, 2)]
    # the stepped-over head is still first: once enough domains are free it goes before anyone behind it
    free = plan_admission(gangs, pools(3), {}, T0 + TIMEOUT + 1, TIMEOUT, waiting_since=since, bound=TIMEOUT)
    assert released(free.releases) == ["big"]
    assert blocked(free) == GangId(NS, "small")


def test_the_next_gang_that_does_not_fit_holds_up_the_rest_on_its_own_clock() -> None:
    gangs = [
        gated_gang("big", jobs=3),
        gated_gang("mid", jobs=3, queued_at=T0 + 1),
        gated_gang("s", jobs=1, queued_at=T0 + 2),
    ]
    since = {GangId(NS, "big"): T0 - TIMEOUT}
    plan = plan_admission(gangs, pools(3), held("node-0"), T0, TIMEOUT, waiting_since=since, bound=TIMEOUT)
    assert ([w.gang.jobset for w in plan.stepped_over], blocked(plan), released(plan.releases)) == (
        ["big"],
        GangId(NS, "mid"),
        [],
    )


def test_gangs_that_cannot_be_placed_hold_up_the_queue_for_the_bound_in_all_not_each_in_turn() -> None:
    gangs = [
        gated_gang("h1", jobs=3),
        gated_gang("h2", jobs=3, queued_at=T0 + 1),
        gated_gang("h3", jobs=3, queued_at=T0 + 2),
        gated_gang("g", jobs=1, queued_at=T0 + 3),
    ]
    first = plan_admission(gangs, pools(3), held("node-0"), T0, TIMEOUT, bound=TIMEOUT)
    assert (blocked(first), [w.gang.jobset for w in first.behind], released(first.releases)) == (
        GangId(NS, "h1"),
        ["h2", "h3"],  # g fits: it waits behind h1 without a clock
        [],
    )
    assert first.blocked is not None
    since = {w.gang: w.since for w in (first.blocked, *first.behind)}
    late = plan_admission(
        gangs, pools(3), held("node-0"), T0 + TIMEOUT, TIMEOUT, waiting_since=since, bound=TIMEOUT
    )
    assert ([w.gang.jobset for w in late.stepped_over], blocked(late), released(late.releases)) == (
        ["h1", "h2", "h3"],
        None,
        ["g"],
    )
