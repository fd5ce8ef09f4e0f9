"""All-or-nothing placement per JobSet, as pure decisions (docs/design.md, "All-or-nothing").

The webhook gates the leader pod of every Job of an all-or-nothing JobSet (`ALL_OR_NOTHING_GATE`); a
JobSet's gated leaders form a *gang*. The resizer is the admission queue: `plan_admission` says which
gangs to release (every gated leader of the gang ungated at once), which released gangs timed out (their
Jobs suspended, so their domains go back without a failure counted), which gang holds up the queue waiting
for domains, and which waited too long and is stepped over.
`gang_complete` says when a gang's Jobs may grow (elastic) or release their followers (scheduling-gate):
once every Job of the JobSet has a bound leader (`placement.resize` decides both with the gang as input).

Everything is derived from what the API shows (which leaders are gated, which are bound, when each was
released, on which nodes), so a new resizer replica reaches the same decision as the one it replaces (but
for how long the head has waited, which each replica counts from when it first saw it wait).

Trust: a gang's size and place come from its Jobs' records (`admitted_gang`: keys only the Job webhook
writes, from the JobSet it read), and a leader is a member only when its controller ownerReference is such
a Job (`trusted_member`); a domain is held by pods carrying the job-key label (`held_nodes`).

- `gang_of(obj)`: the gang a pod or Job claims (None when it is not all-or-nothing).
- `admitted_gang(job)`, `trusted_member(pod, gang, record)`.
- `build_gang(gang_id, pods, records)`, `leader_view(pod)`, `node_view(node)`: the few fields the decisions
  read (what the resizer caches of them: `placement.cached_fields`).
- `gang_state(gang)`, `gang_complete(gang)`, `free_domains(key, nodes, held_nodes, priority)`,
  `held_nodes(pods)`.
- `plan_admission(gangs, nodes, held_nodes, now, timeout, waiting_since=..., bound=...)` →
  `AdmissionPlan`.
- `release_patch(pod, now)`: the JSON patch that ungates one leader and records when (`format_time`);
  `as_released(pod, when)`: that pod as the resizer knows it is, over an older cached copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_GATE,
    ALL_OR_NOTHING_LABEL,
    DEFAULT_PRIORITY,
    GANG_QUEUED_AT_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    JOB_KEY_LABEL,
    JOBSET_NAME_LABEL,
    JOBSET_RESTART_ATTEMPT_LABEL,
    PRIORITY_LABEL,
    RELEASED_AT_ANNOTATION,
)
from placement.counts import InvalidCount, parse_count
from placement.jobset import owning_jobset
from placement.leader import is_live
from placement.objects import (
    Obj,
    annotations_of,
    is_finished_pod,
    items,
    label,
    labels_of,
    metadata,
    namespace_of,
    node_name,
    owner_job_key,
    section,
    topology_key_of_pod,
    uid_of,
)
from placement.patch import JsonPatch, escape


@dataclass(frozen=True, order=True)
class GangId:
    """One attempt of one JobSet: a JobSet restart re-creates every Job, which then forms a new gang."""

    namespace: str
    jobset: str
    attempt: str = "0"

    def __str__(self) -> str:
        return f"{self.namespace}/{self.jobset}#{self.attempt}"


MAX_GANG_SIZE = 100_000
"""More Jobs than any cluster has domains (such a gang never fits): only bounds what is parsed."""


def gang_size(annotations: Mapping[str, str]) -> int | None:
    """The gang size the webhook wrote, when the object is all-or-nothing (else None)."""
    if annotations.get(ALL_OR_NOTHING_ANNOTATION, "").strip().lower() != "true":
        return None
    try:
        return parse_count(annotations.get(GANG_SIZE_ANNOTATION, ""), MAX_GANG_SIZE)
    except InvalidCount:
        return None


def pod_priority_value(pod: Obj) -> int:
    """`spec.priority` (`DEFAULT_PRIORITY` when unset), as the scheduler reads it."""
    priority = section(pod, "spec").get("priority")
    return priority if isinstance(priority, int) and not isinstance(priority, bool) else DEFAULT_PRIORITY


def gang_of(obj: Obj) -> GangId | None:
    """The gang an all-or-nothing pod or Job *claims*: its JobSet (by name label) and restart attempt.
    Labels and annotations a client can write: the queue trusts a leader only once `trusted_member` says
    its Job is one the webhook admitted (`admitted_gang`)."""
    jobset = label(obj, JOBSET_NAME_LABEL)
    if not jobset or gang_size(annotations_of(obj)) is None:
        return None
    return GangId(namespace_of(obj), jobset, labels_of(obj).get(JOBSET_RESTART_ATTEMPT_LABEL, "0"))


@dataclass(frozen=True)
class GangRecord:
    """What the Job webhook recorded on an all-or-nothing Job, from its JobSet: the queue reads nothing
    else of a gang's size and place."""

    gang: GangId
    job_uid: str
    size: int
    queued_at: float
    """The JobSet's creationTimestamp."""


