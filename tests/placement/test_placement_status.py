"""placement.status: who holds each domain and what each exclusive Job waits for, read from API objects."""

from __future__ import annotations

from typing import Any

import pytest

from placement.constants import (
    ALL_OR_NOTHING_GATE,
    ELASTIC_FALLBACK_ANNOTATION,
    GANG_QUEUED_AT_ANNOTATION,
    JOBSET_KIND,
    JOBSET_NAME_LABEL,
    LEADER_SCHEDULED_GATE,
    RESIZE_DONE,
    TOPOLOGY_ANNOTATION,
    ZONE_LABEL,
)
from placement.status import (
    Holder,
    Snapshot,
    WaitReason,
    domain_statuses,
    exclusive_child_jobs,
    job_progress,
    pod_wait_reason,
    stepped_over_jobsets,
    topology_keys,
    waiting_jobs,
    waits_for_a_held_domain,
)
from tests.placement.placement_pods import NS, job
from tests.placement.placement_status_objects import (
    POOL,
    UNSCHEDULABLE,
    Obj,
    exclusive_job,
    exclusive_pod,
    followers,
    pools,
)


def waiting_of(
    jobs: list[Obj], pods: list[Obj], nodes: list[Obj] | None = None
) -> dict[str, tuple[str, str]]:
    snapshot = Snapshot(nodes if nodes is not None else pools(4), pods, jobs)
    return {w.job: (w.reason, w.message) for w in waiting_jobs(snapshot)}


# --- what one Job waits for --------------------------------------------------------------------------------

CASES: list[tuple[str, list[Obj], list[Obj], WaitReason | None, str]] = [
    ("suspended", [exclusive_job("a", suspend=True)], [], WaitReason.SUSPENDED, "spec.suspend is true"),
    ("no pod yet", [exclusive_job("a")], [], WaitReason.LEADER_NOT_CREATED, "completion index 0"),
    (
        "leader not judged yet",
        [exclusive_job("a")],
        [exclusive_pod("a", 0)],
        WaitReason.LEADER_PENDING,
        "not scheduled yet",
    ),
    (
        "leader unschedulable",
        [exclusive_job("a")],
        [exclusive_pod("a", 0, verdict=UNSCHEDULABLE)],
        WaitReason.LEADER_UNSCHEDULABLE,
        f"leader pod a-0-xyz: Unschedulable: {UNSCHEDULABLE}",
    ),
    (
        "leader gated by someone else",
        [exclusive_job("a")],
        [exclusive_pod("a", 0, gates=("kueue.x-k8s.io/admission",))],
        WaitReason.LEADER_GATED,
        "kueue.x-k8s.io/admission",
    ),
    (
        "leader bound, not resized",
        [exclusive_job("a")],
        [exclusive_pod("a", 0, node_name="node-1")],
        WaitReason.RESIZE_PENDING,
        "leader bound in cloud.google.com/gke-nodepool=pool-1; the resizer grows the Job to 4 pods",
    ),
    (
        "resized, followers not created",
        [exclusive_job("a", resize=RESIZE_DONE)],
        [exclusive_pod("a", 0, node_name="node-1")],
        WaitReason.FOLLOWERS_NOT_CREATED,
        "1 of 4 pods exist",
    ),
    (
        "fell back to gate, followers being retried",
        [
            exclusive_job(
                "a",
                resize=None,
                annotations={ELASTIC_FALLBACK_ANNOTATION: "completions (4) != parallelism (2)"},
            )
        ],
        [exclusive_pod("a", 0, node_name="node-1")],
        WaitReason.ELASTIC_FALLBACK,
        "elastic was not possible (completions (4) != parallelism (2)), so the Job was admitted with gate",
    ),
    (
        "followers gated",
        [exclusive_job("a", resize=None)],
        [exclusive_pod("a", 0, node_name="node-1"), *followers("a", 3, gates=(LEADER_SCHEDULED_GATE,))],
        WaitReason.FOLLOWERS_GATED,
        f"3 followers carry the scheduling gate {LEADER_SCHEDULED_GATE}",
    ),
    (
        "followers unschedulable in the leader's pool",
        [exclusive_job("a", resize=RESIZE_DONE)],
        [exclusive_pod("a", 0, node_name="node-1"), *followers("a", 3, verdict=UNSCHEDULABLE)],
        WaitReason.FOLLOWERS_UNSCHEDULABLE,
        f"3 pods in cloud.google.com/gke-nodepool=pool-1: Unschedulable: {UNSCHEDULABLE}",
    ),
    (
        "followers not judged yet",
        [exclusive_job("a", resize=RESIZE_DONE)],
        [exclusive_pod("a", 0, node_name="node-1"), *followers("a", 3)],
        WaitReason.FOLLOWERS_PENDING,
        "3 pods not scheduled yet",
    ),
    (
        "a NonIndexed Job's pods",
        [exclusive_job("a", resize=None, mode=None, size=2)],
        [exclusive_pod("a", None, verdict=UNSCHEDULABLE), exclusive_pod("a", None, verdict=UNSCHEDULABLE)],
        WaitReason.PODS_UNSCHEDULABLE,  # it has no leader, so no followers
        UNSCHEDULABLE,
    ),
    (
        "placed whole",
        [exclusive_job("a", resize=RESIZE_DONE)],
        [exclusive_pod("a", 0, node_name="node-1"), *followers("a", 3, node_name="node-1")],
        None,
        "",
    ),
    (
        "its leader completed, followers placed",
        [{**exclusive_job("a", resize=RESIZE_DONE), "status": {"succeeded": 1}}],
        [
            exclusive_pod("a", 0, node_name="node-1", phase="Succeeded"),
            *followers("a", 3, node_name="node-1"),
        ],
        None,
        "",
    ),
]


