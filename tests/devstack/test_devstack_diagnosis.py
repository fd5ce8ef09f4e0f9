"""Why placement stalls: pending reasons grouped with counts, a hint per known cause, the stall report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import pytest

from devstack.__main__ import build_parser
from devstack.diagnosis import (
    NOTHING_WAITS,
    UNKNOWN_CAUSE,
    Diagnosis,
    Reading,
    ReasonGroup,
    diagnose,
    latest_warnings,
    read_cluster,
)
from devstack.report import JobStatus
from devstack.stall import StallWatcher
from kubectl_plugin.explain import explain_jobset
from kubekit.client import KubeError
from kubekit.generic import GenericClient
from placement.constants import (
    ALL_OR_NOTHING_STEPPED_OVER_REASON,
    GKE_NODEPOOL_LABEL,
    GPU_RESOURCE,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_NAME_LABEL,
    JOBSET_NODE_SELECTOR_ANNOTATION,
    LEADER_SCHEDULED_GATE,
    RESIZE_LABEL,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
)
from placement.status import Snapshot
from tests.support.builders import make_job, make_pod, make_workload

NS = "default"
QUEUED_AT = "2026-01-01T00:00:00Z"
NOT_IN_POOL = "node(s) didn't match Pod's node affinity/selector"
TOO_FEW_GPUS = f"0/8 nodes are available: 2 Insufficient {GPU_RESOURCE}, 6 {NOT_IN_POOL}."
TAKEN = "0/16 nodes are available: 16 node(s) didn't satisfy existing pods anti-affinity rules."
UNREACHABLE = (
    'Internal error occurred: failed calling webhook "jobs.mutate.exclusive-placement.io": '
    "failed to call webhook: All connection attempts failed"
)


def denied(job: str, leader: str) -> str:
    return (
        'Error creating: admission webhook "pods.validate.exclusive-placement.io" denied the request: '
        f"follower pod (completion index 1) of Job {NS}/{job}: leader pod {leader} is not yet scheduled"
    )


def nodes(count: int, pools: int, gpus: int = 8) -> list[dict[str, Any]]:
    """As devstack.shape builds them: `count` nodes in `pools` equal contiguous pools."""
    return [
        {
            "metadata": {"name": f"n{i}", "labels": {GKE_NODEPOOL_LABEL: f"pool-{i * pools // count}"}},
            "status": {"allocatable": {GPU_RESOURCE: str(gpus)}},
        }
        for i in range(count)
    ]


def job(
    name: str,
    *,
    pods: int = 8,
    gpus: int = 4,
    key: str = GKE_NODEPOOL_LABEL,
    resize: str | None = None,
    suspend: bool = False,
    jobset: str | None = "training",
    gang: int | None = None,
) -> dict[str, Any]:
    """An Indexed Job of JobSet `jobset` (None: of none), with `gang` one of that all-or-nothing JobSet's
    `gang` Jobs; with `resize` it is admitted at size 1 and `pods` is its target."""
    built = make_job(name, NS).annotation(JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION, key)
    built.limits(**{GPU_RESOURCE: str(gpus)}).uid(f"{name}-uid")
    if jobset is not None:
        built.label(JOBSET_NAME_LABEL, jobset)
    if jobset is not None and gang is not None:
        built.in_gang(jobset, gang, queued_at=QUEUED_AT)
    size = pods
    if resize is not None:
        built.label(RESIZE_LABEL, resize).annotation(TARGET_COMPLETIONS_ANNOTATION, str(pods))
        built.annotation(TARGET_PARALLELISM_ANNOTATION, str(pods))
        size = 1 if resize == "pending" else pods
    built.spec(completionMode="Indexed", completions=size, parallelism=size, suspend=suspend)
    return built.status().obj()


def pod(
    job_name: str,
    index: int,
    *,
    node: str = "",
    unschedulable: str | None = None,
    gated: bool = False,
    scheduler: str | None = None,
    key: str = GKE_NODEPOOL_LABEL,
    gang: int | None = None,
) -> dict[str, Any]:
    """As the webhook admitted it: the topology key it is exclusive on in its annotations; with `gang`, a
    pod of one of JobSet training's `gang` all-or-nothing Jobs."""
    built = make_pod(f"{job_name}-{index}-abcde", NS).job_label(job_name).index(index).topology(key)
    if gang is not None:
        built.in_gang("training", gang, queued_at=QUEUED_AT)
    built.node(node or None).phase("Running" if node else "Pending")
    if gated:
        built.gated()
    if scheduler:
        built.spec(schedulerName=scheduler)
    if unschedulable:
        built.condition("PodScheduled", "False", reason="Unschedulable", message=unschedulable)
    return built.obj()


