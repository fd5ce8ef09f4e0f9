"""Admission decisions for Jobs and pods, as pure functions returning a `Verdict`.

Jobs: `mutate_job(job, default_strategy, owner=..., take_over_jobset=...)` shrinks an `elastic` Job to
completions = parallelism = 1 and records its target size (or falls back to `gate` with a warning saying
why, recorded in `exclusive-placement.io/elastic-fallback`; a plain Job Kueue queues always falls back:
`placement.kueue`), and takes JobSet's exclusive-topology annotation
over on the pod template. A NonIndexed Job has no leader: it is placed with `affinity` (every pod carries
the leader's terms), with a warning. A JobSet child Job needs its JobSet first (startup order,
all-or-nothing, its own strategy annotation as the default): `jobset_to_read(job, default_strategy)` says
which JobSet, if any.

Pods, in three steps so the edge can do the one I/O in between:
1. `plan_pod(pod, namespace, default_strategy)` → `PodPlan` (exclusive pod of a Job) or `Skip`.
2. the edge looks the leader up when `mutation_needs_leader(plan)` / `validation_needs_leader(pod, plan)`,
   picks it with `placement.leader.pick_leader`, and summarises with `leader_state(plan, leader, node)`.
3. `admit_pod(pod, plan, state)` → `Verdict`: the mutation (`mutate_pod`) and, on its result, the validation
   (`validate_pod`), in the one call the API server makes (`/mutate-pods`); `/validate-pods` still serves
   `validate_pod` alone.

Every mutation is made on a deep copy (`placement.patch.working_copy`: managedFields shared) and diffed
into a JSONPatch, so re-running a mutation on its own output yields an empty patch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from placement.affinity import add_leader_affinity, leader_domain, pod_priority
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_GATE,
    ALL_OR_NOTHING_LABEL,
    DEFAULT_FOLLOWER_SHARDS,
    ELASTIC_FALLBACK_ANNOTATION,
    GANG_QUEUED_AT_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    JOB_KEY_LABEL,
    JOB_NAME_LABEL,
    JOBSET_NODE_SELECTOR_ANNOTATION,
    LEADER_COMPLETION_INDEX,
    LEADER_SCHEDULED_GATE,
    PIN_SHARD_LABEL,
    PRIORITY_LABEL,
    RESIZE_LABEL,
    RESIZE_PENDING,
    ROLE_FOLLOWER,
    ROLE_LABEL,
    ROLE_LEADER,
    STRATEGY_ANNOTATION,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_MAX_FAILED_INDEXES_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    Strategy,
)
from placement.gang import gang_of
from placement.jobset import (
    JobSetRef,
    JobSetStartup,
    JobSetUnknown,
    OwnerJobSet,
    owning_jobset,
    replicated_job_of,
    take_over_exclusive_topology,
    uses_node_selector_mode,
)
from placement.kueue import DefaultQueue, kueue_elastic_problem
from placement.kueue_tas import (
    KueueQueue,
    default_queue_of,
    implied_tas_conflict,
    job_tas_conflict,
    unread_queue_warning,
)
from placement.leader import LeaderProblem, Placed, leader_problem
from placement.objects import (
    JobRef,
    Obj,
    annotation,
    annotations_of,
    completion_index_in,
    items,
    job_key,
    job_ref_of_pod,
    labels_of,
    metadata,
    namespace_of,
    node_name,
    pin_shard,
    pod_template,
    section,
    topology_key_from_annotations,
    topology_key_of_job,
)
from placement.patch import JsonPatch, diff, working_copy
from placement.reserved import (
    job_key_label_problem,
    jobset_key_problem,
    jobset_key_problem_of_job,
    strip_gang_keys,
    strip_resize_keys,
    stripped_warning,
)
from placement.strategy import (
    InvalidStrategy,
    completion_mode,
    elastic_ineligibility,
    is_indexed,
    max_failed_indexes_at_size_one,
    select_strategy,
    strategy_of_job,
    validate_strategy,
)


@dataclass(frozen=True)
class Verdict:
    """The answer to one admission request. `reason` is a stable word for logs and metrics."""

    allowed: bool
    reason: str
    patch: JsonPatch = field(default_factory=list)
    message: str = ""
    warnings: tuple[str, ...] = ()


def _allow(reason: str, warnings: tuple[str, ...] = ()) -> Verdict:
    return Verdict(allowed=True, reason=reason, warnings=warnings)


def _deny(reason: str, message: str) -> Verdict:
    return Verdict(allowed=False, reason=reason, message=message)


def _job_denial(job: Obj, reason: str, field: str, message: str) -> Verdict:
    """A Job's denial, in the form of a JobSet's: `exclusive placement: Job <name>: <field>: <why>`."""
    name = metadata(job).get("name") or metadata(job).get("generateName") or ""
    return _deny(reason, f"exclusive placement: Job {name}: {field}: {message}")


def _strategy_field(job: Obj) -> str:
    """Where the Job's strategy was read: its own annotations first, then its pod template's."""
    if annotations_of(job).get(STRATEGY_ANNOTATION, "").strip():
        return "metadata.annotations"
    return "spec.template.metadata.annotations"


def _job_key_field(job: Obj, namespace: str) -> str:
    own = jobset_key_problem(
        labels_of(job), namespace or namespace_of(job), str(metadata(job).get("name") or ""), ""
    )
    return "metadata.labels" if own is not None else "spec.template.metadata.labels"


def _ensure_map(parent: Obj, key: str) -> dict[str, str]:
    value = parent.get(key)
    if not isinstance(value, dict):
        value = {}
        parent[key] = value
    return value


# --- Jobs -------------------------------------------------------------------------------------------


def in_node_selector_mode(job: Obj) -> bool:
    """JobSet's node-selector mode, on the Job or its pod template (JobSet copies it to both): the
    annotation's presence, as `uses_node_selector_mode` reads it, without copying either map."""
    return any(
        annotation(obj, JOBSET_NODE_SELECTOR_ANNOTATION) is not None for obj in (job, pod_template(job))
    )