@pytest.mark.parametrize(("case", "jobs", "pods", "reason", "needle"), CASES, ids=[c[0] for c in CASES])
def test_what_a_job_waits_for(
    case: str, jobs: list[Obj], pods: list[Obj], reason: WaitReason | None, needle: str
) -> None:
    found = waiting_of(jobs, pods)
    if reason is None:
        assert found == {}, case
    else:
        assert found["a"][0] is reason, case
        assert needle in found["a"][1], found["a"][1]


def test_finished_non_exclusive_and_node_selector_mode_jobs_are_not_listed() -> None:
    complete = exclusive_job("done")
    complete["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    plain = job(name="plain")
    assert waiting_of([complete, plain], []) == {}


def test_each_step_of_an_elastic_job_says_whether_it_is_done() -> None:
    snapshot = Snapshot(pools(4), [exclusive_pod("a", 0, node_name="node-2")], [exclusive_job("a", size=8)])
    progress = job_progress(snapshot, snapshot.jobs[0])
    assert [(step.name, step.done) for step in progress.steps] == [
        ("admitted", True),
        ("leader created", True),
        ("leader bound", True),
        ("resized to 8", False),
        ("pods placed", False),
    ]
    assert progress.steps[0].detail == "elastic: at size 1 of 8 until its leader is bound"
    assert progress.steps[2].detail == f"{POOL}=pool-2 (node node-2, since 2026-01-01T00:00:10Z)"
    assert (progress.domain, progress.size, progress.strategy) == ("pool-2", 8, "elastic")


# --- all-or-nothing, from the gates and annotations on the leaders ------------------------------------------


def gang_job(name: str, jobset: str) -> Obj:
    return exclusive_job(name, jobset=jobset, gang=2)


def gang_leader(name: str, jobset: str, **kwargs: Any) -> Obj:
    return exclusive_pod(name, 0, jobset=jobset, gang=2, **kwargs)


def test_a_queued_jobset_that_does_not_fit_heads_the_queue_with_what_it_needs() -> None:
    held = exclusive_pod("other", 0, node_name="node-0")
    pods = [held, *(gang_leader(n, "big", gates=(ALL_OR_NOTHING_GATE,)) for n in ("a", "b"))]
    found = waiting_of([gang_job("a", "big"), gang_job("b", "big")], pods, pools(2))
    reason, message = found["a"]
    assert reason is WaitReason.ALL_OR_NOTHING_QUEUED
    assert f"JobSet {NS}/big needs 2 free {POOL} domains at once and 1 are free" in message
    assert "first in the all-or-nothing queue (1 of 1)" in message


def test_a_jobset_the_resizer_stepped_over_says_so_and_the_one_behind_it_fits() -> None:
    """The resizer's `AllOrNothingSteppedOver` Event on the JobSet: its Jobs wait with their own reason, and
    the JobSets behind it are not said to wait for it."""
    held = exclusive_pod("other", 0, node_name="node-0")
    pods = [held, *(gang_leader(n, "big", gates=(ALL_OR_NOTHING_GATE,)) for n in ("a", "b"))]
    pods += [exclusive_pod("c", 0, jobset="small", gang=1, gates=(ALL_OR_NOTHING_GATE,))]
    jobs = [gang_job("a", "big"), gang_job("b", "big"), exclusive_job("c", jobset="small", gang=1)]
    snapshot = Snapshot(pools(2), pods, jobs, stepped_over=frozenset({(NS, "big")}))
    found = {w.job: (w.reason, w.message) for w in waiting_jobs(snapshot)}
    reason, message = found["a"]
    assert reason is WaitReason.ALL_OR_NOTHING_STEPPED_OVER
    assert "stepped over" in message
    assert "fits now" in found["c"][1]
    assert waiting_of(jobs, pods, pools(2))["a"][0] is WaitReason.ALL_OR_NOTHING_QUEUED


def test_a_jobset_behind_the_head_names_it() -> None:
    pods = [exclusive_pod("other", 0, node_name="node-0")]
    for jobset, names in (("first", ("a", "b")), ("second", ("c", "d"))):
        pods += [gang_leader(n, jobset, gates=(ALL_OR_NOTHING_GATE,)) for n in names]
    second = gang_job("c", "second")
    second["metadata"]["annotations"][GANG_QUEUED_AT_ANNOTATION] = "2026-01-02T00:00:00Z"
    for pod_ in pods:
        if pod_["metadata"]["labels"].get(JOBSET_NAME_LABEL) == "second":
            pod_["metadata"]["annotations"][GANG_QUEUED_AT_ANNOTATION] = "2026-01-02T00:00:00Z"
    message = waiting_of([second], pods, pools(2))["c"][1]
    assert f"JobSet {NS}/second is queued (2 of 2) behind JobSet {NS}/first" in message


def test_a_jobset_larger_than_the_cluster_says_so() -> None:
    pods = [gang_leader(n, "big", gates=(ALL_OR_NOTHING_GATE,)) for n in ("a", "b")]
    message = waiting_of([gang_job("a", "big")], pods, pools(1))["a"][1]
    assert f"needs 2 {POOL} domains and the cluster has 1" in message


def test_a_jobset_that_fits_is_the_resizers_to_release() -> None:
    pods = [gang_leader(n, "big", gates=(ALL_OR_NOTHING_GATE,)) for n in ("a", "b")]
    message = waiting_of([gang_job("a", "big")], pods, pools(2))["a"][1]
    assert "the resizer releases its leaders on its next pass" in message


def test_a_jobset_waiting_for_its_leaders_says_how_many_it_has() -> None:
    pods = [gang_leader("a", "big", gates=(ALL_OR_NOTHING_GATE,))]
    message = waiting_of([gang_job("a", "big")], pods, pools(2))["a"][1]
    assert "1 of the 2 Jobs of JobSet" in message


def test_a_gang_job_with_its_leader_bound_waits_for_the_other_leaders_not_for_the_resizer() -> None:
    pods = [gang_leader("a", "big", node_name="node-0"), gang_leader("b", "big", verdict=UNSCHEDULABLE)]
    found = waiting_of([gang_job("a", "big"), gang_job("b", "big")], pods, pools(2))
    reason, message = found["a"]
    assert reason is WaitReason.ALL_OR_NOTHING_GANG_INCOMPLETE
    assert f"the Job grows to 4 pods once every Job of JobSet {NS}/big has a bound leader (1 of 2)" in message
    assert "resizer running" not in message
    assert found["b"][0] is WaitReason.LEADER_UNSCHEDULABLE


def test_a_gang_counts_its_leaders_in_place_as_the_resizer_does() -> None:
    """Of four Jobs, `a`'s leader bound, `b`'s succeeded (its Job done), `c`'s failed on its node with no
    new leader yet, `d`'s unschedulable: two of four in place, as `gang_complete` counts them (the count
    once took every leader with a node: "3 of 4", a failed one too)."""
    pods = [
        exclusive_pod("a", 0, jobset="big", gang=4, node_name="node-0"),
        exclusive_pod("b", 0, jobset="big", gang=4, node_name="node-1", phase="Succeeded"),
        exclusive_pod("c", 0, jobset="big", gang=4, node_name="node-2", phase="Failed"),
        exclusive_pod("d", 0, jobset="big", gang=4, verdict=UNSCHEDULABLE),
    ]
    jobs = [exclusive_job(n, jobset="big", gang=4) for n in ("a", "b", "c", "d")]
    reason, message = waiting_of(jobs, pods, pools(4))["a"]
    assert reason is WaitReason.ALL_OR_NOTHING_GANG_INCOMPLETE
    assert f"once every Job of JobSet {NS}/big has a bound leader (2 of 4)" in message


def test_a_gang_job_not_grown_although_every_leader_is_bound_waits_for_the_resizer() -> None:
    pods = [gang_leader("a", "big", node_name="node-0"), gang_leader("b", "big", node_name="node-1")]
    found = waiting_of([gang_job("a", "big"), gang_job("b", "big")], pods, pools(2))
    assert {job: reason for job, (reason, _) in found.items()} == {
        "a": WaitReason.RESIZE_PENDING,
        "b": WaitReason.RESIZE_PENDING,
    }
    assert "is a resizer running and holding its Lease?" in found["a"][1]


def gated_gang(other_leader: Obj) -> dict[str, tuple[str, str]]:
    """`a` of JobSet big (scheduling-gate: not shrunk), its leader bound and 3 followers gated; the leader
    of `b`, the other Job of big, as given."""
    gated = followers("a", 3, jobset="big", gang=2, gates=(LEADER_SCHEDULED_GATE,))
    pods = [gang_leader("a", "big", node_name="node-0"), *gated, other_leader]
    jobs = [exclusive_job(n, jobset="big", gang=2, resize=None) for n in ("a", "b")]
    return waiting_of(jobs, pods, pools(2))


def test_gated_followers_of_a_gang_job_wait_for_the_other_leaders_of_its_jobset() -> None:
    reason, message = gated_gang(gang_leader("b", "big", verdict=UNSCHEDULABLE))["a"]
    assert reason is WaitReason.ALL_OR_NOTHING_GANG_INCOMPLETE
    assert f"3 followers carry the scheduling gate {LEADER_SCHEDULED_GATE}" in message
    assert f"once every Job of JobSet {NS}/big has a bound leader (1 of 2)" in message


def test_gated_followers_of_a_complete_gang_wait_for_the_resizer() -> None:
    reason, message = gated_gang(gang_leader("b", "big", node_name="node-1"))["a"]
    assert reason is WaitReason.FOLLOWERS_GATED
    assert "once the leader is bound" in message


# --- domains ------------------------------------------------------------------------------------------------


def test_domains_show_their_holders_free_and_cordoned() -> None:
    pods = [
        exclusive_pod(
            "a", 0, node_name="node-0", jobset="train", priority=5, scheduled_at="2026-01-01T00:00:09Z"
        ),
        *followers("a", 2, node_name="node-0", jobset="train", scheduled_at="2026-01-01T00:00:20Z"),
        exclusive_pod("b", 1, node_name="node-1"),  # a follower still running after its leader finished
        exclusive_pod("c", 0, node_name="node-2", phase="Succeeded"),  # finished: holds nothing
    ]
    snapshot = Snapshot(pools(4, cordoned=(3,)), pods, [])
    statuses = domain_statuses(snapshot, topology_keys([], pods))
    assert [(s.domain, s.holders, s.schedulable, s.free) for s in statuses] == [
        ("pool-0", (Holder(NS, "train", "a", 5, "2026-01-01T00:00:09Z"),), True, False),
        ("pool-1", (Holder(NS, "", "b", 0, "2026-01-01T00:00:10Z"),), True, False),
        ("pool-2", (), True, True),
        ("pool-3", (), False, False),
    ]


def test_pods_exclusive_on_another_key_hold_nothing_on_this_one() -> None:
    on_zones = exclusive_pod("z", 0, node_name="node-0")
    on_zones["metadata"]["annotations"] = {
        TOPOLOGY_ANNOTATION: ZONE_LABEL,
        "batch.kubernetes.io/job-completion-index": "0",
    }
    snapshot = Snapshot(pools(1), [on_zones], [])
    by_key = {(s.topology_key, s.domain): s.holders for s in domain_statuses(snapshot, [POOL, ZONE_LABEL])}
    assert by_key[(POOL, "pool-0")] == ()
    assert [h.job for h in by_key[(ZONE_LABEL, "zone-a")]] == ["z"]


def test_a_key_no_node_carries_has_no_domains() -> None:
    assert domain_statuses(Snapshot(pools(2), [], []), ["example.com/rack"]) == []


# --- capacity: placement.capacity's diagnosis replaces "waiting for room" -----------------------------


def test_the_fifth_job_of_a_jobset_on_four_pools_waits_for_too_few_domains() -> None:
    jobs = [exclusive_job(f"w-{i}", size=1, resize=RESIZE_DONE, jobset="train") for i in range(5)]
    pods = [exclusive_pod(f"w-{i}", 0, node_name=f"node-{i}", jobset="train") for i in range(4)]
    pods.append(exclusive_pod("w-4", 0, verdict=UNSCHEDULABLE, jobset="train"))
    (waiting,) = waiting_jobs(Snapshot(pools(4), pods, jobs))
    assert (waiting.job, waiting.reason) == ("w-4", WaitReason.TOO_FEW_DOMAINS)
    assert waiting.message == f"5 Jobs need 5 {POOL} domains; 4 exist"


def test_a_job_on_a_key_no_node_carries_waits_for_too_few_domains() -> None:
    rack = exclusive_job("r", annotations={TOPOLOGY_ANNOTATION: "example.com/rack"})
    rack["spec"]["template"]["metadata"]["annotations"] = {TOPOLOGY_ANNOTATION: "example.com/rack"}
    pod = exclusive_pod("r", 0, verdict="0/4 nodes are available: 4 node(s) didn't match pod affinity rules.")
    (waiting,) = waiting_jobs(Snapshot(pools(4), [pod], [rack]))
    assert waiting.reason is WaitReason.TOO_FEW_DOMAINS
    assert "no schedulable node carries the label example.com/rack" in waiting.message


def test_a_job_whose_pods_fit_no_pool_waits_for_a_domain_too_small() -> None:
    nodes = pools(2)
    for node in nodes:
        node["status"] = {"allocatable": {"nvidia.com/gpu": "8", "pods": "110"}}
    big = exclusive_job("big", size=8, resize=RESIZE_DONE)
    big["spec"]["template"]["spec"] = {
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]
    }
    pod = exclusive_pod("big", 0, node_name="node-0")
    progress = job_progress(Snapshot(nodes, [pod, *followers("big", 7)], [big]), big)
    assert progress.waiting is not None
    assert progress.waiting.reason is WaitReason.DOMAIN_TOO_SMALL
    assert progress.waiting.message == (
        f"8 pods x 4 nvidia.com/gpu need 32 nvidia.com/gpu in one {POOL} domain; the largest has 8 "
        "(room for 2 such pods)"
    )