def event(kind: str, name: str, reason: str, message: str, at: int, warning: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{name}.{at}", "namespace": NS},
        "involvedObject": {"kind": kind, "name": name, "namespace": NS},
        "type": "Warning" if warning else "Normal",
        "reason": reason,
        "message": message,
        "eventTime": f"2026-01-01T00:00:{at:02d}.000000Z",
    }


def half_placed(name: str, pool_nodes: list[str], pods: int = 8, per_pool: int = 4) -> list[dict[str, Any]]:
    """A resized Job whose pool holds `per_pool` of its `pods`: the rest cannot fit."""
    placed = [pod(name, i, node=pool_nodes[i % len(pool_nodes)]) for i in range(per_pool)]
    return placed + [pod(name, i, unschedulable=TOO_FEW_GPUS) for i in range(per_pool, pods)]


def jobset(replicas: int, *, plain_replicas: int = 0) -> dict[str, Any]:
    """JobSet training: `replicas` exclusive workers (JobSet's exclusive-topology annotation, as in the
    example), after `plain_replicas` of a replicated Job whose template opts out (JobSet's node-selector
    mode, which this project leaves to JobSet)."""
    plain = {
        "name": "plain",
        "replicas": plain_replicas,
        "template": {"metadata": {"annotations": {JOBSET_NODE_SELECTOR_ANNOTATION: "true"}}, "spec": {}},
    }
    workers = {"name": "workers", "replicas": replicas, "template": {"spec": {}}}
    return {
        "metadata": {
            "name": "training",
            "namespace": NS,
            "annotations": {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL},
        },
        "spec": {"replicatedJobs": [plain, workers] if plain_replicas else [workers]},
    }


def snapshot(
    node_list: Sequence[dict[str, Any]],
    jobs: Sequence[dict[str, Any]],
    pods: Sequence[dict[str, Any]],
    events: list[dict[str, Any]] | None = None,
    jobsets: list[dict[str, Any]] | None = None,
    workloads: list[dict[str, Any]] | None = None,
) -> Reading:
    return Reading(Snapshot(node_list, pods, jobs, workloads=workloads or ()), jobsets or [], events or [])


def with_events(base: Reading, events: list[dict[str, Any]]) -> Reading:
    return replace(base, events=events)


def too_small_pools() -> Reading:
    """`devstack run --nodes 8 --pools 4` with the example: 4 Jobs x 8 pods x 4 GPUs, 16 GPUs per pool."""
    cluster = nodes(8, 4)
    jobs = [job(f"w-{j}", resize="done") for j in range(4)]
    pods = [p for j in range(4) for p in half_placed(f"w-{j}", [f"n{2 * j}", f"n{2 * j + 1}"])]
    return snapshot(cluster, jobs, pods)


def contended(reason: str = TAKEN) -> Reading:
    """4 Jobs, 2 pools that each hold one: two Jobs run, the other two leaders wait for a pool."""
    cluster = nodes(16, 2)
    jobs = [job("w-0", resize="done"), job("w-1", resize="done")]
    jobs += [job("w-2", resize="pending"), job("w-3", resize="pending")]
    pods = [pod(f"w-{j}", i, node=f"n{8 * j + i}") for j in range(2) for i in range(8)]
    pods += [pod("w-2", 0, unschedulable=reason), pod("w-3", 0, unschedulable=reason)]
    return snapshot(cluster, jobs, pods)


