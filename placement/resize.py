"""What the resizer decides, as pure functions over plain Kubernetes dicts (docs/design.md, "The resizer").

Two decisions, each returning the one patch that acts on it:
- `decide_resize(job, leader)`: should a Job shrunk by the webhook (elastic strategy) be restored to its
  target size now? The answer carries a merge patch with the Job's resourceVersion as precondition.
- `decide_gate_release(follower, leader, node)`: should a follower gated by the scheduling-gate strategy be
  pinned to its leader's domain and released? The answer carries a JSON patch that `test`s the gate first.

No I/O and no client imports: the resizer observes, these functions decide, the resizer acts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from placement.affinity import leader_domain
from placement.constants import (
    LEADER_SCHEDULED_GATE,
    RESIZE_DONE,
    RESIZE_LABEL,
    RESIZE_PENDING,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
)
from placement.leader import LeaderProblem, leader_problem
from placement.objects import (
    JobRef,
    Obj,
    annotations_of,
    is_terminating,
    job_ref_of_pod,
    labels_of,
    metadata,
    section,
    topology_key_of_job,
    topology_key_of_pod,
)
from placement.patch import JsonPatch

FINISHED_CONDITIONS = frozenset({"Complete", "Failed", "SuccessCriteriaMet", "FailureTarget"})


class SkipReason(StrEnum):
    """Why no action is taken. The values are metric labels and log words: keep them stable."""

    NOT_PENDING = "not-pending"
    ALREADY_DONE = "already-done"
    JOB_TERMINATING = "job-terminating"
    JOB_FINISHED = "job-finished"
    NOT_INDEXED = "not-indexed"
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


@dataclass(frozen=True)
class ResizeDecision:
    """`patch` is set exactly when the Job must be resized; `reason` says why not otherwise."""

    reason: SkipReason | None
    target: int | None = None
    current_completions: int | None = None
    current_parallelism: int | None = None
    patch: Obj | None = field(default=None)

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


# --- small readers over plain dicts (identity helpers live in placement.objects) -------------------------


def topology_key(obj: Obj) -> str | None:
    """The topology label key of a Job (metadata, then pod template) or of a pod."""
    return topology_key_of_job(obj) if obj.get("kind") == "Job" else topology_key_of_pod(obj)


def has_gate(pod: Obj, gate: str = LEADER_SCHEDULED_GATE) -> bool:
    return _gate_index(pod, gate) is not None


def _gate_index(pod: Obj, gate: str) -> int | None:
    gates = section(pod, "spec").get("schedulingGates") or []
    for index, entry in enumerate(gates):
        if isinstance(entry, dict) and entry.get("name") == gate:
            return index
    return None


def escape_json_pointer(token: str) -> str:
    """RFC 6901: `~` → `~0`, `/` → `~1` (in that order)."""
    return token.replace("~", "~0").replace("/", "~1")


def _job_finished(job: Obj) -> bool:
    for condition in section(job, "status").get("conditions") or []:
        if (
            isinstance(condition, dict)
            and condition.get("type") in FINISHED_CONDITIONS
            and condition.get("status") == "True"
        ):
            return True
    return False


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        parsed = int(value.strip())
        return parsed if parsed > 0 else None
    return None


def _skip_reason(problem: LeaderProblem | None) -> SkipReason | None:
    """The leader's problem as a skip reason (same word: one vocabulary for logs and metrics)."""
    return None if problem is None else SkipReason(problem.value)


def job_ref(job: Obj) -> JobRef:
    meta = metadata(job)
    return JobRef(name=str(meta.get("name") or ""), uid=str(meta.get("uid") or ""))


# --- the decisions -------------------------------------------------------------------------------------


def decide_resize(job: Obj, leader: Obj | None) -> ResizeDecision:
    """Does this Job need its size restored now, and with which merge patch?

    Never shrinks, never resizes twice (the patch sets `resize: done` together with the sizes, and carries
    the resourceVersion the decision was made on, so a concurrent change makes the API server answer 409).
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
    if _job_finished(job):
        return skip(SkipReason.JOB_FINISHED)
    if spec.get("completionMode") != "Indexed":
        return skip(SkipReason.NOT_INDEXED)

    annotations = annotations_of(job)
    raw_completions = annotations.get(TARGET_COMPLETIONS_ANNOTATION)
    raw_parallelism = annotations.get(TARGET_PARALLELISM_ANNOTATION, raw_completions)
    if raw_completions is None:
        return skip(SkipReason.MISSING_TARGET)
    target = _positive_int(raw_completions)
    if target is None or _positive_int(raw_parallelism) != target:
        # Elastic Indexed Jobs need completions == parallelism after the change.
        return skip(SkipReason.INVALID_TARGET)
    currents = [value for value in (current_completions, current_parallelism) if isinstance(value, int)]
    if any(current > target for current in currents):
        return skip(SkipReason.WOULD_SHRINK, target)

    problem = _skip_reason(leader_problem(leader, job_ref(job)))
    if problem is not None:
        return skip(problem, target)

    patch: Obj = {
        "metadata": {"labels": {RESIZE_LABEL: RESIZE_DONE}},
        "spec": {"parallelism": target, "completions": target},
    }
    if meta.get("resourceVersion"):
        patch["metadata"]["resourceVersion"] = meta["resourceVersion"]
    return ResizeDecision(None, target, current_completions, current_parallelism, patch)


def decide_gate_release(follower: Obj, leader: Obj | None, node: Obj | None) -> GateRelease:
    """Should this gated follower be pinned to its leader's domain and released, with which JSON patch?

    `node` is the leader's Node (only its labels are read). The patch `test`s that the gate is still where
    it was seen, adds `nodeSelector[<topology key>] = <domain>` (creating the map when missing), and removes
    the gate — so a concurrent change to the gates makes the API server reject it instead of clobbering it.
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

    spec = section(follower, "spec")
    selector = spec.get("nodeSelector")
    gate_path = f"/spec/schedulingGates/{gate_index}"
    patch: JsonPatch = [{"op": "test", "path": gate_path, "value": {"name": LEADER_SCHEDULED_GATE}}]
    if isinstance(selector, dict) and selector:
        existing = selector.get(key)
        if existing is not None and existing != domain:
            return GateRelease(SkipReason.NODE_SELECTOR_CONFLICT, domain)
        if existing is None:
            patch.append(
                {"op": "add", "path": f"/spec/nodeSelector/{escape_json_pointer(key)}", "value": domain}
            )
    else:
        patch.append({"op": "add", "path": "/spec/nodeSelector", "value": {key: domain}})
    patch.append({"op": "remove", "path": gate_path})
    return GateRelease(None, domain, patch)