def test_a_capacity_reason_carries_its_numbers_and_no_other_reason_does() -> None:
    jobs = [exclusive_job(f"w-{i}", size=1, resize=RESIZE_DONE, jobset="train") for i in range(3)]
    pods = [exclusive_pod(f"w-{i}", 0, verdict=UNSCHEDULABLE, jobset="train") for i in range(3)]
    waiting = waiting_jobs(Snapshot(pools(2), pods, jobs))[0]
    assert waiting.problem is not None
    assert (waiting.reason, waiting.problem.needed, waiting.problem.available) == (
        WaitReason.TOO_FEW_DOMAINS,
        3,
        2,
    )
    other = waiting_jobs(Snapshot(pools(4), pods, jobs))[0]
    assert (other.reason, other.problem) == (WaitReason.LEADER_UNSCHEDULABLE, None)


# --- waiting for a domain another Job holds -----------------------------------------------------------------


def held_up(jobs: list[Obj], pods: list[Obj], nodes: list[Obj], job_name: str) -> bool:
    snapshot = Snapshot(nodes, pods, jobs)
    (the_job,) = [j for j in jobs if j["metadata"]["name"] == job_name]
    return waits_for_a_held_domain(job_progress(snapshot, the_job), domain_statuses(snapshot, [POOL]))