def _is_single_pod(spec: Obj) -> bool:
    return spec.get("completions") == 1 and spec.get("parallelism", 1) == 1


def jobset_to_read(job: Obj, default_strategy: Strategy) -> JobSetRef | None:
    """The JobSet `mutate_job` needs for an exclusive JobSet child Job: its startup order (before shrinking)
    and its all-or-nothing annotation and size (every strategy). One GET per JobSet, remembered by uid."""
    owner = owning_jobset(job)
    if owner is None or topology_key_of_job(job) is None or in_node_selector_mode(job):
        return None
    try:
        strategy_of_job(job, default_strategy)
    except InvalidStrategy:
        return None
    return owner


def mutate_job(
    job: Obj,
    default_strategy: Strategy,
    *,
    namespace: str = "",
    owner: OwnerJobSet | None = None,
    take_over_jobset: bool = False,
    all_or_nothing: bool = False,
    follower_shards: int = DEFAULT_FOLLOWER_SHARDS,
    kueue_queue: KueueQueue = None,
) -> Verdict:
    """CREATE of a Job that asks for exclusive placement or carries a resize key (others: allowed
    untouched, no patch). `kueue_queue`: the LocalQueue a plain Job names, or the namespace's default one
    for a Job that names none, as the webhook read it (`placement.kueue_tas.job_queue_to_read`): one whose
    ClusterQueue has TAS flavors only is denied, and a default one that exists (or could not be read) makes
    `elastic` fall back to `gate` as a Job that names a queue does.

    First, whatever resize and gang keys the client sent are removed, with a warning: only this webhook
    records a target or puts a Job in the all-or-nothing queue (`placement.reserved`). An exclusive Job
    whose JobSet job-key label names another Job is denied.
    `elastic`: shrink to completions = parallelism = 1 and record the target (or fall back to `gate` with a
    warning saying why), and label the Job and its pod template with its follower shard (`PIN_SHARD_LABEL`,
    one of `follower_shards`: which of the follower policy's bindings pins its followers); `owner` is what
    `jobset_to_read` asked for (a JobSet child Job without it falls back). Every strategy: the pod template
    must tell the pod webhook the same topology key and strategy the Job resolved to, so they are copied into
    it when it would resolve differently (a Job annotated only on its metadata, or a fallback to `gate`); with
    `take_over_jobset`, JobSet's exclusive-topology annotation on the template becomes ours, so JobSet's pod
    webhooks and reconciler leave the pods alone.
    JobSet's node-selector mode is left entirely to JobSet and the user's nodeSelector. A child Job of an
    all-or-nothing JobSet (its annotation, else `all_or_nothing` as the default) that the webhook could read
    gets the all-or-nothing annotations, derived from that JobSet alone, on itself and its pod template (so
    its leader pod is gated, `mutate_pod`) and the all-or-nothing label on itself (what the resizer
    selects); no other Job is ever part of a gang.
    """
    mutated = working_copy(job)
    removed = (*strip_resize_keys(mutated), *strip_gang_keys(mutated))
    warnings = (stripped_warning(removed),) if removed else ()
    topology_key = topology_key_of_job(job)
    if topology_key is None or in_node_selector_mode(job):
        reason = "not-exclusive" if topology_key is None else "jobset-node-selector"
        return Verdict(allowed=True, reason=reason, patch=diff(job, mutated), warnings=warnings)
    forged = jobset_key_problem_of_job(job, namespace)
    if forged is not None:
        return _job_denial(job, "forged-job-key", _job_key_field(job, namespace), forged)
    tas = job_tas_conflict(job)
    if tas is not None:
        return _job_denial(job, "kueue-tas-conflict", *tas)
    implied = implied_tas_conflict(kueue_queue, "Job")
    if implied is not None:
        return _job_denial(job, "kueue-tas-conflict", "metadata.labels", implied)
    unread = unread_queue_warning(kueue_queue)
    warnings = (*warnings, unread) if unread else warnings
    try:
        strategy = strategy_of_job(job, jobset_default_strategy(owner, default_strategy))
    except InvalidStrategy as err:
        return _job_denial(job, "invalid-strategy", _strategy_field(job), str(err))
    reason = f"strategy-{strategy}"
    owner = _owner_or_unknown(job, owner)
    if not is_indexed(job) and strategy is not Strategy.AFFINITY:
        reason, warnings = "non-indexed", (*warnings, non_indexed_warning(job, strategy))
        strategy = Strategy.AFFINITY
    elif strategy is Strategy.ELASTIC:
        reason, shrink_warnings, strategy = _shrink_for_elastic(
            mutated, owner, namespace, follower_shards, default_queue_of(kueue_queue)
        )
        warnings = (*warnings, *shrink_warnings)
    gang, gang_warning = gang_annotations(owner, all_or_nothing)
    if gang:
        _mark_all_or_nothing(mutated, gang)
    if gang_warning:
        warnings = (*warnings, gang_warning)
    if take_over_jobset:
        _take_over_jobset_annotation(mutated)
    _align_pod_template(mutated, topology_key, strategy, default_strategy)
    return Verdict(allowed=True, reason=reason, patch=diff(job, mutated), warnings=warnings)