# --- grouping ------------------------------------------------------------------------------------------
def test_pending_pods_are_grouped_by_the_schedulers_message_with_counts() -> None:
    diagnosis = diagnose(too_small_pools())
    assert diagnosis.groups == (ReasonGroup(16, "pod", f"Unschedulable: {TOO_FEW_GPUS}"),)
    assert diagnosis.render().splitlines()[0] == f"  16 pods: Unschedulable: {TOO_FEW_GPUS}"


def test_webhook_failures_are_grouped_by_webhook_though_each_message_names_its_own_pod() -> None:
    snap = contended()
    events = [
        event("Job", "w-2", "FailedCreate", denied("w-2", "w-2-0-abcde"), 1),
        event("Job", "w-3", "FailedCreate", denied("w-3", "w-3-0-fghij"), 2),
    ]
    groups = diagnose(with_events(snap, events)).groups
    reason = 'FailedCreate: admission webhook "pods.validate.exclusive-placement.io" denied the request'
    (group,) = [g for g in groups if g.unit == "Job"]
    assert (group.count, group.reason) == (2, reason)
    assert group.detail.startswith("follower pod (completion index 1) of Job default/w-2")
    assert group.render().startswith(f"2 Jobs: {reason} (e.g. follower pod")


def test_only_the_latest_event_of_a_stalled_object_counts() -> None:
    events = [
        event("Job", "w-2", "FailedCreate", UNREACHABLE, 1),
        event("Job", "w-2", "SuccessfulCreate", "Created pod: w-2-0-abcde", 2, warning=False),
        event("Job", "w-0", "FailedCreate", UNREACHABLE, 3),  # w-0 runs whole: its past does not matter
    ]
    assert latest_warnings(events).keys() == {("Job", "w-0")}
    snap = contended()
    groups = diagnose(with_events(snap, events)).groups
    assert [g.unit for g in groups] == ["pod"]


def test_a_jobset_short_of_jobs_reports_its_failure_or_the_shortfall() -> None:
    failed = diagnose(
        snapshot(
            nodes(8, 4),
            [],
            [],
            [event("JobSet", "training", "JobCreationFailed", UNREACHABLE, 1)],
            [jobset(4)],
        )
    )
    assert failed.groups[0].render() == (
        '1 JobSet: JobCreationFailed: failed calling webhook "jobs.mutate.exclusive-placement.io" '
        "(failed to call webhook: All connection attempts failed)"
    )
    silent = diagnose(snapshot(nodes(8, 4), [job("w-0")], [], [], [jobset(4)]))
    assert (
        ReasonGroup(1, "JobSet", "1 of 4 exclusive child Jobs created, no failure reported") in silent.groups
    )


def test_a_jobset_short_only_of_child_jobs_this_project_does_not_place_is_not_reported_short() -> None:
    """Counted as `explain jobset` counts them: its Jobs this project places (those missing, JobSet's
    controller is the one to ask), and the same numbers there."""
    short_of_plain = snapshot(nodes(8, 4), [job("w-0"), job("w-1")], [], [], [jobset(2, plain_replicas=1)])
    assert not [g for g in diagnose(short_of_plain).groups if g.unit == "JobSet"]
    short_of_workers = replace(short_of_plain, jobsets=[jobset(3, plain_replicas=1)])
    group = ReasonGroup(1, "JobSet", "2 of 3 exclusive child Jobs created, no failure reported")
    assert group in diagnose(short_of_workers).groups
    explained = explain_jobset(short_of_workers.snapshot, jobset(3, plain_replicas=1), [])
    assert "Exclusive Jobs:  2 of 3 created" in explained


def test_the_fingerprint_ignores_details_but_not_counts() -> None:
    one = Diagnosis((ReasonGroup(2, "Job", "FailedCreate: x", "pod a"),), ("h",))
    assert (
        one.fingerprint == Diagnosis((ReasonGroup(2, "Job", "FailedCreate: x", "pod b"),), ("h",)).fingerprint
    )
    assert (
        one.fingerprint != Diagnosis((ReasonGroup(3, "Job", "FailedCreate: x", "pod a"),), ("h",)).fingerprint
    )