def placed(name: str, node_name: str) -> list[Obj]:
    return [exclusive_pod(name, 0, node_name=node_name), *followers(name, 3, node_name=node_name)]


def test_a_leader_waits_for_a_held_domain_when_every_domain_is_held() -> None:
    jobs = [exclusive_job(n, resize=RESIZE_DONE) for n in ("p", "q")] + [exclusive_job("a")]
    pods = [*placed("p", "node-0"), *placed("q", "node-1"), exclusive_pod("a", 0, verdict=UNSCHEDULABLE)]
    assert held_up(jobs, pods, pools(2), "a")
    assert not held_up(jobs, pods, pools(3), "a")  # pool-2 is free: the scheduler's reason is another


def test_a_cordoned_domain_is_not_free() -> None:
    jobs = [exclusive_job("p", resize=RESIZE_DONE), exclusive_job("a")]
    pods = [*placed("p", "node-0"), exclusive_pod("a", 0, verdict=UNSCHEDULABLE)]
    assert held_up(jobs, pods, pools(2, cordoned=(1,)), "a")


def test_a_jobset_outnumbering_the_domains_waits_for_one_to_free_up_unless_none_exists() -> None:
    jobs = [exclusive_job(f"w-{i}", size=1, resize=RESIZE_DONE, jobset="train") for i in range(3)]
    pods = [exclusive_pod(f"w-{i}", 0, verdict=UNSCHEDULABLE, jobset="train") for i in range(3)]
    assert held_up(jobs, pods, pools(2), "w-0")
    assert not held_up(jobs, pods, pools(2, cordoned=(0, 1)), "w-0")  # no domain at all: capacity


