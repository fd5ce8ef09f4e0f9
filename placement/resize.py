"""What the resizer decides, as pure functions over plain Kubernetes dicts (docs/design.md, "The resizer").

Three decisions, each returning what acts on it:
- `decide_resize(job, leader, gang=..., node=...)`: should a Job shrunk by the webhook (elastic strategy) be
  restored to its target size now? The answer carries a JSON patch that `test`s what the decision read
  (`resize_preconditions`) before it writes the sizes (and the original `maxFailedIndexes` when the webhook
  lowered it for size 1) and the leader's domain read from its `node`
  (`exclusive-placement.io/leader-domain`, where the pod admission policies pin the followers: no extra
  write), with the `pin-followers` label that makes the Job one of the policies' params until it finishes
  (`placement.retire.decide_retire` then takes it off).
- `decide_gate_release(follower, leader, node, rivals, gang=...)`: should a follower gated by the
  scheduling-gate strategy be pinned to its leader's domain and released? The answer carries a JSON patch
  that `test`s the gate first.
  Both take the Job's all-or-nothing gang as the caches show it (`placement.gang.build_gang` over its
  JobSet's leader pods; None when none is cached or the Job is not all-or-nothing): a Job of a gang grows,
  and releases its followers, only once every Job of the JobSet has a bound leader (`gang-incomplete`).
  `decide_recorded_release(follower, job)`: a gated follower of a resized elastic Job (gated because its
  admission did not see the resize yet) whose leader no longer decides is released into the domain the
  resize recorded on the Job.
- `decide_follower_repair(follower, leader, node, rivals, now)`: is this unbound follower pinned to
  another domain than its leader's (a leader re-created elsewhere, a pin from a stale cache)? Then it is
  marked `DisruptionTarget` (reason `ExclusivePlacementViolation`, as JobSet's pod reconciler does, so a
  podFailurePolicy can ignore the deletion) and deleted; the Job controller re-creates it and the webhook
  pins it to the leader's domain (the policies: to the domain the repair first publishes on the Job).

No I/O and no client imports: the resizer observes, these functions decide, the resizer acts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from placement.affinity import leader_domain
from placement.constants import (
    DISRUPTION_TARGET_CONDITION,
    LEADER_DOMAIN_ANNOTATION,
    LEADER_SCHEDULED_GATE,
    PIN_FOLLOWERS,
    PIN_FOLLOWERS_LABEL,
    PLACEMENT_VIOLATION_REASON,
    RESIZE_DONE,
    RESIZE_LABEL,
    RESIZE_PENDING,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_MAX_FAILED_INDEXES_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
)
from placement.counts import MAX_INDEXED_JOB_SIZE, InvalidCount, parse_count
from placement.gang import Gang, gang_complete, gang_of
from placement.leader import LeaderProblem, Placed, leader_problem
from placement.objects import (
    JobRef,
    Obj,
    annotations_of,
    is_finished_job,
    is_terminating,
    items,
    job_ref_of_pod,
    labels_of,
    metadata,
    pod_template,
    section,
    topology_key_of_job,
    topology_key_of_pod,
    uid_of,
)
from placement.patch import JsonPatch, escape


class SkipReason(StrEnum):
    """Why no action is taken. The values are metric labels and log words: keep them stable."""

    NOT_PENDING = "not-pending"
    ALREADY_DONE = "already-done"
    JOB_TERMINATING = "job-terminating"
    JOB_FINISHED = "job-finished"
    JOB_SUSPENDED = "job-suspended"
    """Suspended: the Job controller is deleting its pods, a leader the caches still show bound included,
    and a resume creates every pod again (`placement.rewind`)."""
    NOT_INDEXED = "not-indexed"
    NOT_ADMITTED = "not-admitted"
    """No topology annotation on its pod template: the Job webhook never admitted it as exclusive."""
    MISSING_TARGET = "missing-target"
    INVALID_TARGET = "invalid-target"
    WOULD_SHRINK = "would-shrink"
    NO_LEADER = "no-leader"
    NOT_A_LEADER = "not-a-leader"
    LEADER_OF_OTHER_JOB = "leader-of-other-job"
    LEADER_TERMINATING = "leader-terminating"
    LEADER_FINISHED = "leader-finished"
    LEADER_NOT_BOUND = "leader-not-bound"
    NOT_GATED = "not-gated"
    FOLLOWER_TERMINATING = "follower-terminating"
    NO_TOPOLOGY_KEY = "no-topology-key"
    NODE_UNKNOWN = "node-unknown"
    NODE_WITHOUT_DOMAIN = "node-without-domain"
    NODE_SELECTOR_CONFLICT = "node-selector-conflict"
    NOT_A_JOB_POD = "not-a-job-pod"
    LEADERS_DISAGREE = "leaders-disagree"
    FOLLOWER_GATED = "follower-gated"
    NOT_PINNED = "not-pinned"
    IN_LEADER_DOMAIN = "in-leader-domain"
    GANG_INCOMPLETE = "gang-incomplete"
    """All-or-nothing: not every Job of the JobSet has a bound leader yet."""
    NOT_RESIZED = "not-resized"
    """A gated follower's Job records no leader's domain (not resized by the resizer, or gone)."""


@dataclass(frozen=True)
class ResizeDecision:
    """`patch` is set exactly when the Job must be resized; `reason` says why not otherwise."""

    reason: SkipReason | None
    target: int | None = None
    current_completions: int | None = None
    current_parallelism: int | None = None
    patch: JsonPatch | None = field(default=None)
    detail: str = ""
    """INVALID_TARGET: which annotation, and why (for the one log line and Event that report it)."""

    @property
    def resize(self) -> bool:
        return self.patch is not None


@dataclass(frozen=True)
class GateRelease:
    """`patch` (a JSON patch) is set exactly when the follower must be released; `reason` otherwise."""

    reason: SkipReason | None
    domain: str | None = None
    patch: JsonPatch | None = None

    @property
    def release(self) -> bool:
        return self.patch is not None


@dataclass(frozen=True)
class FollowerRepair:
    """`delete` exactly when the follower must go; `status_patch` (a strategic merge patch of pods/status)
    marks it first, None when it already carries the condition. `job_patch` (a merge patch of the Job)
    publishes the leader's new domain first, for an elastic Job: the pod admission policies pin its
    followers to the Job's `leader-domain`, which would still name the leader's old domain."""

    reason: SkipReason | None
    pinned_to: str | None = None
    domain: str | None = None
    status_patch: Obj | None = None
    job_patch: Obj | None = None

    @property
    def delete(self) -> bool:
        return self.reason is None


# --- small readers over plain dicts (identity helpers live in placement.objects) -------------------------


def topology_key(obj: Obj) -> str | None:
    """The topology label key of a Job (metadata, then pod template) or of a pod."""
    return topology_key_of_job(obj) if obj.get("kind") == "Job" else topology_key_of_pod(obj)


def has_gate(pod: Obj, gate: str = LEADER_SCHEDULED_GATE) -> bool:
    return _gate_index(pod, gate) is not None


def pinned_domain(pod: Obj) -> str | None:
    """The domain a pod's nodeSelector pins it to (the value of its topology key), None when unpinned."""
    key = topology_key(pod)
    if key is None:
        return None
    value = section(section(pod, "spec"), "nodeSelector").get(key)
    return str(value) if value is not None else None


