"""Where exclusive placement stands, from what the API server shows (docs/kubectl-plugin.md).

The decisions behind `kubectl exclusive-placement status` and `explain`: which Job holds each topology
domain, and what each exclusive Job not yet placed waits for. Pure functions over listed objects: the
nodes, the exclusive pods of every namespace (those the webhook labelled with `exclusive-placement.io/
job-key`) and the Jobs in scope. Nothing comes from a component's memory: the all-or-nothing queue is
rebuilt from the gates and annotations on the leader pods exactly as the resizer builds it
(`placement.gang`), an elastic fallback is read from the Job's `elastic-fallback` annotation, and the
scheduler's verdict from the pod's `PodScheduled` condition.

- `Snapshot(nodes, pods, jobs)`: one look at the cluster.
- `domain_statuses(snapshot, topology_keys)`: every domain of each key, its holders, whether it can take
  pods (a cordoned domain cannot).
- `job_progress(snapshot, job)`: the steps of one Job on its way to being placed, and what it waits for.
- `waiting_jobs(snapshot)`: every exclusive Job of `snapshot.jobs` not yet placed, each with one
  `WaitReason` and a message; `placement_status(snapshot, namespace)`: both, for one namespace or all.
- `unplaced(snapshot, jobs)`: the progress of every Job of `jobs` not finished and not placed whole.
- `waits_for_a_held_domain(progress, domains)`: whether a Job waits for a domain another Job holds;
  `pod_wait_reason(pod)`: why one pod is not running yet, in the cluster's words.
- `stepped_over_jobsets(events)`: the JobSets the resizer's Events say it stepped over.
- `exclusive_child_jobs(jobset, jobs)`: a JobSet's exclusive child Jobs that exist, and how many it asks
  for (`explain jobset`'s count, and the shortfall devstack's stall report counts).

The plugin reads it, and so does devstack's stall report (`devstack.diagnosis`), which only words and groups
what it decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

from placement.admission import in_node_selector_mode
from placement.capacity import (
    CapacityProblem,
    CapacityReason,
    NodeRoom,
    job_capacity_problem,
    node_room,
    schedulable_domains,
    too_few_domains,
)
from placement.constants import (
    ALL_OR_NOTHING_GATE,
    ALL_OR_NOTHING_STEPPED_OVER_REASON,
    ELASTIC_FALLBACK_ANNOTATION,
    JOBSET_KIND,
    JOBSET_NAME_LABEL,
    LEADER_SCHEDULED_GATE,
    RESIZE_LABEL,
    RESIZE_PENDING,
    STRATEGY_ANNOTATION,
    TARGET_COMPLETIONS_ANNOTATION,
    Strategy,
)
from placement.gang import (
    AdmissionPlan,
    Gang,
    GangId,
    GangState,
    admitted_gang,
    build_gang,
    gang_of,
    held_nodes,
    leaders_in_place,
    node_view,
    plan_admission,
    pod_priority_value,
    queue_order,
    record_of_pods,
    trusted_member,
)
from placement.jobset import exclusive_jobs
from placement.kueue import kueue_queued, workload_of
from placement.kueue_tas import placed_by_tas, tas_levels
from placement.leader import belongs_to, is_live, pick_leader
from placement.objects import (
    Obj,
    annotations_of,
    is_finished_job,
    is_finished_pod,
    is_leader,
    is_terminating,
    items,
    labels_of,
    metadata,
    namespace_of,
    node_name,
    owner_job_key,
    pod_template,
    positive_int,
    section,
    target_size,
    topology_key_of_job,
    topology_key_of_pod,
)
from placement.resize import gang_incomplete, has_gate, job_ref
from placement.strategy import is_indexed


class WaitReason(StrEnum):
    """What an exclusive Job waits for; the `reason` of `-o json` (docs/kubectl-plugin.md, "Reasons")."""

    QUEUED_BY_KUEUE = "queued-by-kueue"
    """Suspended by Kueue until its Workload is admitted: the LocalQueue, the Workload's message."""
    PLACED_BY_KUEUE_TAS = "placed-by-kueue-tas"
    """Kueue's Topology Aware Scheduling chose its pods' nodes, and the scheduler finds no room there."""
    SUSPENDED = "suspended"
    LEADER_NOT_CREATED = "leader-not-created"
    ALL_OR_NOTHING_QUEUED = "all-or-nothing-queued"
    ALL_OR_NOTHING_STEPPED_OVER = "all-or-nothing-stepped-over"
    LEADER_GATED = "leader-gated"
    LEADER_PENDING = "leader-pending"
    LEADER_UNSCHEDULABLE = "leader-unschedulable"
    ALL_OR_NOTHING_GANG_INCOMPLETE = "all-or-nothing-gang-incomplete"
    """Its leader is bound; the other Jobs of its all-or-nothing JobSet have not all bound theirs, and the
    resizer grows it (or releases its followers) only once they have (the resizer's `gang-incomplete`)."""
    RESIZE_PENDING = "resize-pending"
    FOLLOWERS_GATED = "followers-gated"
    FOLLOWERS_NOT_CREATED = "followers-not-created"
    ELASTIC_FALLBACK = "elastic-fallback"
    FOLLOWERS_UNSCHEDULABLE = "followers-unschedulable"
    FOLLOWERS_PENDING = "followers-pending"
    PODS_UNSCHEDULABLE = "pods-unschedulable"
    """A NonIndexed Job (no leader, no followers): a domain for its pods, the scheduler's message."""
    PODS_PENDING = "pods-pending"
    TOO_FEW_DOMAINS = CapacityReason.TOO_FEW_DOMAINS.value
    DOMAIN_TOO_SMALL = CapacityReason.DOMAIN_TOO_SMALL.value