def test_an_all_or_nothing_jobset_waits_for_enough_domains_at_once_though_one_is_free() -> None:
    jobs = [gang_job("a", "big"), gang_job("b", "big"), exclusive_job("p", resize=RESIZE_DONE)]
    pods = [
        *placed("p", "node-0"),
        *(gang_leader(n, "big", gates=(ALL_OR_NOTHING_GATE,)) for n in ("a", "b")),
    ]
    assert held_up(jobs, pods, pools(3), "a")


def test_a_job_with_a_bound_leader_or_placed_waits_for_no_domain() -> None:
    jobs = [exclusive_job("p", resize=RESIZE_DONE), exclusive_job("a")]
    pods = [*placed("p", "node-0"), exclusive_pod("a", 0, node_name="node-1")]
    assert not held_up(jobs, pods, pools(2), "a")  # resize pending: its domain is its own
    assert not held_up(jobs, pods, pools(2), "p")


def test_whether_the_leader_is_bound_is_its_step() -> None:
    waiting = Snapshot(pools(2), [exclusive_pod("a", 0, verdict=UNSCHEDULABLE)], [exclusive_job("a")])
    bound = Snapshot(pools(2), [exclusive_pod("a", 0, node_name="node-1")], [exclusive_job("a")])
    assert not job_progress(waiting, waiting.jobs[0]).leader_bound
    assert job_progress(bound, bound.jobs[0]).leader_bound