def admitted_gang(job: Obj) -> GangRecord | None:
    """The record of a Job the webhook admitted into a gang: the all-or-nothing label and annotations
    (`placement.reserved.GANG_KEYS`: stripped from what a client sends at creation, unchangeable
    afterwards), a gang size and a queue time, and a JobSet controller (the JobSet the webhook read) that
    its JobSet name label agrees with. None for any other Job."""
    owner = owning_jobset(job)
    gang = gang_of(job)
    queued_at = parse_time(annotations_of(job).get(GANG_QUEUED_AT_ANNOTATION))
    if labels_of(job).get(ALL_OR_NOTHING_LABEL) != "true" or owner is None or gang is None:
        return None
    size = gang_size(annotations_of(job))
    if gang.jobset != owner.name or size is None or queued_at is None:
        return None
    return GangRecord(gang, uid_of(job), size, queued_at)


def controller_job_uid(pod: Obj) -> str | None:
    """The uid of the Job controlling `pod` by its ownerReference (labels do not count: anyone sets them)."""
    for ref in items(metadata(pod), "ownerReferences"):
        if isinstance(ref, dict) and ref.get("kind") == "Job" and ref.get("controller") and ref.get("uid"):
            return str(ref["uid"])
    return None


def trusted_member(pod: Obj, gang: GangId, record: GangRecord | None) -> bool:
    """`pod`, claiming to lead a Job of `gang`, is controlled by the admitted Job of `record` (the one of
    its Job's name), and that Job is in `gang`."""
    return record is not None and record.gang == gang and controller_job_uid(pod) == record.job_uid


def has_gang_gate(pod: Obj) -> bool:
    gates = items(section(pod, "spec"), "schedulingGates")
    return any(isinstance(gate, dict) and gate.get("name") == ALL_OR_NOTHING_GATE for gate in gates)


def as_released(pod: Obj, released_at: str) -> Obj:
    """`pod` as it is once the resizer ungated it at `released_at` (a copy; the pod itself is unchanged).

    A scheduling gate can only be removed, never added back, so "this uid was ungated at t" stays true:
    the resizer applies it over a cache that may still show an older version of the pod."""
    if not has_gang_gate(pod):
        return pod
    spec = section(pod, "spec")
    gates = [
        g
        for g in items(spec, "schedulingGates")
        if not (isinstance(g, dict) and g.get("name") == ALL_OR_NOTHING_GATE)
    ]
    meta = metadata(pod)
    annotations = {**annotations_of(pod), RELEASED_AT_ANNOTATION: released_at}
    return {
        **pod,
        "metadata": {**meta, "annotations": annotations},
        "spec": {**spec, "schedulingGates": gates},
    }


def format_time(seconds: float) -> str:
    """Seconds since the epoch as RFC 3339 in UTC with microseconds (metav1.MicroTime's format): the
    timeout's clock is not rounded down to the second."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str | None) -> float | None:
    """RFC 3339 (metav1.Time) as seconds since the epoch; None when absent or malformed."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