def follower_to_watch(pod: Obj) -> bool:
    """An unbound follower the resizer keeps: gated (to release) or pinned (to check against its leader)."""
    return has_gate(pod) or pinned_domain(pod) is not None


def _gate_index(pod: Obj, gate: str) -> int | None:
    gates = items(section(pod, "spec"), "schedulingGates")
    for index, entry in enumerate(gates):
        if isinstance(entry, dict) and entry.get("name") == gate:
            return index
    return None


def recorded_target(annotations: dict[str, str]) -> tuple[int, int | None]:
    """The target size (and original `maxFailedIndexes`, when it was lowered) the Job webhook recorded.

    Raises `InvalidCount`, naming the annotation, for anything the webhook would not have written
    (`placement.counts`): a non-decimal or out-of-range value, or a parallelism that differs from the
    completions (Elastic Indexed Jobs need them equal)."""

    def count(key: str, text: str, maximum: int) -> int:
        try:
            return parse_count(text, maximum)
        except InvalidCount as err:
            raise InvalidCount(f"{key}: {err}") from None

    raw_completions = annotations[TARGET_COMPLETIONS_ANNOTATION]
    target = count(TARGET_COMPLETIONS_ANNOTATION, raw_completions, MAX_INDEXED_JOB_SIZE)
    raw_parallelism = annotations.get(TARGET_PARALLELISM_ANNOTATION, raw_completions)
    if count(TARGET_PARALLELISM_ANNOTATION, raw_parallelism, MAX_INDEXED_JOB_SIZE) != target:
        raise InvalidCount(
            f"{TARGET_PARALLELISM_ANNOTATION}: {raw_parallelism} differs from the target completions "
            f"{target}; an Elastic Indexed Job needs them equal"
        )
    raw_max_failed = annotations.get(TARGET_MAX_FAILED_INDEXES_ANNOTATION)
    if raw_max_failed is None:
        return target, None
    return target, count(TARGET_MAX_FAILED_INDEXES_ANNOTATION, raw_max_failed, target)