LEADER_BOUND = "leader bound"
"""The step of an Indexed Job's leader reaching a node."""
DEFAULT_SCHEDULER = "default-scheduler"
WAITS_FOR_A_DOMAIN = frozenset(
    {
        WaitReason.LEADER_UNSCHEDULABLE,
        WaitReason.LEADER_PENDING,
        WaitReason.ALL_OR_NOTHING_QUEUED,
        WaitReason.ALL_OR_NOTHING_STEPPED_OVER,
        WaitReason.PODS_UNSCHEDULABLE,
    }
)
"""What a Job waits for while its leader (a NonIndexed Job: its first pod) has no domain yet."""
ALL_OR_NOTHING_WAITS = frozenset({WaitReason.ALL_OR_NOTHING_QUEUED, WaitReason.ALL_OR_NOTHING_STEPPED_OVER})
"""The queue waits for enough free domains at once: a free one is not enough."""

WAITS_FOR_ROOM = frozenset(
    {
        WaitReason.ALL_OR_NOTHING_QUEUED,
        WaitReason.LEADER_PENDING,
        WaitReason.LEADER_UNSCHEDULABLE,
        WaitReason.FOLLOWERS_UNSCHEDULABLE,
        WaitReason.FOLLOWERS_PENDING,
        WaitReason.PODS_UNSCHEDULABLE,
        WaitReason.PODS_PENDING,
    }
)
"""What a Job waits for when it waits for room: a capacity problem (`placement.capacity`) says why better."""
UNSCHEDULABLE_WAITS = frozenset(
    {WaitReason.LEADER_UNSCHEDULABLE, WaitReason.FOLLOWERS_UNSCHEDULABLE, WaitReason.PODS_UNSCHEDULABLE}
)
"""The scheduler found no room for the Job's pods: where Kueue's TAS chose their nodes, it says why better."""


@dataclass(frozen=True)
class Holder:
    """A Job whose pods occupy a domain."""

    namespace: str
    jobset: str
    """Empty for a Job of no JobSet."""
    job: str
    priority: int
    since: str
    """When its first pod in the domain was scheduled (RFC 3339; empty when unknown)."""


@dataclass(frozen=True)
class DomainStatus:
    topology_key: str
    domain: str
    nodes: int
    schedulable: bool
    """At least one of its nodes is not cordoned (`spec.unschedulable`)."""
    holders: tuple[Holder, ...]

    @property
    def free(self) -> bool:
        return self.schedulable and not self.holders


@dataclass(frozen=True)
class Waiting:
    namespace: str
    jobset: str
    job: str
    reason: WaitReason
    message: str
    problem: CapacityProblem | None = None
    """The numbers behind `too-few-domains` and `domain-too-small` (`placement.capacity`); None else."""


@dataclass(frozen=True)
class Step:
    """One stage of a Job on its way to being placed (`explain`)."""

    name: str
    done: bool
    detail: str = ""


@dataclass(frozen=True)
class JobProgress:
    namespace: str
    jobset: str
    job: str
    topology_key: str
    strategy: str
    """As the pods see it: the pod template's annotation (the webhook aligns it), else the Job's."""
    size: int
    """Its full size: the target while it is admitted at size 1."""
    domain: str
    """The domain its leader is bound in; empty before."""
    steps: tuple[Step, ...]
    waiting: Waiting | None

    @property
    def leader_bound(self) -> bool:
        return any(step.name == LEADER_BOUND and step.done for step in self.steps)