def jobset_default_strategy(owner: OwnerJobSet | None, default: Strategy) -> Strategy:
    """The strategy of a child Job that names none: its JobSet's `exclusive-placement.io/strategy`, as
    all-or-nothing is read from there too, else the webhook's default. Raises `InvalidStrategy`."""
    if isinstance(owner, JobSetStartup) and owner.strategy:
        try:
            return validate_strategy(owner.strategy)
        except InvalidStrategy as err:
            raise InvalidStrategy(f"on its JobSet: {err}") from None
    return default


def non_indexed_warning(job: Obj, asked: Strategy) -> str:
    return (
        f"exclusive placement: the Job is {completion_mode(job)}, so no pod is its leader (completion index "
        f"0) for the others to follow: every pod gets the leader's affinity terms (strategy "
        f"{Strategy.AFFINITY}) instead of {asked}; set completionMode: Indexed to use {asked}"
    )


def _owner_or_unknown(job: Obj, owner: OwnerJobSet | None) -> OwnerJobSet | None:
    ref = owning_jobset(job)
    if owner is None and ref is not None:
        return JobSetUnknown(ref, "not looked up")
    return owner


def _shrink_for_elastic(
    job: Obj,
    owner: OwnerJobSet | None,
    namespace: str,
    follower_shards: int,
    default_queue: DefaultQueue | None,
) -> tuple[str, tuple[str, ...], Strategy]:
    """Shrinks `job` in place (and labels its follower shard); returns (reason, warnings, effective
    strategy)."""
    spec = section(job, "spec")
    if _is_single_pod(spec):
        return "single-pod", (), Strategy.ELASTIC
    why_not = elastic_ineligibility(job)
    if why_not is None and owner is not None:
        why_not = owner.early_readiness(replicated_job_of(job))
    reason = "elastic-ineligible"
    if why_not is None:
        why_not = kueue_elastic_problem(job, default_queue)
        reason = "queued-by-kueue"
    if why_not is not None:
        _ensure_map(job.setdefault("metadata", {}), "annotations")[ELASTIC_FALLBACK_ANNOTATION] = why_not
        warning = f"exclusive placement: strategy elastic is not possible ({why_not}); using {Strategy.GATE}"
        return reason, (warning,), Strategy.GATE
    target = int(spec["completions"])
    meta = job.setdefault("metadata", {})
    record = {TARGET_COMPLETIONS_ANNOTATION: str(target), TARGET_PARALLELISM_ANNOTATION: str(target)}
    max_failed = max_failed_indexes_at_size_one(job)
    if max_failed is not None:
        record[TARGET_MAX_FAILED_INDEXES_ANNOTATION] = str(job["spec"]["maxFailedIndexes"])
        job["spec"]["maxFailedIndexes"] = max_failed
    _ensure_map(meta, "annotations").update(record)
    _ensure_map(_template_metadata(job), "annotations").update(record)  # the record the resizer trusts
    _ensure_map(meta, "labels")[RESIZE_LABEL] = RESIZE_PENDING
    job["spec"]["completions"] = 1
    job["spec"]["parallelism"] = 1
    _label_pin_shard(job, namespace, follower_shards)
    return "shrunk", (), Strategy.ELASTIC