def gang_half_bound() -> Reading:
    """JobSet training, all-or-nothing, of 2 elastic Jobs: w-0's leader bound, w-1's unschedulable."""
    jobs = [job(f"w-{j}", pods=2, resize="pending", gang=2) for j in range(2)]
    pods = [pod("w-0", 0, node="n0", gang=2), pod("w-1", 0, unschedulable="0/8 nodes: 8 taint", gang=2)]
    return snapshot(nodes(8, 4), jobs, pods)


def test_a_job_waiting_for_the_other_leaders_of_its_jobset_has_its_own_group_not_the_resizers() -> None:
    groups = diagnose(gang_half_bound()).groups
    assert (
        ReasonGroup(
            1, "Job", "leader bound, waiting for the other Jobs of its all-or-nothing JobSet to bind theirs"
        )
        in groups
    )
    assert not [g for g in groups if "resize still pending" in g.reason]


# --- hints ---------------------------------------------------------------------------------------------
HINT_CASES: list[tuple[str, Reading, list[str]]] = [
    (
        "pools too small for a Job",
        too_small_pools(),
        [
            f"4 Jobs (default/w-0, ...) are too large: 8 pods x 4 {GPU_RESOURCE} need 32 {GPU_RESOURCE} in "
            f"one {GKE_NODEPOOL_LABEL} domain; the largest has 16 (room for 4 such pods)",
            "--nodes 16 (with --pools 4: 4 nodes per pool)",
            "--pools 2 (with --nodes 8; 2 of the Jobs then wait their turn)",
            "--gpus-per-node 16",
        ],
    ),
    (
        "a pod larger than any node",
        snapshot(nodes(8, 4), [job("big", pods=2, gpus=16)], [pod("big", 0, unschedulable="0/8 nodes ...")]),
        [
            f"Job default/big is too large: 2 pods x 16 {GPU_RESOURCE} need 32 {GPU_RESOURCE}",
            "no node holds one such pod: --gpus-per-node 16",
        ],
    ),
    (
        "a topology label no node carries",
        snapshot(
            nodes(8, 4),
            [job("z", key="example.com/rack")],
            [pod("z", 0, unschedulable="0/8 nodes ...", key="example.com/rack")],
        ),
        [
            "Job default/z is exclusive on the node label example.com/rack: 1 Job needs 1 example.com/rack "
            "domain; none exists (no schedulable node carries the label example.com/rack)",
            f"the nodes here carry {GKE_NODEPOOL_LABEL}",
        ],
    ),
    (
        "more Jobs than pools",
        contended(),
        [
            f"4 Jobs need 4 {GKE_NODEPOOL_LABEL} domains; 2 exist: 2 Jobs (default/w-2, ...) wait for a free "
            "node pool",
            "and all 2 are taken. Expected under contention",
            "To place all 4 at once: --pools 4 --nodes 32",
        ],
    ),
    (
        "more Jobs than pools, the scheduler reporting the GPUs the placed Jobs use",
        contended(f"0/16 nodes are available: 16 Insufficient {GPU_RESOURCE}."),
        [
            "2 Jobs (default/w-2, ...) wait for a free node pool",
            "To place all 4 at once: --pools 4 --nodes 32",
        ],
    ),
    (
        "leader bound, never resized",
        snapshot(nodes(8, 4), [job("w-0", pods=2, resize="pending")], [pod("w-0", 0, node="n0")]),
        ["Job default/w-0 has a bound leader but still not resized", "--resizer-replicas >= 1"],
    ),
    (
        "leader bound, the other leaders of its all-or-nothing JobSet not",
        gang_half_bound(),
        [
            "Job default/w-0 waits, leader bound, for the other Jobs of its all-or-nothing JobSet to bind",
            "--all-or-nothing-timeout-seconds",
        ],
    ),
    (
        "leader bound, followers still gated",
        snapshot(nodes(8, 4), [job("w-0", pods=2)], [pod("w-0", 0, node="n0"), pod("w-0", 1, gated=True)]),
        [f"Job default/w-0 has a bound leader but still followers gated ({LEADER_SCHEDULED_GATE})"],
    ),
    (
        "a suspended Job",
        snapshot(nodes(8, 4), [job("w-0", pods=2, suspend=True)], []),
        ["Job default/w-0 is suspended (spec.suspend: true)"],
    ),
    (
        "a scheduler that does not exist",
        snapshot(nodes(8, 4), [job("w-0", gpus=0)], [pod("w-0", 0, scheduler="volcano")]),
        ["pods ask for schedulerName volcano, which no scheduler here serves"],
    ),
    (
        "a reason devstack does not know",
        snapshot(
            nodes(8, 4), [job("w-0", gpus=0)], [pod("w-0", 0, unschedulable="0/8 nodes: 8 untolerated taint")]
        ),
        [UNKNOWN_CAUSE],
    ),
    ("nothing waits", snapshot(nodes(8, 4), [job("w-0", gpus=0)], []), [NOTHING_WAITS]),
]