# --- one look at the cluster ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    nodes: Sequence[Obj]
    pods: Sequence[Obj]
    """Exclusive pods of every namespace: the leaders among them make the all-or-nothing queue."""
    jobs: Sequence[Obj]
    """The Jobs in scope: those `waiting_jobs` looks at."""
    gang_jobs: Sequence[Obj] | None = None
    """The Jobs the webhook admitted into a gang, of every namespace: the records the resizer trusts (None:
    not listed, the leader pods' copies are read instead)."""
    stepped_over: frozenset[tuple[str, str]] = frozenset()
    """(namespace, name) of the JobSets the resizer reported stepped over (its `AllOrNothingSteppedOver`
    Events): how long the head waited is the resizer's count, not in any object."""
    workloads: Sequence[Obj] = ()
    """Kueue's Workloads of the Jobs in scope (none where Kueue is not installed)."""

    @cached_property
    def node_labels(self) -> dict[str, dict[str, str]]:
        return {str(metadata(node).get("name") or ""): labels_of(node) for node in self.nodes}

    @cached_property
    def rooms(self) -> tuple[NodeRoom, ...]:
        return tuple(node_room(node) for node in self.nodes)

    @cached_property
    def pods_by_job(self) -> dict[str, list[Obj]]:
        found: dict[str, list[Obj]] = {}
        for pod in self.pods:
            key = owner_job_key(pod)
            if key is not None:
                found.setdefault(key, []).append(pod)
        return found

    @cached_property
    def gangs(self) -> dict[GangId, Gang]:
        members: dict[GangId, list[Obj]] = {}
        for pod in self.pods:
            gang_id = gang_of(pod)
            if gang_id is not None and is_leader(pod):
                members.setdefault(gang_id, []).append(pod)
        built = {gang_id: self._build(gang_id, pods) for gang_id, pods in members.items()}
        return {gang_id: gang for gang_id, gang in built.items() if gang is not None}

    def _build(self, gang_id: GangId, pods: list[Obj]) -> Gang | None:
        if self.gang_jobs is None:
            return build_gang(gang_id, pods, record_of_pods(gang_id, pods))
        records = {
            f"{namespace_of(job)}/{metadata(job).get('name') or ''}": record
            for job in self.gang_jobs
            if (record := admitted_gang(job)) is not None
        }
        trusted = [
            (pod, record)
            for pod in pods
            if trusted_member(pod, gang_id, record := records.get(owner_job_key(pod) or ""))
            and record is not None
        ]
        return build_gang(gang_id, [pod for pod, _ in trusted], [record for _, record in trusted])

    @cached_property
    def queue(self) -> AdmissionPlan:
        """The resizer's plan, as it would make it now (no timeouts: those need the resizer's clock; the
        JobSets it reported stepped over are stepped over)."""
        nodes = [node_view(node) for node in self.nodes]
        forever = float("inf")
        stepped = {  # waited forever; every other one just now
            gang: -forever for gang in self.gangs if (gang.namespace, gang.jobset) in self.stepped_over
        }
        return plan_admission(
            self.gangs.values(),
            nodes,
            held_nodes(self.pods),
            0.0,
            forever,
            waiting_since=stepped,
            bound=forever,
        )

    def pods_of(self, job: Obj) -> list[Obj]:
        ref = job_ref(job)
        return [p for p in self.pods_by_job.get(f"{namespace_of(job)}/{ref.name}", []) if belongs_to(p, ref)]

    def domain_of(self, pod: Obj, topology_key: str) -> str:
        return self.node_labels.get(node_name(pod) or "", {}).get(topology_key, "")


# --- domains ---------------------------------------------------------------------------------------------


def topology_keys(jobs: Iterable[Obj], pods: Iterable[Obj]) -> set[str]:
    """The keys exclusive Jobs and pods name (JobSet's node-selector mode left out)."""
    keys = {key for job in jobs if (key := topology_key_of_job(job)) and not in_node_selector_mode(job)}
    return keys | {key for pod in pods if (key := topology_key_of_pod(pod))}


def _scheduled_at(pod: Obj) -> str:
    condition = _condition(pod, "PodScheduled")
    if condition is not None and condition.get("status") == "True":
        return str(condition.get("lastTransitionTime") or "")
    return ""


def _holders(snapshot: Snapshot, topology_key: str) -> dict[str, list[Holder]]:
    """Per domain, the Jobs whose bound, unfinished pods exclusive on `topology_key` sit in it (a
    terminating pod still holds its node until it is gone)."""
    found: dict[tuple[str, str], Holder] = {}
    for pod in snapshot.pods:
        domain = snapshot.domain_of(pod, topology_key)
        job = owner_job_key(pod)
        if not domain or job is None or topology_key_of_pod(pod) != topology_key or is_finished_pod(pod):
            continue
        namespace, name = job.split("/", 1)
        holder = Holder(
            namespace,
            labels_of(pod).get(JOBSET_NAME_LABEL, ""),
            name,
            pod_priority_value(pod),
            _scheduled_at(pod),
        )
        known = found.get((domain, job))
        if known is not None:
            earliest = min(filter(None, (known.since, holder.since)), default="")
            holder = Holder(namespace, known.jobset, name, max(known.priority, holder.priority), earliest)
        found[(domain, job)] = holder
    by_domain: dict[str, list[Holder]] = {}
    for (domain, _job), holder in sorted(found.items()):
        by_domain.setdefault(domain, []).append(holder)
    return by_domain


def domain_statuses(snapshot: Snapshot, keys: Iterable[str]) -> list[DomainStatus]:
    statuses: list[DomainStatus] = []
    for key in sorted(set(keys)):
        nodes: dict[str, list[bool]] = {}
        for node in snapshot.nodes:
            domain = labels_of(node).get(key)
            if domain:
                nodes.setdefault(domain, []).append(not section(node, "spec").get("unschedulable"))
        holders = _holders(snapshot, key)
        for domain, schedulable in sorted(nodes.items()):
            statuses.append(
                DomainStatus(key, domain, len(schedulable), any(schedulable), tuple(holders.get(domain, ())))
            )
    return statuses