def _label_pin_shard(job: Obj, namespace: str, shards: int) -> None:
    """The follower shard on the Job (the follower policy's params are selected by it) and on its pod
    template (its pods are matched by it), whatever value the client sent. The name is not known yet for a
    Job created with generateName: its generateName is hashed instead (stable, the same shard for all)."""
    meta = job.setdefault("metadata", {})
    name = str(meta.get("name") or meta.get("generateName") or "")
    shard = pin_shard(namespace or namespace_of(job), name, shards)
    _ensure_map(meta, "labels")[PIN_SHARD_LABEL] = shard
    _ensure_map(_template_metadata(job), "labels")[PIN_SHARD_LABEL] = shard


def gang_annotations(owner: OwnerJobSet | None, default: bool) -> tuple[dict[str, str], str | None]:
    """The all-or-nothing annotations of a child Job of `owner` (empty: not all-or-nothing), and a warning
    when the JobSet asks for it (or it is the default) but it cannot be honoured."""
    if owner is None:
        return {}, None
    if isinstance(owner, JobSetUnknown):
        if not default:
            return {}, None
        return {}, (
            f"exclusive placement: all-or-nothing is not applied: its JobSet {owner.ref} could not be read "
            f"({owner.error})"
        )
    if not (default if owner.all_or_nothing is None else owner.all_or_nothing):
        return {}, None
    if owner.waits_for_readiness():
        return {}, (
            "exclusive placement: all-or-nothing is not applied: the JobSet creates some Jobs only once "
            "others are ready (startupPolicy InOrder or dependsOn Ready), so its Jobs cannot all hold a "
            "domain before any starts"
        )
    if not owner.created:
        return {}, "exclusive placement: all-or-nothing is not applied: its JobSet shows no creationTimestamp"
    return {
        ALL_OR_NOTHING_ANNOTATION: "true",
        GANG_SIZE_ANNOTATION: str(max(owner.exclusive_jobs, 1)),
        GANG_QUEUED_AT_ANNOTATION: owner.created,
    }, None