def admitted_target(job: Obj) -> tuple[int, int | None]:
    """The target the resizer may grow the Job to: the Job's own annotations (`recorded_target`), never
    past the record the Job webhook also left on the pod template, which no client changes once the Job
    runs. A Job admitted by a webhook older than that record has none: its annotations count alone.

    Raises `InvalidCount`, naming the annotation, for a value the webhook would not have written or one
    larger than the record."""
    target, max_failed = recorded_target(annotations_of(job))
    record = annotations_of(pod_template(job))
    if TARGET_COMPLETIONS_ANNOTATION not in record:
        return target, max_failed
    try:
        recorded, _ = recorded_target(record)
    except InvalidCount as err:
        raise InvalidCount(f"the pod template's {err}") from None
    if target > recorded:
        raise InvalidCount(
            f"{TARGET_COMPLETIONS_ANNOTATION}: {target} is more than the {recorded} the Job webhook recorded "
            "(on the pod template) when it admitted the Job"
        )
    return target, max_failed


def _leaders_disagree(key: str, domain: str, rivals: Sequence[Placed]) -> bool:
    """Another live, bound leader of the Job in another (or an unknown) domain: which one leads is unclear."""
    return any((leader_domain(key, node) if node is not None else None) != domain for _rival, node in rivals)


def _skip_reason(problem: LeaderProblem | None) -> SkipReason | None:
    """The leader's problem as a skip reason (same word: one vocabulary for logs and metrics)."""
    return None if problem is None else SkipReason(problem.value)


def gang_incomplete(obj: Obj, gang: Gang | None) -> bool:
    """`obj` (a Job or a follower) belongs to an all-or-nothing JobSet and `gang`, that JobSet's leaders as
    cached, does not show a bound leader for each of its Jobs yet (or is another JobSet's)."""
    gang_id = gang_of(obj)
    if gang_id is None:
        return False
    return gang is None or gang.id != gang_id or not gang_complete(gang)


def job_ref(job: Obj) -> JobRef:
    meta = metadata(job)
    return JobRef(name=str(meta.get("name") or ""), uid=str(meta.get("uid") or ""))


# --- the decisions -------------------------------------------------------------------------------------