# --- what the decisions read ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaderView:
    key: str
    """`namespace/name` of the pod."""
    uid: str
    job: str
    """`namespace/name` of its Job."""
    job_uid: str
    """Its controlling Job's uid (ownerReference): what the time-out suspends."""
    gated: bool
    node: str | None
    live: bool
    succeeded: bool
    released_at: float | None
    """When the resizer removed the gate (`RELEASED_AT_ANNOTATION`); None while gated, and for a gate
    removed by someone else (no clock: the timeout is a safety net for the queue's own releases)."""


def leader_view(pod: Obj) -> LeaderView:
    meta = metadata(pod)
    gated = has_gang_gate(pod)
    released_at = None if gated else parse_time(annotations_of(pod).get(RELEASED_AT_ANNOTATION))
    return LeaderView(
        key=f"{namespace_of(pod)}/{meta.get('name') or ''}",
        uid=str(meta.get("uid") or ""),
        job=owner_job_key(pod) or "",
        job_uid=controller_job_uid(pod) or "",
        gated=gated,
        node=node_name(pod),
        live=is_live(pod),
        succeeded=section(pod, "status").get("phase") == "Succeeded",
        released_at=released_at,
    )


@dataclass(frozen=True)
class Gang:
    id: GangId
    size: int
    topology_key: str
    priority: int
    queued_at: float
    leaders: tuple[LeaderView, ...]


def build_gang(gang_id: GangId, pods: Sequence[Obj], records: Sequence[GangRecord]) -> Gang | None:
    """The gang of these leader pods (all of `gang_id`), sized and placed by its Jobs' `records` (the
    webhook's, read from its JobSet: one JobSet, so they agree); None when no leader or no record is left."""
    if not pods or not records:
        return None
    keys = [key for pod in pods if (key := topology_key_of_pod(pod))]
    return Gang(
        id=gang_id,
        size=max(record.size for record in records),
        topology_key=keys[0] if keys else "",
        priority=max(pod_priority_value(pod) for pod in pods),
        queued_at=min(record.queued_at for record in records),
        leaders=tuple(sorted((leader_view(pod) for pod in pods), key=lambda leader: leader.key)),
    )


def record_of_pods(gang_id: GangId, pods: Sequence[Obj]) -> list[GangRecord]:
    """The gang record as the leader pods' copies of it show it (from their Job's pod template): what a
    reader without the Jobs (the kubectl plugin across namespaces) has. The resizer never uses it."""
    found = []
    for pod in pods:
        size = gang_size(annotations_of(pod))
        queued = parse_time(annotations_of(pod).get(GANG_QUEUED_AT_ANNOTATION))
        if size is not None:
            when = queued if queued is not None else parse_time(str(metadata(pod).get("creationTimestamp")))
            found.append(GangRecord(gang_id, controller_job_uid(pod) or "", size, when or 0.0))
    return found


@dataclass(frozen=True)
class NodeView:
    name: str
    labels: Mapping[str, str]
    unschedulable: bool


def node_view(node: Obj) -> NodeView:
    return NodeView(
        name=str(metadata(node).get("name") or ""),
        labels=labels_of(node),
        unschedulable=bool(section(node, "spec").get("unschedulable")),
    )


# --- the gang's state --------------------------------------------------------------------------------------


class GangState(StrEnum):
    WAITING_FOR_PODS = "waiting-for-pods"
    """Gated, but not every Job of the JobSet has shown a leader yet: not in the queue."""
    QUEUED = "queued"
    """Every Job has a leader, all gated: waits for as many free domains as it has gated Jobs."""
    RELEASING = "releasing"
    """Some leaders ungated, some not bound yet (or still gated after a restart mid-release)."""
    PLACED = "placed"
    """Every live leader ungated and bound."""
    IDLE = "idle"
    """No live leader (finished or deleted)."""


def _jobs(leaders: Iterable[LeaderView]) -> set[str]:
    return {leader.job for leader in leaders}


def live_leaders(gang: Gang) -> list[LeaderView]:
    return [leader for leader in gang.leaders if leader.live]