def _mark_all_or_nothing(job: Obj, gang: dict[str, str]) -> None:
    meta = job.setdefault("metadata", {})
    _ensure_map(meta, "annotations").update(gang)
    _ensure_map(meta, "labels")[ALL_OR_NOTHING_LABEL] = "true"
    _ensure_map(_template_metadata(job), "annotations").update(gang)


def _template_metadata(job: Obj) -> Obj:
    """The pod template's metadata, created if missing (a throwaway map when the Job has no template: the
    API server rejects such a Job anyway)."""
    template = section(job, "spec").get("template")
    if not isinstance(template, dict):
        return {}
    template_meta = template.get("metadata")
    if not isinstance(template_meta, dict):
        template_meta = template["metadata"] = {}
    return template_meta


def _take_over_jobset_annotation(job: Obj) -> None:
    template_meta = section(pod_template(job), "metadata")
    annotations = template_meta.get("annotations")
    if isinstance(annotations, dict):
        take_over_exclusive_topology(annotations)


def _align_pod_template(job: Obj, topology_key: str, strategy: Strategy, default_strategy: Strategy) -> None:
    template = section(job, "spec").get("template")
    if not isinstance(template, dict):
        return  # the API server rejects a Job without a pod template
    current = annotations_of(template)
    missing: dict[str, str] = {}
    if topology_key_from_annotations(current) != topology_key:
        missing[TOPOLOGY_ANNOTATION] = topology_key
    try:
        template_strategy: Strategy | None = select_strategy(current, default_strategy)
    except InvalidStrategy:
        template_strategy = None
    if template_strategy != strategy:
        missing[STRATEGY_ANNOTATION] = strategy.value
    if missing:
        _ensure_map(_template_metadata(job), "annotations").update(missing)


# --- Pods: scope ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodPlan:
    """An exclusive pod of a Job: everything its admission needs besides the leader. A pod of a NonIndexed
    Job (no completion index, `index` empty) is placed as under `affinity`, whatever its strategy."""

    namespace: str
    job: JobRef
    job_key: str
    topology_key: str
    strategy: Strategy
    leader: bool
    index: str
    all_or_nothing: bool = False
    """An all-or-nothing Job's pod (`placement.gang.gang_of`): its leader is gated."""

    @property
    def job_object_key(self) -> str:
        """`<namespace>/<job name>`: the Job's object key, as `owner_job_key` gives it for its pods."""
        return f"{self.namespace}/{self.job.name}"


@dataclass(frozen=True)
class Skip:
    """The pod is out of scope (or invalid): answer with `verdict`, no lookup."""

    verdict: Verdict


DEFAULT_JOB_CONTROLLER_USERNAMES: Final = frozenset(
    {"system:serviceaccount:kube-system:job-controller", "system:kube-controller-manager"}
)
"""Who kube-controller-manager's Job controller creates pods as: its own ServiceAccount when it runs with
`--use-service-account-credentials` (the default of kubeadm and of managed clusters), else the manager's."""


@dataclass(frozen=True)
class Creator:
    """Who asks for a pod to be created (the review's `userInfo.username`), and who the Job controller is."""

    username: str
    job_controllers: frozenset[str] = DEFAULT_JOB_CONTROLLER_USERNAMES

    def creates_job_pods(self) -> bool:
        return self.username in self.job_controllers