# --- one Job ---------------------------------------------------------------------------------------------


def _condition(obj: Obj, kind: str) -> Obj | None:
    for condition in items(section(obj, "status"), "conditions"):
        if isinstance(condition, dict) and condition.get("type") == kind:
            return condition
    return None


def scheduler_verdict(pod: Obj) -> str | None:
    """The scheduler's word on an unscheduled pod (`PodScheduled=False`: reason and message), None before
    it has said anything."""
    condition = _condition(pod, "PodScheduled")
    if condition is None or condition.get("status") != "False":
        return None
    return f"{condition.get('reason') or 'Unschedulable'}: {condition.get('message') or '(no message)'}"


def pod_wait_reason(pod: Obj) -> str | None:
    """Why a pod is not running yet, in the cluster's own words; None when it is not waiting."""
    if is_terminating(pod) or section(pod, "status").get("phase", "Pending") != "Pending":
        return None
    gates = sorted(_gates(pod))
    if gates:
        return f"SchedulingGated: waiting for the scheduling gate {', '.join(gates)} to be removed"
    if node_name(pod) is not None:
        return "bound to a node, not started yet"
    verdict = scheduler_verdict(pod)
    if verdict is not None:
        return verdict
    scheduler = scheduler_name(pod)
    if scheduler != DEFAULT_SCHEDULER:
        return f"schedulerName {scheduler}: not scheduled yet (that scheduler has not reported on it)"
    return "not scheduled yet (the scheduler has not reported on it)"


def scheduler_name(pod: Obj) -> str:
    return str(section(pod, "spec").get("schedulerName") or DEFAULT_SCHEDULER)


def resolved_strategy(job: Obj) -> str:
    """The pod template's strategy (the webhook writes there what it resolved), else the Job's own."""
    for found in (annotations_of(pod_template(job)), annotations_of(job)):
        value = found.get(STRATEGY_ANNOTATION, "").strip()
        if value:
            return value
    if RESIZE_LABEL in labels_of(job) or not is_indexed(job):
        return Strategy.ELASTIC if is_indexed(job) else Strategy.AFFINITY
    return "the webhook's default"


def expected_active(job: Obj) -> int:
    """Pods the Job runs at once now: min(parallelism, completions - succeeded) (parallelism 1 when unset,
    as the API server defaults it; 0 pauses the Job)."""
    spec = section(job, "spec")
    parallelism = spec.get("parallelism")
    if not isinstance(parallelism, int) or isinstance(parallelism, bool):
        parallelism = 1
    succeeded = positive_int(section(job, "status").get("succeeded")) or 0
    completions = positive_int(spec.get("completions"))
    return parallelism if completions is None else max(0, min(parallelism, completions - succeeded))


@dataclass
class _Walk:
    """Builds a Job's steps; the first step not done is what it waits for."""

    namespace: str
    jobset: str
    job: str
    steps: list[Step] = field(default_factory=list)
    waiting: Waiting | None = None

    def step(
        self, name: str, done: bool, detail: str = "", wait: tuple[WaitReason, str] | None = None
    ) -> None:
        self.steps.append(Step(name, done, detail))
        if not done and self.waiting is None and wait is not None:
            self.waiting = Waiting(self.namespace, self.jobset, self.job, *wait)


def job_progress(snapshot: Snapshot, job: Obj) -> JobProgress:
    """The steps of one exclusive Job (`topology_key_of_job(job)` set) and the first it waits on."""
    key = topology_key_of_job(job) or ""
    meta = metadata(job)
    walk = _Walk(namespace_of(job), labels_of(job).get(JOBSET_NAME_LABEL, ""), str(meta.get("name") or ""))
    pods = snapshot.pods_of(job)
    strategy = resolved_strategy(job)
    walk.step("admitted", True, _admission_detail(job, strategy))
    if section(job, "spec").get("suspend"):
        _suspended_step(snapshot, job, walk)
    domain = ""
    if is_indexed(job):
        domain = _leader_steps(snapshot, job, pods, key, walk)
        incomplete = _incomplete_gang(snapshot, job)
        if labels_of(job).get(RESIZE_LABEL) is not None:
            _resize_step(job, key, domain, walk, incomplete_gang=incomplete)
        _pods_step(job, pods, key, domain, walk, incomplete_gang=incomplete)
    else:
        domain = _shared_domain(snapshot, pods, key)
        _non_indexed_pods_step(job, pods, key, domain, walk)
    if walk.waiting is not None and walk.waiting.reason in WAITS_FOR_ROOM:
        tas = _placed_by_tas(snapshot, job) if walk.waiting.reason in UNSCHEDULABLE_WAITS else None
        if tas is not None:
            walk.waiting = Waiting(walk.namespace, walk.jobset, walk.job, WaitReason.PLACED_BY_KUEUE_TAS, tas)
        elif (problem := capacity_problem(snapshot, job)) is not None:
            reason = WaitReason(problem.reason.value)
            walk.waiting = Waiting(walk.namespace, walk.jobset, walk.job, reason, problem.message, problem)
    return JobProgress(
        walk.namespace,
        walk.jobset,
        walk.job,
        key,
        strategy,
        target_size(job),
        domain,
        tuple(walk.steps),
        walk.waiting,
    )