def decide_resize(
    job: Obj,
    leader: Obj | None,
    *,
    gang: Gang | None,
    node: Obj | None = None,
    pin_followers: bool = True,
) -> ResizeDecision:
    """Does this Job need its size restored now, and with which JSON patch?

    `gang`: the Job's all-or-nothing gang (see the module's docstring); `node`: the leader's Node (only its
    labels are read). Never shrinks, never resizes twice (the patch sets `resize: done` together with the
    sizes, after `test`s of what the decision read: `resize_preconditions`, so a concurrent change makes
    the API server refuse it, 422). The same patch records the leader's domain when its node shows one,
    and with it (`pin_followers`: the pod admission policies are in use) the `pin-followers` label that
    makes the Job a param of the follower policy until it finishes (`placement.retire`); without a domain
    the policies pin no follower and gate them, and the resizer releases them.
    """
    meta = metadata(job)
    spec = section(job, "spec")
    state = labels_of(job).get(RESIZE_LABEL)
    current_completions = spec.get("completions")
    current_parallelism = spec.get("parallelism")

    def skip(reason: SkipReason, target: int | None = None) -> ResizeDecision:
        return ResizeDecision(reason, target, current_completions, current_parallelism)

    if state == RESIZE_DONE:
        return skip(SkipReason.ALREADY_DONE)
    if state != RESIZE_PENDING:
        return skip(SkipReason.NOT_PENDING)
    if is_terminating(job):
        return skip(SkipReason.JOB_TERMINATING)
    if is_finished_job(job):
        return skip(SkipReason.JOB_FINISHED)
    if spec.get("suspend") is True:
        return skip(SkipReason.JOB_SUSPENDED)
    if spec.get("completionMode") != "Indexed":
        return skip(SkipReason.NOT_INDEXED)
    if topology_key_of_pod(pod_template(job)) is None:
        return skip(SkipReason.NOT_ADMITTED)

    if TARGET_COMPLETIONS_ANNOTATION not in annotations_of(job):
        return skip(SkipReason.MISSING_TARGET)
    try:
        target, max_failed = admitted_target(job)
    except InvalidCount as err:
        return ResizeDecision(
            SkipReason.INVALID_TARGET, None, current_completions, current_parallelism, detail=str(err)
        )
    currents = [value for value in (current_completions, current_parallelism) if isinstance(value, int)]
    if any(current > target for current in currents):
        return skip(SkipReason.WOULD_SHRINK, target)

    problem = _skip_reason(leader_problem(leader, job_ref(job)))
    if problem is not None:
        return skip(problem, target)
    if gang_incomplete(job, gang):
        return skip(SkipReason.GANG_INCOMPLETE, target)

    patch = resize_preconditions(meta)
    patch += [
        {"op": "replace", "path": RESIZE_LABEL_PATH, "value": RESIZE_DONE},
        {"op": "add", "path": "/spec/parallelism", "value": target},
        {"op": "add", "path": "/spec/completions", "value": target},
    ]
    if max_failed is not None:
        patch.append({"op": "add", "path": "/spec/maxFailedIndexes", "value": max_failed})
    key = topology_key_of_job(job)
    domain = leader_domain(key, node) if key and node is not None else None
    if domain:  # the Job has annotations: the webhook's target annotation is one
        path = f"/metadata/annotations/{escape(LEADER_DOMAIN_ANNOTATION)}"
        patch.append({"op": "add", "path": path, "value": domain})
        if pin_followers:  # the Job has labels: resize is one
            patch.append({"op": "add", "path": PIN_FOLLOWERS_LABEL_PATH, "value": PIN_FOLLOWERS})
    return ResizeDecision(None, target, current_completions, current_parallelism, patch)


RESIZE_LABEL_PATH = f"/metadata/labels/{escape(RESIZE_LABEL)}"
PIN_FOLLOWERS_LABEL_PATH = f"/metadata/labels/{escape(PIN_FOLLOWERS_LABEL)}"