# --- one pod ------------------------------------------------------------------------------------------------

POD_CASES: list[tuple[str, Obj, str | None]] = [
    ("running", exclusive_pod("a", 0, node_name="node-0", phase="Running"), None),
    ("finished", exclusive_pod("a", 0, node_name="node-0", phase="Succeeded"), None),
    (
        "gated",
        exclusive_pod("a", 1, gates=(LEADER_SCHEDULED_GATE,)),
        f"SchedulingGated: waiting for the scheduling gate {LEADER_SCHEDULED_GATE} to be removed",
    ),
    ("bound, not started", exclusive_pod("a", 0, node_name="node-0"), "bound to a node, not started yet"),
    ("unschedulable", exclusive_pod("a", 0, verdict=UNSCHEDULABLE), f"Unschedulable: {UNSCHEDULABLE}"),
    ("not judged", exclusive_pod("a", 0), "not scheduled yet (the scheduler has not reported on it)"),
]


@pytest.mark.parametrize(("pod", "reason"), [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES])
def test_why_a_pod_waits(pod: Obj, reason: str | None) -> None:
    assert pod_wait_reason(pod) == reason


def test_a_pod_for_another_scheduler_says_which_and_a_terminating_one_waits_for_nothing() -> None:
    other = exclusive_pod("a", 0)
    other["spec"]["schedulerName"] = "volcano"
    assert pod_wait_reason(other) == (
        "schedulerName volcano: not scheduled yet (that scheduler has not reported on it)"
    )
    terminating = exclusive_pod("a", 0)
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:30Z"
    assert pod_wait_reason(terminating) is None