def gang_state(gang: Gang) -> GangState:
    live = live_leaders(gang)
    if not live:
        return GangState.IDLE
    ungated = [leader for leader in live if not leader.gated]
    if not ungated:
        # Live leaders only: while a suspension (Kueue's eviction) deletes them, the Jobs whose leader is
        # already terminating need a domain again later, and releasing the rest would split the gang.
        done = _jobs(leader for leader in gang.leaders if leader.succeeded)
        whole = len(_jobs(live) | done) >= gang.size
        return GangState.QUEUED if whole else GangState.WAITING_FOR_PODS
    if any(leader.gated or leader.node is None for leader in live):
        return GangState.RELEASING
    return GangState.PLACED


def leaders_in_place(gang: Gang) -> int:
    """The Jobs of the gang whose leader counts as placed: a live, ungated, bound one, or, with no live
    one, one that succeeded."""
    live = live_leaders(gang)
    bound = _jobs(leader for leader in live if not leader.gated and leader.node is not None)
    done = _jobs(leader for leader in gang.leaders if leader.succeeded) - _jobs(live)
    return len(bound | done)


def gang_complete(gang: Gang) -> bool:
    """Every Job of the JobSet has its leader in place (`leaders_in_place`): the Jobs may grow."""
    return leaders_in_place(gang) >= gang.size


def promised(gang: Gang) -> int:
    """Domains a releasing gang still needs: its Jobs whose leader is gated or released but not bound."""
    return len(_jobs(leader for leader in live_leaders(gang) if leader.node is None))


def needed(gang: Gang) -> int:
    """Domains a queued gang needs: one per Job with a gated leader."""
    return len(_jobs(leader for leader in live_leaders(gang) if leader.gated))


def waiting_since_release(gang: Gang) -> float | None:
    """When the oldest released, still unbound leader was released: the timeout's clock."""
    times = [
        leader.released_at
        for leader in live_leaders(gang)
        if not leader.gated and leader.node is None and leader.released_at is not None
    ]
    return min(times, default=None)


# --- the admission queue --------------------------------------------------------------------------------


def queue_order(gang: Gang) -> tuple[int, float, GangId]:
    """Higher priority first, then the older JobSet, then by name: one total order on every replica."""
    return (-gang.priority, gang.queued_at, gang.id)


@dataclass(frozen=True)
class Holding:
    """What holds a node against all-or-nothing leaders: bound, unfinished pods carrying the job-key label."""

    priority: int
    """The highest `spec.priority` among them: a leader of this priority or lower cannot preempt them."""
    labelled: frozenset[str] = frozenset()
    """Their `exclusive-placement.io/priority` labels: every leader's anti-affinity keeps a leader of that
    priority out of their domain (docs/design.md, "Priorities and preemption")."""

    def blocks(self, priority: int) -> bool:
        return priority <= self.priority or str(priority) in self.labelled


def free_domains(
    topology_key: str, nodes: Iterable[NodeView], held_nodes: Mapping[str, Holding], priority: int = 0
) -> set[str]:
    """Domains of `topology_key` with a schedulable node and no node held against a leader of `priority`
    (`Holding.blocks`: exclusivity holds within a priority level, and a lower one is preempted)."""
    schedulable: set[str] = set()
    taken: set[str] = set()
    for node in nodes:
        domain = node.labels.get(topology_key)
        if domain is None:
            continue
        if node.name in held_nodes and held_nodes[node.name].blocks(priority):
            taken.add(domain)
        elif not node.unschedulable:
            schedulable.add(domain)
    return schedulable - taken


def held_nodes(pods: Iterable[Obj]) -> dict[str, Holding]:
    """The `held_nodes` of `free_domains` and `plan_admission`: the nodes of bound, unfinished pods carrying
    the `exclusive-placement.io/job-key` label (terminating ones still occupy their node). That label is
    what every leader's anti-affinity matches, so these are exactly the pods that keep a leader out,
    whoever labelled them: the exclusive pods the webhook admitted (leaders and followers: a domain whose
    leader finished while its followers run is held too), and any pod a client labelled so, which the queue
    counts as taking its domain rather than release a JobSet into a domain it cannot get. A pod claiming
    only a role holds nothing. Pods without the label are ignored."""
    held: dict[str, Holding] = {}
    for pod in pods:
        node = node_name(pod)
        labels = labels_of(pod)
        if node is None or JOB_KEY_LABEL not in labels or is_finished_pod(pod):
            continue
        before = held.get(node, Holding(DEFAULT_PRIORITY))
        label = labels.get(PRIORITY_LABEL)
        held[node] = Holding(
            max(before.priority, pod_priority_value(pod)),
            before.labelled | ({label} if label is not None else set()),
        )
    return held