def resize_preconditions(meta: Obj) -> JsonPatch:
    """`test`s of what a resize decision read: the same Job (uid), the same spec (`generation`, which every
    spec change bumps: a user's edit, a suspension), still `resize: pending`. Not the resourceVersion: the
    Job controller's status writes change it, often right when the leader binds, and a refused resize costs
    a read and a second write; no status field decides a resize. Without a generation (an object no API
    server served) the resourceVersion is tested instead."""
    tests: JsonPatch = []
    if meta.get("uid"):
        tests.append({"op": "test", "path": "/metadata/uid", "value": meta["uid"]})
    if isinstance(meta.get("generation"), int):
        tests.append({"op": "test", "path": "/metadata/generation", "value": meta["generation"]})
    elif meta.get("resourceVersion"):
        tests.append({"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]})
    tests.append({"op": "test", "path": RESIZE_LABEL_PATH, "value": RESIZE_PENDING})
    return tests


def decide_gate_release(
    follower: Obj,
    leader: Obj | None,
    node: Obj | None,
    rivals: Sequence[Placed] = (),
    *,
    gang: Gang | None,
) -> GateRelease:
    """Should this gated follower be pinned to its leader's domain and released, with which JSON patch?

    `node` is the leader's Node (only its labels are read); `rivals` are the other live, bound leaders of
    the Job (`placement.leader.rival_leaders`) with their nodes: one elsewhere holds the release; `gang`:
    the Job's all-or-nothing gang (see the module's docstring). The patch
    `test`s that the gate is still where it was seen, adds `nodeSelector[<topology key>] = <domain>`
    (creating the map when missing), and removes the gate — so a concurrent change to the gates makes the
    API server reject it instead of clobbering it.
    """
    gate_index = _gate_index(follower, LEADER_SCHEDULED_GATE)
    if gate_index is None:
        return GateRelease(SkipReason.NOT_GATED)
    if is_terminating(follower):
        return GateRelease(SkipReason.FOLLOWER_TERMINATING)
    owner = job_ref_of_pod(follower)
    if owner is None:
        return GateRelease(SkipReason.NOT_A_JOB_POD)
    problem = _skip_reason(leader_problem(leader, owner))
    if problem is not None:
        return GateRelease(problem)
    key = topology_key(follower) or (topology_key(leader) if leader else None)
    if key is None:
        return GateRelease(SkipReason.NO_TOPOLOGY_KEY)
    if node is None:
        return GateRelease(SkipReason.NODE_UNKNOWN)
    domain = leader_domain(key, node)
    if not domain:
        return GateRelease(SkipReason.NODE_WITHOUT_DOMAIN)
    if _leaders_disagree(key, domain, rivals):
        return GateRelease(SkipReason.LEADERS_DISAGREE, domain)
    if gang_incomplete(follower, gang):
        return GateRelease(SkipReason.GANG_INCOMPLETE, domain)

    return _release_into(follower, gate_index, key, domain)


RECORDED_DOMAIN_RELEASES: frozenset[SkipReason] = frozenset(
    {
        SkipReason.NO_LEADER,
        SkipReason.NOT_A_LEADER,
        SkipReason.LEADER_OF_OTHER_JOB,
        SkipReason.LEADER_FINISHED,
        SkipReason.NODE_UNKNOWN,
        SkipReason.NODE_WITHOUT_DOMAIN,
        SkipReason.GANG_INCOMPLETE,
    }
)
"""Why `decide_gate_release` may hold a follower that the domain recorded on its resized Job releases: no
live, bound leader decides any more (it finished, or the caches no longer show it or its node), or the gang
no longer looks complete (its leaders finishing). A leader not yet bound or terminating is waited for: its
bind or its successor's decides."""


def recorded_leader_domain(job: Obj | None, follower: Obj) -> str | None:
    """The leader's domain the resizer recorded on the follower's own Job (same uid) when it resized it
    (`exclusive-placement.io/leader-domain` on a Job labelled `resize: done`), None otherwise."""
    owner = job_ref_of_pod(follower)
    if job is None or owner is None or uid_of(job) != owner.uid:
        return None
    if labels_of(job).get(RESIZE_LABEL) != RESIZE_DONE:
        return None
    domain = annotations_of(job).get(LEADER_DOMAIN_ANNOTATION)
    return str(domain) if domain else None


def decide_recorded_release(follower: Obj, job: Obj | None) -> GateRelease:
    """Release a gated follower of a resized elastic Job into the domain its resize recorded.

    Such a follower was gated because its admission could not see its Job resized yet (the pod policies'
    Job informer or the webhook's leader cache behind the API server), and `decide_gate_release` holds it
    for a reason in `RECORDED_DOMAIN_RELEASES`. The recorded domain is where the pod policies pin every
    follower of the Job; a leader since re-created elsewhere is the repair's to correct, as for those.
    """
    gate_index = _gate_index(follower, LEADER_SCHEDULED_GATE)
    if gate_index is None:
        return GateRelease(SkipReason.NOT_GATED)
    if is_terminating(follower):
        return GateRelease(SkipReason.FOLLOWER_TERMINATING)
    key = topology_key(follower) or (topology_key(job) if job is not None else None)
    domain = recorded_leader_domain(job, follower)
    if key is None:
        return GateRelease(SkipReason.NO_TOPOLOGY_KEY)
    if domain is None:
        return GateRelease(SkipReason.NOT_RESIZED)
    return _release_into(follower, gate_index, key, domain)


def _release_into(follower: Obj, gate_index: int, key: str, domain: str) -> GateRelease:
    spec = section(follower, "spec")
    selector = spec.get("nodeSelector")
    gate_path = f"/spec/schedulingGates/{gate_index}"
    patch: JsonPatch = [{"op": "test", "path": gate_path, "value": {"name": LEADER_SCHEDULED_GATE}}]
    if isinstance(selector, dict) and selector:
        existing = selector.get(key)
        if existing is not None and existing != domain:
            return GateRelease(SkipReason.NODE_SELECTOR_CONFLICT, domain)
        if existing is None:
            patch.append({"op": "add", "path": f"/spec/nodeSelector/{escape(key)}", "value": domain})
    else:
        patch.append({"op": "add", "path": "/spec/nodeSelector", "value": {key: domain}})
    patch.append({"op": "remove", "path": gate_path})
    return GateRelease(None, domain, patch)


def _has_violation_condition(pod: Obj) -> bool:
    return any(
        isinstance(condition, dict)
        and condition.get("type") == DISRUPTION_TARGET_CONDITION
        and condition.get("status") == "True"
        for condition in items(section(pod, "status"), "conditions")
    )


def violation_condition(key: str, pinned_to: str, leader_name: str, domain: str, now: str) -> Obj:
    """The DisruptionTarget condition a repaired follower gets (`now`: RFC 3339, as metav1.Time)."""
    return {
        "type": DISRUPTION_TARGET_CONDITION,
        "status": "True",
        "reason": PLACEMENT_VIOLATION_REASON,
        "message": (
            f"exclusive-placement: pinned to {key}={pinned_to}, but leader pod {leader_name} runs in "
            f"{key}={domain}; deleted so that the Job controller re-creates it in the leader's domain"
        ),
        "lastTransitionTime": now,
    }


def decide_follower_repair(
    follower: Obj, leader: Obj | None, node: Obj | None, rivals: Sequence[Placed], now: str
) -> FollowerRepair:
    """Must this unbound, pinned follower be deleted because its pin disagrees with its leader's domain?

    Only a live leader of the follower's own Job (same uid), bound to a node whose domain is known and
    that no other live leader of the Job contradicts, can condemn a follower, as in JobSet's pod reconciler
    (which waits while the leader's domain is unknown). `node` is the leader's Node.
    """
    if has_gate(follower):
        return FollowerRepair(SkipReason.FOLLOWER_GATED)
    if is_terminating(follower):
        return FollowerRepair(SkipReason.FOLLOWER_TERMINATING)
    owner = job_ref_of_pod(follower)
    if owner is None:
        return FollowerRepair(SkipReason.NOT_A_JOB_POD)
    problem = _skip_reason(leader_problem(leader, owner))
    if problem is not None or leader is None:
        return FollowerRepair(problem or SkipReason.NO_LEADER)
    key = topology_key(follower)
    pinned_to = pinned_domain(follower)
    if key is None or pinned_to is None:
        return FollowerRepair(SkipReason.NOT_PINNED)
    if node is None:
        return FollowerRepair(SkipReason.NODE_UNKNOWN, str(pinned_to))
    domain = leader_domain(key, node)
    if not domain:
        return FollowerRepair(SkipReason.NODE_WITHOUT_DOMAIN, str(pinned_to))
    if _leaders_disagree(key, domain, rivals):
        return FollowerRepair(SkipReason.LEADERS_DISAGREE, str(pinned_to), domain)
    if pinned_to == domain:
        return FollowerRepair(SkipReason.IN_LEADER_DOMAIN, str(pinned_to), domain)
    status_patch = None
    if not _has_violation_condition(follower):
        leader_name = str(metadata(leader).get("name") or "")
        condition = violation_condition(key, str(pinned_to), leader_name, domain, now)
        status_patch = {"status": {"conditions": [condition]}}
    job_patch = None
    if TARGET_COMPLETIONS_ANNOTATION in annotations_of(follower):  # the record of an elastic Job's template
        job_patch = {"metadata": {"annotations": {LEADER_DOMAIN_ANNOTATION: domain}}}
    return FollowerRepair(None, str(pinned_to), domain, status_patch, job_patch)