def plan_pod(
    pod: Obj, namespace: str, default_strategy: Strategy, creator: Creator | None = None
) -> PodPlan | Skip:
    """What to look up and decide for an exclusive pod; `creator` None (a review without `userInfo`, which
    kube-apiserver always sends) trusts the pod's Job claim."""
    annotations = annotations_of(pod)
    topology_key = topology_key_from_annotations(annotations)
    if topology_key is None:
        return Skip(_allow("not-exclusive"))
    if uses_node_selector_mode(annotations):
        return Skip(_allow("jobset-node-selector"))
    try:
        strategy = select_strategy(annotations, default_strategy)
    except InvalidStrategy as err:
        return Skip(_deny("invalid-strategy", str(err)))
    job = job_ref_of_pod(pod)
    pod_labels = labels_of(pod)
    index = completion_index_in(annotations, pod_labels)
    if job is None:
        return Skip(_no_job(index))
    if creator is not None and not creator.creates_job_pods():
        return Skip(_not_created_by_job_controller(job, creator))
    ns = namespace or str(metadata(pod).get("namespace") or "")
    forged = jobset_key_problem(pod_labels, ns, job.name, "the pod")
    if forged is not None:
        return Skip(_deny("forged-job-key", forged))
    return PodPlan(
        namespace=ns,
        job=job,
        job_key=job_key(ns, job.name),
        topology_key=topology_key,
        # A pod of a NonIndexed Job has no leader to follow: it carries the leader's terms itself.
        strategy=strategy if index is not None else Strategy.AFFINITY,
        leader=index == LEADER_COMPLETION_INDEX,
        index=index or "",
        all_or_nothing=gang_of(pod) is not None,
    )


def _no_job(index: str | None) -> Verdict:
    """An exclusive pod without a Job: a leader is admitted unplaced; anything else is denied, as JobSet
    denies a follower without an owner (`podsOwnedBySameJob`): there is no leader to pin it to."""
    if index == LEADER_COMPLETION_INDEX:
        return _allow(
            "no-job",
            ("exclusive placement applies to pods of Jobs; this pod has no owning Job: not placed",),
        )
    which = "without a completion index" if index is None else f"with completion index {index}"
    return _deny(
        "no-job",
        f"pod {which} asks for exclusive placement but has no owning Job (no controller ownerReference of "
        f"kind Job, no {JOB_NAME_LABEL} label): a follower is placed next to its Job's leader, so it cannot "
        "be admitted; create it through an Indexed Job, or remove the topology annotation",
    )


def _not_created_by_job_controller(job: JobRef, creator: Creator) -> Verdict:
    """A pod that claims a Job but is not the Job controller's: the Job controller orphans it (it does not
    match the Job's selector), and as an exclusive pod its job-key label would hold its domain for good."""
    return _deny(
        "not-created-by-job-controller",
        f"pod asks for exclusive placement as a pod of Job {job.name} (its controller ownerReference or "
        f"{JOB_NAME_LABEL} label), but {creator.username} is not the Job controller "
        f"({', '.join(sorted(creator.job_controllers))}): exclusive pods of a Job are created by the Job "
        "controller; create the Job, or remove the topology annotation",
    )


GATED_WHILE_UNPLACED: Final = frozenset({Strategy.SCHEDULING_GATE, Strategy.ELASTIC})
"""Strategies whose follower, when its leader is not seen bound, is created behind the leader-scheduled gate
(the resizer pins and releases it) rather than denied. An elastic follower exists only once its Job is
resized, after the leader bound: one the leader's cache does not show bound yet is a cache behind the API
server, and denying it would cost the Job controller's retry (docs/webhook.md, "The race, measured")."""


def mutation_needs_leader(plan: PodPlan) -> bool:
    return not plan.leader and plan.strategy is not Strategy.AFFINITY


def has_leader_gate(pod: Obj) -> bool:
    gates = items(section(pod, "spec"), "schedulingGates")
    return any(isinstance(g, dict) and g.get("name") == LEADER_SCHEDULED_GATE for g in gates)


def validation_needs_leader(pod: Obj, plan: PodPlan) -> bool:
    return mutation_needs_leader(plan) and not has_leader_gate(pod)


# --- Pods: the leader ---------------------------------------------------------------------------------


class LeaderStatus(StrEnum):
    BOUND = "bound"
    NOT_FOUND = "not-found"
    NOT_SCHEDULED = "not-scheduled"
    NODE_MISSING = "node-missing"
    NODE_WITHOUT_DOMAIN = "node-without-domain"
    LEADERS_DISAGREE = "leaders-disagree"