def _placed_by_tas(snapshot: Snapshot, job: Obj) -> str | None:
    """Why the Job waits, when its Workload (its own, or its JobSet's) was placed by Kueue's TAS."""
    workload = workload_of(job, snapshot.workloads)
    levels = tas_levels(workload)
    if workload is None or levels is None:
        return None
    return placed_by_tas(str(metadata(workload).get("name") or ""), levels)


def _suspended_step(snapshot: Snapshot, job: Obj, walk: _Walk) -> None:
    queued = kueue_queued(job, snapshot.workloads)
    if queued is not None:
        walk.step("admitted by Kueue", False, wait=(WaitReason.QUEUED_BY_KUEUE, queued.message))
        return
    walk.step(
        "resumed",
        False,
        wait=(WaitReason.SUSPENDED, "spec.suspend is true: the Job controller creates no pods until false"),
    )


def _admission_detail(job: Obj, strategy: str) -> str:
    fallback = annotations_of(job).get(ELASTIC_FALLBACK_ANNOTATION)
    if fallback:
        return f"{strategy}, as elastic was not possible ({fallback})"
    if not is_indexed(job):
        return f"{strategy}: a NonIndexed Job has no leader, every pod carries the affinity terms"
    if TARGET_COMPLETIONS_ANNOTATION in annotations_of(job):
        return f"{strategy}: at size 1 of {target_size(job)} until its leader is bound"
    return f"{strategy}, {target_size(job)} pods"


def _leader_steps(snapshot: Snapshot, job: Obj, pods: list[Obj], key: str, walk: _Walk) -> str:
    """The leader's steps; returns the domain it is bound in (empty before)."""
    leaders = [pod for pod in pods if is_leader(pod)]
    leader = pick_leader([pod for pod in leaders if is_live(pod)], job_ref(job))
    finished = any(section(pod, "status").get("phase") == "Succeeded" for pod in leaders)
    if leader is None:
        if finished:
            walk.step("leader", True, "the leader pod completed")
        else:
            walk.step(
                "leader created",
                False,
                wait=(
                    WaitReason.LEADER_NOT_CREATED,
                    "no leader pod (completion index 0) admitted by the webhook yet: the Job controller "
                    "creates it (a FailedCreate event on the Job says why it cannot; explain shows pods the "
                    "webhook did not admit)",
                ),
            )
        return ""
    name = str(metadata(leader).get("name") or "")
    walk.step("leader created", True, name)
    gang_id = gang_of(job)
    if gang_id is not None:
        queued = has_gate(leader, ALL_OR_NOTHING_GATE)
        stepped_over = any(over.gang == gang_id for over in snapshot.queue.stepped_over)
        reason = WaitReason.ALL_OR_NOTHING_STEPPED_OVER if stepped_over else WaitReason.ALL_OR_NOTHING_QUEUED
        walk.step(
            "released by the all-or-nothing queue",
            not queued,
            f"JobSet {gang_id.namespace}/{gang_id.jobset}",
            wait=(reason, queue_message(snapshot, gang_id)),
        )
    other_gates = _gates(leader) - {ALL_OR_NOTHING_GATE}
    if other_gates:
        walk.step(
            "leader ungated",
            False,
            wait=(
                WaitReason.LEADER_GATED,
                f"leader pod {name} carries the scheduling gate {', '.join(sorted(other_gates))}: whoever "
                "set it removes it (e.g. a queueing system such as Kueue)",
            ),
        )
    return _leader_bound_step(snapshot, leader, name, key, walk)


def _leader_bound_step(snapshot: Snapshot, leader: Obj, name: str, key: str, walk: _Walk) -> str:
    bound_to = node_name(leader)
    if bound_to is not None:
        domain = snapshot.domain_of(leader, key)
        since = _scheduled_at(leader)
        walk.step(
            LEADER_BOUND,
            True,
            f"{key}={domain or '?'} (node {bound_to}{', since ' + since if since else ''})",
        )
        return domain
    verdict = scheduler_verdict(leader)
    wait = (
        (WaitReason.LEADER_UNSCHEDULABLE, f"leader pod {name}: {verdict}")
        if verdict is not None
        else (
            WaitReason.LEADER_PENDING,
            f"leader pod {name} is not scheduled yet (no verdict from the scheduler)",
        )
    )
    walk.step(LEADER_BOUND, False, wait=wait)
    return ""


def _gates(pod: Obj) -> set[str]:
    gates = items(section(pod, "spec"), "schedulingGates")
    return {str(gate.get("name")) for gate in gates if isinstance(gate, dict)}