@pytest.mark.parametrize(("snap", "expected"), [c[1:] for c in HINT_CASES], ids=[c[0] for c in HINT_CASES])
def test_the_hint_names_what_to_change(snap: Reading, expected: list[str]) -> None:
    (hint,) = diagnose(snap).hints
    for fragment in expected:
        assert fragment in hint


def test_an_unreachable_webhook_is_the_hint_when_the_jobset_cannot_create_jobs() -> None:
    events = [event("JobSet", "training", "JobCreationFailed", UNREACHABLE, 1)]
    (hint,) = diagnose(snapshot(nodes(8, 4), [], [], events, [jobset(4)])).hints
    assert 'cannot call the admission webhook "jobs.mutate.exclusive-placement.io"' in hint


def test_a_follower_denied_while_its_leader_waits_is_not_a_webhook_problem() -> None:
    snap = contended()
    events = [event("Job", "w-2", "FailedCreate", denied("w-2", "w-2-0-abcde"), 1)]
    (hint,) = diagnose(with_events(snap, events)).hints
    assert "wait for a free node pool" in hint


def test_a_follower_denied_although_its_leader_is_bound_is() -> None:
    jobs = [job("w-0", pods=2)]
    events = [event("Job", "w-0", "FailedCreate", denied("w-0", "w-0-0-abcde"), 1)]
    (hint,) = diagnose(snapshot(nodes(8, 4), jobs, [pod("w-0", 0, node="n0")], events)).hints
    assert 'the admission webhook "pods.validate.exclusive-placement.io" rejects' in hint


def two_pools_held(waiting_reason: str, *, held: int = 2) -> Reading:
    """Jobs of no JobSet: `held` of the 2 pools taken by a placed Job each, a third Job's leader waiting."""
    jobs = [job(f"p-{j}", jobset=None) for j in range(held)] + [job("c", jobset=None)]
    pods = [pod(f"p-{j}", i, node=f"n{8 * j + i}") for j in range(held) for i in range(8)]
    return snapshot(nodes(16, 2), jobs, [*pods, pod("c", 0, unschedulable=waiting_reason)])


def test_a_job_waits_for_a_free_pool_when_other_jobs_hold_every_one_whatever_the_schedulers_words() -> None:
    (hint,) = diagnose(two_pools_held("0/16 nodes are available: 16 node(s) had untolerated taint")).hints
    assert hint.startswith(
        f"3 Jobs need 3 {GKE_NODEPOOL_LABEL} domains; 2 exist: Job default/c waits for a free node pool"
    )
    assert hint.endswith("To place all 3 at once: --pools 3 --nodes 24")


def test_an_anti_affinity_verdict_with_a_pool_free_is_not_contention() -> None:
    (hint,) = diagnose(two_pools_held(TAKEN, held=1)).hints
    assert hint == UNKNOWN_CAUSE


def test_a_job_kueue_holds_is_counted_and_hinted_as_queued_not_as_suspended() -> None:
    quota = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu"
    workload = (
        make_workload("job-w-0-1a2b3", NS)
        .owned_by("Job", "w-0", "w-0-uid", "batch/v1")
        .queue("user-queue")
        .condition("QuotaReserved", "False", reason="Pending", message=quota)
    )
    diagnosis = diagnose(snapshot(nodes(8, 4), [job("w-0", suspend=True)], [], workloads=[workload.obj()]))
    (group,) = diagnosis.groups
    assert (group.count, group.unit) == (1, "Job")
    assert group.reason.startswith("queued by Kueue")
    assert quota in group.detail
    (hint,) = diagnosis.hints
    assert hint.startswith(
        "Job default/w-0 is queued by Kueue (queued by Kueue in LocalQueue default/user-queue"
    )
    assert "suspended (spec.suspend" not in diagnosis.render()