@dataclass(frozen=True)
class LeaderState:
    status: LeaderStatus
    leader_name: str = ""
    node_name: str = ""
    domain: str = ""
    other_leader: str = ""
    """LEADERS_DISAGREE: the other live, bound leader of the same Job."""
    other_domain: str = ""


def leader_state(
    plan: PodPlan, leader: Obj | None, node: Obj | None, rivals: Sequence[Placed] = ()
) -> LeaderState:
    """What a follower's admission needs to know of its leader (`placement.leader.pick_leader`'s pick).

    `rivals` are the other live, bound leaders of the same Job (`placement.leader.rival_leaders`) with
    their nodes: one in another domain, or on an unknown node, makes the leader ambiguous (as JobSet, which
    wants exactly one live leader, the follower is denied until the Job controller removes the extra one).
    """
    if leader is None or leader_problem(leader, plan.job) not in (None, LeaderProblem.LEADER_NOT_BOUND):
        return LeaderState(LeaderStatus.NOT_FOUND)
    name = str(metadata(leader).get("name") or "")
    bound_to = node_name(leader)
    if bound_to is None:
        return LeaderState(LeaderStatus.NOT_SCHEDULED, leader_name=name)
    if node is None:
        return LeaderState(LeaderStatus.NODE_MISSING, leader_name=name, node_name=bound_to)
    domain = leader_domain(plan.topology_key, node)
    if domain is None:
        return LeaderState(LeaderStatus.NODE_WITHOUT_DOMAIN, leader_name=name, node_name=bound_to)
    for rival, rival_node in rivals:
        rival_domain = leader_domain(plan.topology_key, rival_node) if rival_node is not None else None
        if rival_domain != domain:
            return LeaderState(
                LeaderStatus.LEADERS_DISAGREE,
                leader_name=name,
                node_name=bound_to,
                domain=domain,
                other_leader=str(metadata(rival).get("name") or ""),
                other_domain=rival_domain or "an unknown domain",
            )
    return LeaderState(LeaderStatus.BOUND, leader_name=name, node_name=bound_to, domain=domain)


# --- Pods: mutate and validate ----------------------------------------------------------------------------


def mutate_pod(pod: Obj, plan: PodPlan, state: LeaderState | None) -> Verdict:
    """Labels every exclusive pod (job key, role, priority); places the leader with affinity and the
    follower per strategy.

    `state` is required for followers of every strategy but `affinity` (see `mutation_needs_leader`).
    """
    return _mutation(pod, plan, state)[1]


def _mutation(pod: Obj, plan: PodPlan, state: LeaderState | None) -> tuple[Obj, Verdict]:
    """`mutate_pod`'s verdict and the pod as its patch makes it."""
    mutated = working_copy(pod)
    meta = mutated.setdefault("metadata", {})
    pod_labels = _ensure_map(meta, "labels")
    pod_labels[JOB_KEY_LABEL] = plan.job_key
    pod_labels[ROLE_LABEL] = ROLE_LEADER if plan.leader else ROLE_FOLLOWER
    priority = pod_labels[PRIORITY_LABEL] = pod_priority(pod)
    spec = mutated.setdefault("spec", {})
    warnings: tuple[str, ...] = ()

    if plan.leader or plan.strategy is Strategy.AFFINITY:
        add_leader_affinity(spec, plan.job_key, plan.topology_key, priority)
        reason = "leader" if plan.leader else "follower-affinity"
        if plan.leader and plan.all_or_nothing:
            _add_gate(spec, ALL_OR_NOTHING_GATE)
            reason = "leader-gated"
    elif state is None:
        raise ValueError(f"a follower of strategy {plan.strategy} needs the leader's state")
    elif state.status is LeaderStatus.BOUND:
        selector = _ensure_map(spec, "nodeSelector")
        current = selector.get(plan.topology_key)
        if current is not None and current != state.domain:
            warnings = (
                f"nodeSelector {plan.topology_key}={current} replaced by the leader's domain {state.domain}",
            )
        selector[plan.topology_key] = state.domain
        reason = "follower-pinned"
    elif plan.strategy in GATED_WHILE_UNPLACED:
        _add_gate(spec, LEADER_SCHEDULED_GATE)
        reason = "follower-gated"
    else:
        # gate with the leader not placed: validation rejects it with the precise reason.
        reason = f"follower-unplaced-{state.status}"
    return mutated, Verdict(allowed=True, reason=reason, patch=diff(pod, mutated), warnings=warnings)