def _resize_step(job: Obj, key: str, domain: str, walk: _Walk, *, incomplete_gang: str | None) -> None:
    """`incomplete_gang`: what the Job's all-or-nothing gang still lacks (`_incomplete_gang`)."""
    size = target_size(job)
    pending = labels_of(job).get(RESIZE_LABEL) == RESIZE_PENDING
    if not pending:
        walk.step("resized", True, f"to {size} pods")
        return
    if incomplete_gang is not None:
        wait = (
            WaitReason.ALL_OR_NOTHING_GANG_INCOMPLETE,
            f"leader bound in {key}={domain}; all-or-nothing: the Job grows to {size} pods once "
            f"{incomplete_gang}",
        )
    else:
        wait = (
            WaitReason.RESIZE_PENDING,
            f"leader bound in {key}={domain}; the resizer grows the Job to {size} pods within a second of "
            "the bind: is a resizer running and holding its Lease?",
        )
    walk.step(f"resized to {size}", False, wait=wait)


def _incomplete_gang(snapshot: Snapshot, job: Obj) -> str | None:
    """What the Job's all-or-nothing gang still lacks, as the resizer decides it (`gang_incomplete`): "every
    Job of JobSet <ns>/<name> has a bound leader (1 of 2)"; None when the Job is in no gang or its gang is
    complete."""
    gang_id = gang_of(job)
    if gang_id is None:
        return None
    gang = snapshot.gangs.get(gang_id)
    if not gang_incomplete(job, gang):
        return None
    bound = (
        f"{leaders_in_place(gang)} of {gang.size}"
        if gang is not None
        else "the all-or-nothing queue shows none of its leaders"
    )
    return f"every Job of JobSet {gang_id.namespace}/{gang_id.jobset} has a bound leader ({bound})"


def _pods_step(
    job: Obj, pods: list[Obj], key: str, domain: str, walk: _Walk, *, incomplete_gang: str | None
) -> None:
    live = [pod for pod in pods if is_live(pod)]
    bound = [pod for pod in live if node_name(pod) is not None]
    gated = [pod for pod in live if has_gate(pod, LEADER_SCHEDULED_GATE)]
    unbound = [pod for pod in live if node_name(pod) is None and not is_leader(pod) and pod not in gated]
    expected = expected_active(job)
    where = f"{key}={domain}" if domain else key
    detail = f"{len(bound)} of {expected} pods bound" + (f" in {where}" if domain else "")
    verdicts = [verdict for pod in unbound if (verdict := scheduler_verdict(pod))]
    wait: tuple[WaitReason, str] | None = None
    if gated:
        wait = _gated_followers_wait(len(gated), incomplete_gang)
    elif verdicts:
        wait = (
            WaitReason.FOLLOWERS_UNSCHEDULABLE,
            f"{_count(len(verdicts), 'pod')} in {where}: {verdicts[0]}",
        )
    elif unbound:
        wait = (WaitReason.FOLLOWERS_PENDING, f"{_count(len(unbound), 'pod')} not scheduled yet")
    elif len(live) < expected:
        wait = _missing_pods(job, len(live), expected)
    done = walk.waiting is None and wait is None and len(bound) >= expected
    walk.step("pods placed", done, detail, wait)


def _gated_followers_wait(gated: int, incomplete_gang: str | None) -> tuple[WaitReason, str]:
    carry = f"{_count(gated, 'follower')} carry the scheduling gate {LEADER_SCHEDULED_GATE}"
    if incomplete_gang is not None:
        return (
            WaitReason.ALL_OR_NOTHING_GANG_INCOMPLETE,
            f"{carry}; all-or-nothing: the resizer pins them to their leader's domain and removes it once "
            f"{incomplete_gang}",
        )
    return (
        WaitReason.FOLLOWERS_GATED,
        f"{carry}: the resizer pins them to their leader's domain and removes it once the leader is bound",
    )


def _shared_domain(snapshot: Snapshot, pods: list[Obj], key: str) -> str:
    """The domain of a NonIndexed Job's bound pods (the affinity keeps them in one); empty before."""
    bound = {snapshot.domain_of(pod, key) for pod in pods if is_live(pod) and node_name(pod) is not None}
    bound.discard("")
    return next(iter(bound)) if len(bound) == 1 else ""