def test_a_job_kueues_tas_placed_is_counted_and_hinted_as_such_not_as_waiting_for_a_pool() -> None:
    workload = (
        make_workload("job-w-0-1a2b3", NS)
        .owned_by("Job", "w-0", "w-0-uid", "batch/v1")
        .queue("user-queue")
        .condition("Admitted", "True", reason="Admitted")
        .obj()
    )
    topology = {"levels": ["kubernetes.io/hostname"], "slices": []}
    workload["status"]["admission"] = {
        "podSetAssignments": [{"name": "main", "topologyAssignment": topology}]
    }
    reading = snapshot(nodes(8, 4), [job("w-0")], [pod("w-0", 0, unschedulable=TAKEN)], workloads=[workload])
    diagnosis = diagnose(reading)
    (group,) = [group for group in diagnosis.groups if group.unit == "Job"]
    assert group.reason == "placed by Kueue's Topology Aware Scheduling, blind to exclusivity"
    assert "Workload job-w-0-1a2b3 assigns them to domains at kubernetes.io/hostname" in group.detail
    assert any(
        hint.startswith("Job default/w-0 was placed by Kueue's Topology Aware Scheduling")
        for hint in diagnosis.hints
    )


class FakeClient:
    """Lists what it holds per kind; an uninstalled kind answers 404, as the API server does."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.objects = objects

    def list(self, kind: str, *, namespace: str | None = None) -> list[dict[str, Any]]:
        if kind not in self.objects:
            raise KubeError(404, "NotFound", f"the server could not find the requested resource ({kind})")
        return self.objects[kind]


def test_the_reading_takes_the_jobsets_the_resizer_stepped_over_from_its_events_and_no_kueue_as_none() -> (
    None
):
    stepped = event("JobSet", "training", ALL_OR_NOTHING_STEPPED_OVER_REASON, "waited 300s", 1, warning=False)
    other = event("Job", "training", ALL_OR_NOTHING_STEPPED_OVER_REASON, "not a JobSet", 2, warning=False)
    client = FakeClient({"Node": nodes(8, 4), "Pod": [], "Job": [], "JobSet": [], "Event": [stepped, other]})
    reading = read_cluster(cast(GenericClient, client), NS)
    assert reading.snapshot.stepped_over == {(NS, "training")}
    assert reading.snapshot.workloads == []
    assert list(reading.events) == [stepped, other]


def test_a_failure_to_list_workloads_other_than_not_found_is_not_hidden() -> None:
    class Forbidden(FakeClient):
        def list(self, kind: str, *, namespace: str | None = None) -> list[dict[str, Any]]:
            if kind == "Workload":
                raise KubeError(403, "Forbidden")
            return super().list(kind, namespace=namespace)

    client = Forbidden({"Node": [], "Pod": [], "Job": [], "JobSet": [], "Event": []})
    with pytest.raises(KubeError):
        read_cluster(cast(GenericClient, client), NS)


def test_a_job_that_is_not_exclusive_is_still_said_to_be_suspended() -> None:
    plain = make_job("plain", NS).spec(suspend=True).status().obj()
    diagnosis = diagnose(snapshot(nodes(8, 4), [plain], []))
    assert diagnosis.groups == (ReasonGroup(1, "Job", "suspended (spec.suspend: true)"),)
    assert diagnosis.hints == (
        "Job default/plain is suspended (spec.suspend: true): nothing creates pods until it is set to false",
    )


def test_jobs_placed_whole_need_no_hint_about_capacity() -> None:
    snap = too_small_pools()
    placed = [pod("w-0", i, node=f"n{i % 2}") for i in range(4)]
    diagnosis = diagnose(snapshot(snap.snapshot.nodes, [job("w-0", pods=4, resize="done")], placed))
    assert diagnosis.hints == (NOTHING_WAITS,)


# --- the stall report ----------------------------------------------------------------------------------
class FakeDiagnoses:
    def __init__(self) -> None:
        self.current = Diagnosis((ReasonGroup(16, "pod", "Unschedulable: too few GPUs"),), ("more nodes",))
        self.calls = 0

    def __call__(self) -> Diagnosis:
        self.calls += 1
        return self.current


def status(state: Any = "resized", running: int = 4) -> JobStatus:
    return JobStatus("default/w-0", state, ("pool-0",), running, 8, True, True)


def test_the_stall_report_comes_once_after_the_quiet_period_and_not_again_while_nothing_changes() -> None:
    diagnoses = FakeDiagnoses()
    watcher = StallWatcher(after=30, diagnose=diagnoses, recheck=1)
    statuses = [status()]
    assert watcher.observe(statuses, 0.0) is None
    assert watcher.observe(statuses, 29.9) is None
    assert diagnoses.calls == 0
    report = watcher.observe(statuses, 30.0)
    assert report == (
        "no progress for 30s (1 Jobs: 1 resized). Waiting:\n"
        "  16 pods: Unschedulable: too few GPUs\n"
        "  hint: more nodes"
    )
    reports = [watcher.observe(statuses, 30.0 + t / 10) for t in range(1, 600)]
    assert reports == [None] * len(reports)
    assert 55 <= diagnoses.calls <= 61  # rechecked about once a second, not at every poll


def test_the_stall_report_repeats_when_the_picture_changes() -> None:
    diagnoses = FakeDiagnoses()
    watcher = StallWatcher(after=5, diagnose=diagnoses, recheck=1)
    statuses = [status()]
    watcher.observe(statuses, 0.0)
    assert watcher.observe(statuses, 5.0) is not None
    diagnoses.current = Diagnosis((ReasonGroup(12, "pod", "Unschedulable: too few GPUs"),), ("more nodes",))
    assert watcher.observe(statuses, 5.5) is None  # not rechecked yet
    assert "12 pods" in (watcher.observe(statuses, 6.0) or "")
    assert watcher.observe(statuses, 7.0) is None


def test_progress_restarts_the_quiet_period() -> None:
    diagnoses = FakeDiagnoses()
    watcher = StallWatcher(after=5, diagnose=diagnoses)
    watcher.observe([status(running=3)], 0.0)
    assert watcher.observe([status(running=4)], 4.0) is None
    assert watcher.observe([status(running=4)], 8.9) is None
    assert "no progress for 5s" in (watcher.observe([status(running=4)], 9.0) or "")
    assert watcher.observe([status("running", running=8)], 20.0) is None  # progress: nothing to say
    assert "(1 Jobs: 1 running)" in (watcher.observe([status("running", running=8)], 25.0) or "")


def test_within_one_stall_the_report_keeps_the_best_hint_it_found() -> None:
    diagnoses = FakeDiagnoses()
    watcher = StallWatcher(after=5, diagnose=diagnoses, recheck=1)
    statuses = [status()]
    watcher.observe(statuses, 0.0)
    assert "hint: more nodes" in (watcher.observe(statuses, 5.0) or "")
    diagnoses.current = Diagnosis((ReasonGroup(16, "pod", "Unschedulable: other words"),), (UNKNOWN_CAUSE,))
    report = watcher.observe(statuses, 6.0) or ""
    assert "16 pods: Unschedulable: other words" in report
    assert report.endswith("hint: more nodes")
    assert UNKNOWN_CAUSE not in report
    watcher.observe([status(running=5)], 7.0)  # progress: a new stall starts without a hint of its own
    assert watcher.observe([status(running=5)], 12.0) == (
        f"no progress for 5s (1 Jobs: 1 resized). Waiting:\n  16 pods: Unschedulable: other words\n"
        f"  hint: {UNKNOWN_CAUSE}"
    )


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_the_stall_setting_must_be_a_positive_number_of_seconds(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--stall-seconds", value])
    assert "--stall-seconds" in capsys.readouterr().err


def test_the_stall_setting_defaults_to_thirty_seconds() -> None:
    assert build_parser().parse_args(["run"]).stall_seconds == 30.0
    assert build_parser().parse_args(["demo", "--stall-seconds", "0.5"]).stall_seconds == 0.5
