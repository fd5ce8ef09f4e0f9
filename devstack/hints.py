"""What to change when placement stalls, for the causes devstack recognises; an honest "don't know" else.

Each rule reads what `placement.status` decided about the stalled Jobs (`JobFacts`: why each waits, with
the capacity numbers, and whether the domain it needs is held by another Job) and names the devstack flag or
the manifest value to change. Capacity is `placement.capacity`'s diagnosis, the one the webhook warns with at
admission and `kubectl exclusive-placement status` reports (`too-few-domains`, `domain-too-small`): a
domain holds the sum over its schedulable nodes of how many of a Job's pods each holds by their requests.
The hint adds the flags that make room (`--nodes`, `--pools`, `--gpus-per-node` when GPUs are short).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placement.capacity import (
    MILLI,
    CapacityProblem,
    CapacityReason,
    NodeRoom,
    node_room,
    schedulable_domains,
    too_few_domains,
)
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    LEADER_SCHEDULED_GATE,
    RACK_LABEL,
    RESIZE_LABEL,
    RESIZE_PENDING,
    ZONE_LABEL,
)
from placement.status import DomainStatus, Waiting, WaitReason

WELL_KNOWN_KEYS = (GKE_NODEPOOL_LABEL, ZONE_LABEL, RACK_LABEL, HOSTNAME_LABEL)
_UNREACHABLE = re.compile(r'failed calling webhook "(?P<name>[^"]+)"')
_DENIED = re.compile(r'admission webhook "(?P<name>[^"]+)" denied the request')


@dataclass(frozen=True)
class JobFacts:
    """One Job that is not placed whole yet, as `placement.status` sees it."""

    name: str
    """namespace/name."""
    topology_key: str | None
    """The node label it is exclusive on; None for Jobs that are not exclusive."""
    waiting: Waiting
    """What it waits for (`placement.status`): the reason, the message, the capacity numbers."""
    leader_bound: bool
    held_up: bool
    """It waits for a domain another Job holds (`placement.status.waits_for_a_held_domain`)."""
    failure: str | None
    """Message of its latest event, if that is a warning (e.g. FailedCreate)."""


def hints_for(
    jobs: list[JobFacts],
    nodes: Sequence[Mapping[str, Any]],
    domains: Sequence[DomainStatus],
    unknown_schedulers: Iterable[str],
    jobset_failures: list[str],
) -> list[str]:
    """Every hint that applies, most fundamental first; empty when devstack recognises no cause.
    `domains`: `placement.status.domain_statuses` of the Jobs' keys."""
    found: list[str] = []
    for rule in (
        _webhook_hints(jobs, jobset_failures),
        _capacity_hints(jobs, nodes),
        _contention_hints(jobs, domains),
        _gang_hints(jobs),
        _resizer_hints(jobs),
        _queued_hints(jobs),
        _scheduler_name_hints(unknown_schedulers),
    ):
        found += [hint for hint in rule if hint not in found]
    return found


# --- capacity ------------------------------------------------------------------------------------------
def _noun(key: str) -> str:
    return "node pool" if key == GKE_NODEPOOL_LABEL else f"{key} domain"


def _waiting_for(jobs: list[JobFacts], reason: WaitReason) -> list[JobFacts]:
    """The Jobs whose wait has this reason."""
    return [j for j in jobs if j.waiting.reason is reason]


def _subject(jobs: list[JobFacts], verb: str, plural_verb: str) -> str:
    """ "Job ns/a needs" or "3 Jobs (ns/a, ...) need"."""
    if len(jobs) == 1:
        return f"Job {jobs[0].name} {verb}"
    return f"{len(jobs)} Jobs ({jobs[0].name}, ...) {plural_verb}"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _never_fits(job: JobFacts) -> CapacityProblem | None:
    """Its capacity problem, unless that is only its JobSet outnumbering domains that exist: contention."""
    problem = job.waiting.problem
    return None if problem is None or job.held_up else problem