def existing_domains(topology_key: str, nodes: Iterable[NodeView]) -> set[str]:
    """Every domain of `topology_key` some node is in, schedulable or not (a cordoned node may return)."""
    return {domain for node in nodes if (domain := node.labels.get(topology_key)) is not None}


@dataclass(frozen=True)
class Release:
    gang: GangId
    pods: tuple[str, ...]
    """Gated leaders to ungate (`namespace/name`)."""
    resumed: bool
    """True when finishing a release another replica (or an earlier pass) began."""


@dataclass(frozen=True)
class Timeout:
    gang: GangId
    jobs: tuple[tuple[str, str], ...]
    """Jobs with an ungated leader, to suspend: (`namespace/name`, uid)."""
    waited: float


@dataclass(frozen=True)
class Waiting:
    """A queued gang that did not fit: (it, domains it needs, domains free, since when it waits so)."""

    gang: GangId
    needs: int
    free: int
    since: float


@dataclass(frozen=True)
class AdmissionPlan:
    releases: tuple[Release, ...] = ()
    timeouts: tuple[Timeout, ...] = ()
    blocked: Waiting | None = None
    """The gang holding up the queue, waiting for domains: nothing behind it is released (strict FIFO)
    until it has waited `bound`."""
    stepped_over: tuple[Waiting, ...] = ()
    """Gangs that waited longer than `bound` without fitting: they keep their place (each is the first
    offered the domains at every pass) but no longer hold up the gangs behind them."""
    behind: tuple[Waiting, ...] = ()
    """Queued gangs behind the blocked one that do not fit either: their clocks run too, so that gangs
    which cannot be placed hold up the queue for `bound` in all, not for `bound` each in turn."""
    next_deadline: float | None = None
    """When to look again, if nothing is due now: the earliest release time-out or step-over."""
    states: Mapping[GangId, GangState] = field(default_factory=dict)
    unfit: tuple[tuple[GangId, int, int], ...] = ()
    """(gang, domains it needs, domains the cluster has) for queued gangs needing more domains of their
    topology key than exist at all: they stay queued without blocking the queue (they would block it
    forever) and are looked at again on every pass, so nodes added later let them in."""