def _non_indexed_pods_step(job: Obj, pods: list[Obj], key: str, domain: str, walk: _Walk) -> None:
    """A NonIndexed Job has no leader: every pod carries the affinity terms, the first bound decides."""
    live = [pod for pod in pods if is_live(pod)]
    bound = [pod for pod in live if node_name(pod) is not None]
    unbound = [pod for pod in live if node_name(pod) is None]
    expected = expected_active(job)
    where = f"{key}={domain}" if domain else key
    verdicts = [verdict for pod in unbound if (verdict := scheduler_verdict(pod))]
    wait: tuple[WaitReason, str] | None = None
    if verdicts:
        wait = (WaitReason.PODS_UNSCHEDULABLE, f"{_count(len(verdicts), 'pod')} in {where}: {verdicts[0]}")
    elif unbound:
        wait = (WaitReason.PODS_PENDING, f"{_count(len(unbound), 'pod')} not scheduled yet")
    elif len(live) < expected:
        wait = (
            WaitReason.FOLLOWERS_NOT_CREATED,
            f"{len(live)} of {expected} pods exist; the Job controller creates the others (kubectl describe "
            "job: FailedCreate events say why not)",
        )
    detail = f"{len(bound)} of {expected} pods bound" + (f" in {where}" if domain else "")
    done = walk.waiting is None and wait is None and len(bound) >= expected
    walk.step("pods placed", done, detail, wait)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _missing_pods(job: Obj, present: int, expected: int) -> tuple[WaitReason, str]:
    created = f"{present} of {expected} pods exist; the Job controller creates the others"
    fallback = annotations_of(job).get(ELASTIC_FALLBACK_ANNOTATION)
    if fallback:
        return (
            WaitReason.ELASTIC_FALLBACK,
            f"elastic was not possible ({fallback}), so the Job was admitted with gate: {created}, each "
            "one rejected until its leader is bound and retried with backoff (kubectl describe job: "
            "FailedCreate)",
        )
    return (
        WaitReason.FOLLOWERS_NOT_CREATED,
        f"{created} (kubectl describe job: FailedCreate events say why not)",
    )


# --- capacity ----------------------------------------------------------------------------------------------


def _unfinished_siblings(snapshot: Snapshot, job: Obj, key: str) -> int:
    """The exclusive Jobs on `key` of the Job's JobSet that are not finished (the Job itself included)."""
    jobset = labels_of(job).get(JOBSET_NAME_LABEL, "")
    if not jobset:
        return 1
    return sum(
        1
        for other in snapshot.jobs
        if namespace_of(other) == namespace_of(job)
        and labels_of(other).get(JOBSET_NAME_LABEL) == jobset
        and topology_key_of_job(other) == key
        and not is_finished_job(other)
    )


def capacity_problem(snapshot: Snapshot, job: Obj) -> CapacityProblem | None:
    """Why a waiting exclusive Job can never be placed as things are: no domain holds its pods, or its
    JobSet's unfinished exclusive Jobs outnumber the schedulable domains (`placement.capacity`)."""
    key = topology_key_of_job(job)
    if key is None:
        return None
    too_small = job_capacity_problem(job, snapshot.rooms)
    if too_small is not None:
        return too_small
    domains = len(schedulable_domains(snapshot.rooms, key))
    return too_few_domains(_unfinished_siblings(snapshot, job, key), key, domains)


# --- the all-or-nothing queue ------------------------------------------------------------------------------


def queue_message(snapshot: Snapshot, gang_id: GangId) -> str:
    """Where a JobSet stands in the all-or-nothing queue, as the resizer's next pass would see it."""
    name = f"JobSet {gang_id.namespace}/{gang_id.jobset}"
    gang = snapshot.gangs.get(gang_id)
    plan = snapshot.queue
    if gang is None:
        return f"{name} waits for the all-or-nothing queue (the resizer releases all its leaders at once)"
    key = gang.topology_key
    state = plan.states.get(gang_id)
    if state is GangState.WAITING_FOR_PODS:
        have = len({leader.job for leader in gang.leaders})
        return (
            f"{have} of the {gang.size} Jobs of {name} have a leader pod; the all-or-nothing queue takes the "
            f"JobSet once all {gang.size} have one"
        )
    if any(release.gang == gang_id for release in plan.releases):
        return (
            f"{name} fits now ({gang.size} free {key} domains): the resizer releases its leaders on its next "
            "pass; is a resizer running and holding its Lease?"
        )
    for unfit, needs, existing in plan.unfit:
        if unfit == gang_id:
            return (
                f"{name} needs {needs} {key} domains and the cluster has {existing}: it waits, without "
                f"holding up the queue, until more nodes carry {key}"
            )
    position = _position(snapshot, gang_id)
    for over in plan.stepped_over:
        if over.gang == gang_id:
            return (
                f"{name} needs {over.needs} free {key} domains at once and {over.free} are free; it waited "
                "longer than the resizer's bound, so it is stepped over: the JobSets behind it go as they "
                f"fit, and it keeps its place ({position}), released first once enough domains are free"
            )
    blocked = plan.blocked
    if blocked is not None and blocked.gang == gang_id:
        return (
            f"{name} needs {blocked.needs} free {key} domains at once and {blocked.free} are free: first "
            f"in the all-or-nothing queue ({position}), released when enough domains free up (or stepped "
            "over once it has waited the resizer's bound)"
        )
    if blocked is None:
        return f"{name} is queued ({position}) behind the JobSets ahead"
    return (
        f"{name} is queued ({position}) behind JobSet {blocked.gang.namespace}/{blocked.gang.jobset}, which "
        f"needs {blocked.needs} free {key} domains ({blocked.free} free): it holds up the JobSets behind it "
        "for the resizer's bound at most"
    )