def _add_gate(spec: Obj, name: str) -> None:
    gates = spec.get("schedulingGates")
    if not isinstance(gates, list):
        gates = spec["schedulingGates"] = []
    if not any(isinstance(gate, dict) and gate.get("name") == name for gate in gates):
        gates.append({"name": name})


def _pod_label(plan: PodPlan) -> str:
    return f"follower pod (completion index {plan.index}) of Job {plan.namespace}/{plan.job.name}"


def denial_message(plan: PodPlan, state: LeaderState) -> str:
    who = _pod_label(plan)
    retry = "expected and transient: the Job controller retries the pod"
    if state.status is LeaderStatus.NOT_FOUND:
        return f"{who}: the leader pod (completion index 0) does not exist yet ({retry})"
    if state.status is LeaderStatus.NOT_SCHEDULED:
        return f"{who}: leader pod {state.leader_name} is not yet scheduled to a node ({retry})"
    if state.status is LeaderStatus.NODE_MISSING:
        return (
            f"{who}: leader pod {state.leader_name} is bound to node {state.node_name}, which no longer "
            "exists; delete the leader pod so the Job controller recreates it"
        )
    if state.status is LeaderStatus.LEADERS_DISAGREE:
        return (
            f"{who}: two live leader pods of this Job are bound in different domains, {state.leader_name} "
            f"in {plan.topology_key}={state.domain} and {state.other_leader} in {state.other_domain}; "
            f"expected one leader ({retry})"
        )
    return (
        f"{who}: leader pod {state.leader_name} runs on node {state.node_name}, which has no "
        f"{plan.topology_key} label; label the node or fix the topology annotation"
    )


def validate_pod(pod: Obj, plan: PodPlan, state: LeaderState | None) -> Verdict:
    """CREATE of a pod, after mutation: its job key is its Job's; followers must be pinned to their bound
    leader's domain."""
    relabelled = job_key_label_problem(labels_of(pod), plan.namespace, plan.job.name)
    if relabelled is not None:
        return _deny("forged-job-key", relabelled)
    if plan.leader:
        return _allow("leader")
    if plan.strategy is Strategy.AFFINITY:
        return _allow("follower-affinity")
    if has_leader_gate(pod):
        return _allow("follower-gated")
    if state is None:
        raise ValueError("validating a follower needs the leader's state")
    if state.status is not LeaderStatus.BOUND:
        return _deny(f"leader-{state.status}", denial_message(plan, state))
    selector = section(section(pod, "spec"), "nodeSelector")
    value = selector.get(plan.topology_key)
    if value != state.domain:
        shown = f"is {value!r}" if value is not None else "is not set"
        return _deny(
            "wrong-domain",
            f"{_pod_label(plan)}: nodeSelector[{plan.topology_key}] {shown}, but leader pod "
            f"{state.leader_name} runs in {plan.topology_key}={state.domain} (node {state.node_name}); "
            "the mutating webhook sets it: check that it is configured for this namespace",
        )
    return _allow("follower-pinned")


def admit_pod(pod: Obj, plan: PodPlan, state: LeaderState | None) -> Verdict:
    """CREATE of an exclusive pod in one call: `mutate_pod`, then `validate_pod` of the pod as mutated (the
    mutating webhook denies a follower it cannot place, so no validating webhook is called). What a later
    mutating webhook would change is not seen: JobSet's, the only one registered after it, adds its
    priority label and nothing this project wrote (docs/webhook.md, "One call per pod")."""
    mutated, mutation = _mutation(pod, plan, state)
    # The mutated copy is what the patch makes of the pod (`placement.patch.diff`): no need to apply it.
    checked = validate_pod(mutated, plan, state)
    if not checked.allowed:
        return checked
    return mutation