def _capacity_hints(jobs: list[JobFacts], nodes: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    """The capacity diagnosis of `placement.capacity` (the one the webhook warns with and the plugin
    reports), with the devstack flags that would make room."""
    shapes: dict[tuple[str, str], list[JobFacts]] = {}
    for job in jobs:
        problem = _never_fits(job)
        if job.topology_key is not None and problem is not None:
            shapes.setdefault((job.topology_key, problem.message), []).append(job)
    rooms = [node_room(dict(node)) for node in nodes]
    for (key, _message), members in sorted(shapes.items()):
        problem = _never_fits(members[0])
        assert problem is not None
        yield _capacity_hint(members, key, problem, rooms)


def _capacity_hint(jobs: list[JobFacts], key: str, problem: CapacityProblem, rooms: list[NodeRoom]) -> str:
    said = f"{_subject(jobs, 'is', 'are')} too large: {problem.message}"
    if problem.reason is CapacityReason.TOO_FEW_DOMAINS:
        carried = sorted({label for room in rooms for label in room.labels} & set(WELL_KNOWN_KEYS))
        return (
            f"{_subject(jobs, 'is', 'are')} exclusive on the node label {key}: {problem.message}: fix the "
            f"topology annotation (the nodes here carry {', '.join(carried) or 'none of the usual keys'})"
        )
    gpus = problem.resource == GPU_RESOURCE
    per_pod = problem.request // MILLI
    if problem.per_node == 0:
        more = f"--gpus-per-node {per_pod}, or " if gpus else ""
        return f"{said}: no node holds one such pod: {more}smaller requests per pod in the manifest"
    domains = schedulable_domains(rooms, key)
    pools = len(domains)
    total_nodes = sum(len(members) for members in domains.values())
    need_nodes = _ceil_div(problem.needed, problem.per_node)
    options = []
    if key == GKE_NODEPOOL_LABEL:
        options.append(f"--nodes {need_nodes * pools} (with --pools {pools}: {need_nodes} nodes per pool)")
        fewer_pools = total_nodes // need_nodes
        if fewer_pools >= 1:
            waits = len(jobs) - fewer_pools
            turns = f"; {waits} of the Jobs then wait their turn" if waits > 0 else ""
            options.append(f"--pools {fewer_pools} (with --nodes {total_nodes}{turns})")
    else:
        options.append("give the domains more nodes (--nodes)")
    if gpus:
        options.append(f"--gpus-per-node {_ceil_div(problem.needed, problem.domain_nodes) * per_pod}")
    options.append("fewer pods per Job or smaller requests per pod in the manifest")
    return f"{said}. Any one of: {'; '.join(options)}"


# --- contention ----------------------------------------------------------------------------------------
def _contention_hints(jobs: list[JobFacts], domains: Sequence[DomainStatus]) -> Iterator[str]:
    """Jobs that wait for a domain other Jobs hold (`placement.status` decides which)."""
    waiting: dict[str, list[JobFacts]] = {}
    for job in jobs:
        if job.topology_key is not None and job.held_up:
            waiting.setdefault(job.topology_key, []).append(job)
    for key, members in sorted(waiting.items()):
        usable = [d for d in domains if d.topology_key == key and d.schedulable]
        taken = sum(1 for d in usable if d.holders)
        needed = [job.waiting.problem.needed for job in members if job.waiting.problem is not None]
        everyone = max([taken + len(members), *needed])
        few = too_few_domains(everyone, key, len(usable))
        noun = _noun(key)
        if key == GKE_NODEPOOL_LABEL:
            per_pool = max((d.nodes for d in usable), default=1)
            to_place_all = f"--pools {everyone} --nodes {everyone * per_pool}"
        else:
            to_place_all = f"more {noun}s"
        held = f"all {taken}" if taken == len(usable) else f"{taken} of the {len(usable)}"
        yield (
            f"{few.message + ': ' if few else ''}"
            f"{_subject(members, 'waits', 'wait')} for a free {noun}: each Job gets a {noun} to itself, "
            f"and {held} are taken. Expected under contention: a waiting Job "
            "is placed when a placed Job completes or is deleted (pods run until deleted unless devstack "
            f"runs them for a set time). To place all {everyone} at once: {to_place_all}"
        )


# --- all-or-nothing ------------------------------------------------------------------------------------
def _gang_hints(jobs: list[JobFacts]) -> Iterator[str]:
    """Jobs whose leader is bound while the other leaders of their all-or-nothing JobSet are not: no
    component is stuck, the JobSet's other Jobs are."""
    waiting = _waiting_for(jobs, WaitReason.ALL_OR_NOTHING_GANG_INCOMPLETE)
    if waiting:
        yield (
            f"{_subject(waiting, 'waits', 'wait')}, leader bound, for the other Jobs of its all-or-nothing "
            "JobSet to bind theirs: no component is stuck, what holds those leaders is above (their pods' "
            "reasons). Unless they all bind within the resizer's --all-or-nothing-timeout-seconds (300 s by "
            "default), the resizer suspends the JobSet's Jobs with a released leader, freeing their domains, "
            "and the JobSet queues again for all of them at once"
        )


# --- the components ------------------------------------------------------------------------------------
def _resizer_hints(jobs: list[JobFacts]) -> Iterator[str]:
    not_resized = _waiting_for(jobs, WaitReason.RESIZE_PENDING)
    still_gated = _waiting_for(jobs, WaitReason.FOLLOWERS_GATED)
    for members, what in (
        (not_resized, f"not resized ({RESIZE_LABEL}={RESIZE_PENDING})"),
        (still_gated, f"followers gated ({LEADER_SCHEDULED_GATE})"),
    ):
        if members:
            yield (
                f"{_subject(members, 'has', 'have')} a bound leader but still {what}, which the resizer "
                "settles within a second of the bind. Is a resizer running and leading? "
                "(--resizer-replicas >= 1; its log is logs/resizer-N.log in the workdir, its /readyz answers "
                "leader or standby)"
            )


def _webhook_hints(jobs: list[JobFacts], jobset_failures: list[str]) -> Iterator[str]:
    # A follower denied while its leader is not bound is the gate strategy working as designed: the
    # leader's own reason is the hint then.
    failures = jobset_failures + [
        j.failure for j in jobs if j.failure and (j.leader_bound or not _DENIED.search(j.failure))
    ]
    for name in sorted({m["name"] for f in failures if (m := _UNREACHABLE.search(f))}):
        yield (
            f'the API server cannot call the admission webhook "{name}", and its failurePolicy Fail rejects '
            "what it cannot check: is the webhook process up and reachable at the URL of its webhook "
            "configuration? (its log is logs/webhook.log in the workdir)"
        )
    for name in sorted({m["name"] for f in failures if (m := _DENIED.search(f))}):
        yield (
            f'the admission webhook "{name}" rejects what the controllers create, for the reason quoted '
            "above: fix that in the manifest (strategy, topology annotation, pod template)"
        )


def _queued_hints(jobs: list[JobFacts]) -> Iterator[str]:
    suspended = _waiting_for(jobs, WaitReason.SUSPENDED)
    if suspended:
        yield (
            f"{_subject(suspended, 'is', 'are')} suspended (spec.suspend: true): nothing creates pods "
            "until it is set to false"
        )
    queued = _waiting_for(jobs, WaitReason.QUEUED_BY_KUEUE)
    if queued:
        yield (
            f"{_subject(queued, 'is', 'are')} queued by Kueue ({queued[0].waiting.message}): expected while "
            "the quota is used; a queued Job starts when an admitted one finishes (--kueue-gpu-quota sets "
            "the ClusterQueue's quota)"
        )
    placed = _waiting_for(jobs, WaitReason.PLACED_BY_KUEUE_TAS)
    if placed:
        yield (
            f"{_subject(placed, 'was', 'were')} placed by Kueue's Topology Aware Scheduling, which packs "
            "pods blind to exclusivity: give the ClusterQueue a flavor without spec.topologyName (devstack "
            "run --kueue without --kueue-tas) and re-create the JobSet"
        )


def _scheduler_name_hints(unknown_schedulers: Iterable[str]) -> Iterator[str]:
    for name in sorted(set(unknown_schedulers)):
        yield f"pods ask for schedulerName {name}, which no scheduler here serves: drop spec.schedulerName"