def _position(snapshot: Snapshot, gang_id: GangId) -> str:
    queued = sorted(
        (
            gang
            for gang_key, gang in snapshot.gangs.items()
            if snapshot.queue.states.get(gang_key) is GangState.QUEUED
        ),
        key=queue_order,
    )
    ids = [gang.id for gang in queued]
    return f"{ids.index(gang_id) + 1} of {len(ids)}" if gang_id in ids else "not queued"


# --- waiting for a domain ----------------------------------------------------------------------------------


def waits_for_a_domain(progress: JobProgress) -> bool:
    """Its leader (a NonIndexed Job: its first pod) needs a domain to itself and has none yet."""
    waiting = progress.waiting
    return waiting is not None and waiting.reason in WAITS_FOR_A_DOMAIN and not progress.domain


def waits_for_a_held_domain(progress: JobProgress, domains: Sequence[DomainStatus]) -> bool:
    """It waits for a domain of its key to free up: none is free (all-or-nothing: not enough at once), or its
    JobSet's Jobs outnumber the schedulable domains. `domains`: `domain_statuses` of its key. (No domain at
    all is a capacity problem, `too-few-domains`, already.)"""
    waiting = progress.waiting
    if waiting is None:
        return False
    if waiting.reason is WaitReason.TOO_FEW_DOMAINS:
        return waiting.problem is not None and waiting.problem.available > 0
    free = any(d.free for d in domains if d.topology_key == progress.topology_key)
    return waits_for_a_domain(progress) and (waiting.reason in ALL_OR_NOTHING_WAITS or not free)


# --- every Job ----------------------------------------------------------------------------------------------


def is_exclusive_job(job: Obj) -> bool:
    return topology_key_of_job(job) is not None and not in_node_selector_mode(job)


def unplaced(snapshot: Snapshot, jobs: Iterable[Obj]) -> list[JobProgress]:
    """The progress of every Job of `jobs` that is not finished and not placed whole (`waiting` set)."""
    found: list[JobProgress] = []
    for job in jobs:
        if is_finished_job(job) or is_terminating(job):
            continue
        progress = job_progress(snapshot, job)
        if progress.waiting is not None:
            found.append(progress)
    return found


def waiting_jobs(snapshot: Snapshot) -> list[Waiting]:
    """Every exclusive Job of `snapshot.jobs` that is not finished and not placed whole, with why."""
    found = [p.waiting for p in unplaced(snapshot, filter(is_exclusive_job, snapshot.jobs)) if p.waiting]
    return sorted(found, key=lambda w: (w.namespace, w.jobset, w.job))


def stepped_over_jobsets(events: Iterable[Obj]) -> frozenset[tuple[str, str]]:
    """(namespace, name) of the JobSets the resizer reported stepped over, from its `AllOrNothingSteppedOver`
    Events (events.k8s.io's `regarding` or core's `involvedObject`): `Snapshot.stepped_over`."""
    found: set[tuple[str, str]] = set()
    for event in events:
        regarding = section(event, "regarding") or section(event, "involvedObject")
        if (
            event.get("reason") == ALL_OR_NOTHING_STEPPED_OVER_REASON
            and regarding.get("kind") == JOBSET_KIND
            and regarding.get("name")
        ):
            found.add((str(regarding.get("namespace") or ""), str(regarding["name"])))
    return frozenset(found)


@dataclass(frozen=True)
class ExclusiveChildJobs:
    """A JobSet's child Jobs that ask for exclusive placement: those that exist, and how many it asks for."""

    jobs: tuple[Obj, ...]
    wanted: int
    """Its exclusive replicated Jobs' replicas (`placement.jobset.exclusive_jobs`); 0: it asks for none."""

    @property
    def missing(self) -> int:
        return max(0, self.wanted - len(self.jobs))


def exclusive_child_jobs(jobset: Obj, jobs: Iterable[Obj]) -> ExclusiveChildJobs:
    """The exclusive Jobs of `jobs` that are `jobset`'s (its namespace and name label), and how many its
    exclusive replicated Jobs ask for. Its other child Jobs are left out of both counts: exclusive placement
    neither places them nor is ever why they are missing (its Job webhook is not called for them)."""
    name = str(metadata(jobset).get("name") or "")
    namespace = namespace_of(jobset)
    mine = tuple(
        job
        for job in jobs
        if namespace_of(job) == namespace
        and labels_of(job).get(JOBSET_NAME_LABEL) == name
        and is_exclusive_job(job)
    )
    return ExclusiveChildJobs(mine, exclusive_jobs(jobset))


def placement_status(snapshot: Snapshot, namespace: str | None) -> tuple[list[DomainStatus], list[Waiting]]:
    """`status`: the domains of every key the Jobs and pods of `namespace` (None: all) are exclusive on,
    with their holders from every namespace, and the waiting Jobs among `snapshot.jobs`."""
    pods = [pod for pod in snapshot.pods if namespace is None or namespace_of(pod) == namespace]
    return domain_statuses(snapshot, topology_keys(snapshot.jobs, pods)), waiting_jobs(snapshot)