def plan_admission(
    gangs: Iterable[Gang],
    nodes: Sequence[NodeView],
    held_nodes: Mapping[str, Holding],
    now: float,
    timeout: float,
    *,
    waiting_since: Mapping[GangId, float] | None = None,
    bound: float | None = None,
) -> AdmissionPlan:
    """Which gangs to release, which to time out, which one holds up the queue and which are stepped over.

    1. A releasing gang that has waited longer than `timeout` for its leaders to bind times out: its Jobs
       with an ungated leader are suspended (the Job controller deletes their pods without counting a
       failure, JobSet resumes them, the webhook gates the new leaders, and the gang queues again at its
       JobSet's place); its domains are no longer promised.
    2. Every other releasing gang is finished first: its gated leaders are ungated (a restart mid-release);
       its unbound Jobs count as promised domains.
    3. Queued gangs, in `queue_order`: a gang is released when the free domains of its topology key, less
       every promised domain, are at least its gated Jobs. One that does not fit holds up everything
       behind it (strict FIFO) — for `bound` seconds at most, counted from `waiting_since[gang]` (when the
       caller first saw it so; `now` for a gang it did not). Past that it is stepped over: it keeps its
       place, the gangs behind it are released as they fit, and the next one that does not fit holds up
       the rest, on its own clock — which ran while it waited behind (`behind`: every queued gang that
       does not fit is timed, wherever it stands), so k such gangs in a row hold up the queue for `bound`,
       not k times `bound`. A gang needing more domains than exist at all (`unfit`) is passed over at once:
       waiting could not help it.
    `held_nodes` are the nodes held against leaders (`held_nodes`); `bound` None: never stepped over.
    """
    since_of = waiting_since or {}
    states: dict[GangId, GangState] = {}
    releases: list[Release] = []
    timeouts: list[Timeout] = []
    queued: list[Gang] = []
    promises = 0
    deadlines: list[float] = []
    for gang in sorted(gangs, key=lambda g: g.id):
        state = states[gang.id] = gang_state(gang)
        if state is GangState.QUEUED:
            queued.append(gang)
        elif state is GangState.RELEASING:
            since = waiting_since_release(gang)
            if since is not None and now - since >= timeout:
                jobs = {(lead.job, lead.job_uid) for lead in live_leaders(gang) if not lead.gated}
                timeouts.append(Timeout(gang.id, tuple(sorted(jobs)), now - since))
                continue
            if since is not None:
                deadlines.append(since + timeout)
            promises += promised(gang)
            gated = tuple(leader.key for leader in live_leaders(gang) if leader.gated)
            if gated:
                releases.append(Release(gang.id, gated, resumed=True))
    blocked: Waiting | None = None
    stepped_over: list[Waiting] = []
    behind: list[Waiting] = []
    unfit: list[tuple[GangId, int, int]] = []
    for gang in sorted(queued, key=queue_order):
        need = needed(gang)
        existing = len(existing_domains(gang.topology_key, nodes))
        if need > existing:
            unfit.append((gang.id, need, existing))
            continue
        free = len(free_domains(gang.topology_key, nodes, held_nodes, gang.priority)) - promises
        if need > free:
            waiting = Waiting(gang.id, need, max(free, 0), since_of.get(gang.id, now))
            if blocked is not None:
                behind.append(waiting)
            elif bound is not None and now - waiting.since >= bound:
                stepped_over.append(waiting)
            else:
                blocked = waiting
                if bound is not None:
                    deadlines.append(waiting.since + bound)
            continue
        if blocked is not None:
            continue  # it fits, but waits behind the blocked gang (strict FIFO)
        promises += need
        gated = tuple(leader.key for leader in live_leaders(gang) if leader.gated)
        releases.append(Release(gang.id, gated, resumed=False))
        deadlines.append(now + timeout)
    return AdmissionPlan(
        releases=tuple(releases),
        timeouts=tuple(timeouts),
        blocked=blocked,
        stepped_over=tuple(stepped_over),
        behind=tuple(behind),
        next_deadline=min(deadlines, default=None),
        states=states,
        unfit=tuple(unfit),
    )


# --- acting on the plan: the patches ----------------------------------------------------------------------


def release_patch(pod: Obj, now: str) -> JsonPatch | None:
    """Remove the all-or-nothing gate (after `test`ing it is where it was seen) and record `now` (RFC 3339)
    in `RELEASED_AT_ANNOTATION`, in one patch: the timeout's clock survives a resizer restart. None when
    the pod is not gated."""
    gates = items(section(pod, "spec"), "schedulingGates")
    index = next(
        (
            i
            for i, gate in enumerate(gates)
            if isinstance(gate, dict) and gate.get("name") == ALL_OR_NOTHING_GATE
        ),
        None,
    )
    if index is None:
        return None
    path = f"/spec/schedulingGates/{index}"
    patch: JsonPatch = [
        {"op": "test", "path": path, "value": {"name": ALL_OR_NOTHING_GATE}},
        {"op": "remove", "path": path},
    ]
    if isinstance(metadata(pod).get("annotations"), dict):
        patch.append(
            {
                "op": "add",
                "path": f"/metadata/annotations/{escape(RELEASED_AT_ANNOTATION)}",
                "value": now,
            }
        )
    else:
        patch.append({"op": "add", "path": "/metadata/annotations", "value": {RELEASED_AT_ANNOTATION: now}})
    return patch