# --- the resizer's word on the queue ------------------------------------------------------------------------


def stepped_event(
    kind: str, name: str, *, reason: str = "AllOrNothingSteppedOver", core: bool = False
) -> Obj:
    regarding = {"kind": kind, "namespace": NS, "name": name}
    return {"reason": reason, "involvedObject" if core else "regarding": regarding}


def test_the_jobsets_stepped_over_are_read_from_either_api_of_events_and_nothing_else() -> None:
    events = [
        stepped_event(JOBSET_KIND, "big"),
        stepped_event(JOBSET_KIND, "huge", core=True),
        stepped_event(JOBSET_KIND, "other", reason="AllOrNothingReleased"),
        stepped_event("Job", "big-w-0"),
        stepped_event(JOBSET_KIND, ""),
    ]
    assert stepped_over_jobsets(events) == {(NS, "big"), (NS, "huge")}


# --- a JobSet's exclusive child Jobs ----------------------------------------------------------------------


def mixed_jobset(workers: Any = 3) -> Obj:
    """JobSet train: a driver that asks for no exclusive placement, and `workers` exclusive workers."""
    exclusive = {"metadata": {"annotations": {TOPOLOGY_ANNOTATION: POOL}}, "spec": {}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train", "namespace": NS},
        "spec": {
            "replicatedJobs": [
                {"name": "driver", "replicas": 1, "template": {"spec": {}}},
                {"name": "workers", "replicas": workers, "template": exclusive},
            ]
        },
    }


def test_a_jobsets_exclusive_child_jobs_are_its_exclusive_jobs_and_its_exclusive_replicas() -> None:
    driver = job(name="train-driver-0")
    driver["metadata"]["labels"] = {JOBSET_NAME_LABEL: "train"}
    other_namespace = exclusive_job("train-workers-1", jobset="train")
    other_namespace["metadata"]["namespace"] = "elsewhere"
    jobs = [
        driver,
        exclusive_job("train-workers-0", jobset="train"),
        other_namespace,
        exclusive_job("eval-workers-0", jobset="eval"),
    ]
    children = exclusive_child_jobs(mixed_jobset(), jobs)
    assert [c["metadata"]["name"] for c in children.jobs] == ["train-workers-0"]
    assert (children.wanted, children.missing) == (3, 2)


def test_a_jobset_with_every_exclusive_child_job_misses_none_whatever_else_it_lacks() -> None:
    jobs = [exclusive_job(f"train-workers-{i}", jobset="train") for i in range(3)]
    assert exclusive_child_jobs(mixed_jobset(), jobs).missing == 0


def test_replicas_that_are_not_a_count_are_read_as_one() -> None:
    assert exclusive_child_jobs(mixed_jobset(workers="3"), []).wanted == 1
