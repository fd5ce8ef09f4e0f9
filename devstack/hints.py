"""What to change when placement stalls, for the causes devstack recognises; an honest "don't know" else.

Each rule reads facts about the stalled Jobs (`JobFacts`) and the nodes, and names the devstack flag or the
manifest value to change. Capacity is `placement.capacity`'s diagnosis, the one the webhook warns with at
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
    domain_too_small,
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

WELL_KNOWN_KEYS = (GKE_NODEPOOL_LABEL, ZONE_LABEL, RACK_LABEL, HOSTNAME_LABEL)
_UNREACHABLE = re.compile(r'failed calling webhook "(?P<name>[^"]+)"')
_DENIED = re.compile(r'admission webhook "(?P<name>[^"]+)" denied the request')
_ANTI_AFFINITY = "anti-affinity"
"""Both of the scheduler's anti-affinity filter messages contain it (kube-scheduler's InterPodAffinity)."""
_NO_ROOM = f"Insufficient {GPU_RESOURCE}"
"""NodeResourcesFit's message: once the taken pools are full of their Jobs' pods, the scheduler reports the
missing GPUs before (or instead of) the anti-affinity."""


@dataclass(frozen=True)
class JobFacts:
    """One Job that is not running whole yet."""

    name: str
    """namespace/name."""
    topology_key: str | None
    """The node label it is exclusive on; None for Jobs that are not exclusive."""
    pods: int
    """Its full size (the target while it is admitted at size 1)."""
    requests: Mapping[str, int]
    """What the scheduler counts for one of its pods (`placement.capacity.pod_requests`)."""
    capacity: CapacityProblem | None
    """Why no domain can ever hold it (`placement.capacity`: the webhook's and the plugin's diagnosis)."""
    leader_bound: bool
    leader_reason: str | None
    """Why its leader pod waits (`diagnosis.pod_wait_reason`); None when the leader is not waiting."""
    resize_pending: bool
    gated_followers: int
    """Followers still carrying the leader-scheduled scheduling gate."""
    suspended: bool
    failure: str | None
    """Message of its latest event, if that is a warning (e.g. FailedCreate)."""


def hints_for(
    jobs: list[JobFacts],
    nodes: Sequence[Mapping[str, Any]],
    unknown_schedulers: Iterable[str],
    jobset_failures: list[str],
) -> list[str]:
    """Every hint that applies, most fundamental first; empty when devstack recognises no cause."""
    found: list[str] = []
    for rule in (
        _webhook_hints(jobs, jobset_failures),
        _capacity_hints(jobs, nodes),
        _contention_hints(jobs, nodes),
        _resizer_hints(jobs),
        _suspended_hints(jobs),
        _scheduler_name_hints(unknown_schedulers),
    ):
        found += [hint for hint in rule if hint not in found]
    return found


# --- capacity ------------------------------------------------------------------------------------------
def _noun(key: str) -> str:
    return "node pool" if key == GKE_NODEPOOL_LABEL else f"{key} domain"


def _subject(jobs: list[JobFacts], verb: str, plural_verb: str) -> str:
    """ "Job ns/a needs" or "3 Jobs (ns/a, ...) need"."""
    if len(jobs) == 1:
        return f"Job {jobs[0].name} {verb}"
    return f"{len(jobs)} Jobs ({jobs[0].name}, ...) {plural_verb}"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _does_not_fit(job: JobFacts) -> bool:
    return job.capacity is not None


def _capacity_hints(jobs: list[JobFacts], nodes: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    """The capacity diagnosis of `placement.capacity` (the one the webhook warns with and the plugin
    reports), with the devstack flags that would make room."""
    shapes: dict[tuple[str, str], list[JobFacts]] = {}
    for job in jobs:
        if job.topology_key is not None and job.capacity is not None:
            shapes.setdefault((job.topology_key, job.capacity.message), []).append(job)
    rooms = [node_room(dict(node)) for node in nodes]
    for (key, _message), members in sorted(shapes.items()):
        problem = members[0].capacity
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
def _waits_for_a_domain(leader_reason: str) -> bool:
    """The leader of a Job that fits an empty domain is kept out of every one: by the anti-affinity of the
    Jobs holding them, or by the GPUs their pods already use."""
    return _ANTI_AFFINITY in leader_reason or _NO_ROOM in leader_reason


def _contention_hints(jobs: list[JobFacts], nodes: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    waiting: dict[str, list[JobFacts]] = {}
    for job in jobs:
        if (
            job.topology_key is not None
            and not job.leader_bound
            and _waits_for_a_domain(job.leader_reason or "")
            and not _does_not_fit(job)
        ):
            waiting.setdefault(job.topology_key, []).append(job)
    rooms = [node_room(dict(node)) for node in nodes]
    for key, members in sorted(waiting.items()):
        sample = members[0]
        usable = [
            domain_nodes
            for domain, domain_nodes in schedulable_domains(rooms, key).items()
            if domain_too_small(sample.pods, sample.requests, key, {domain: domain_nodes}) is None
        ]
        everyone = len(usable) + len(members)
        few = too_few_domains(everyone, key, len(usable))
        noun = _noun(key)
        if key == GKE_NODEPOOL_LABEL:
            per_pool = max(len(g) for g in usable) if usable else 1
            to_place_all = f"--pools {everyone} --nodes {everyone * per_pool}"
        else:
            to_place_all = f"more {noun}s"
        yield (
            f"{few.message + ': ' if few else ''}"
            f"{_subject(members, 'waits', 'wait')} for a free {noun}: each Job gets a {noun} to itself, "
            f"and all {len(usable)} that can hold one are taken. Expected under contention: a waiting Job "
            "is placed when a placed Job completes or is deleted (pods run until deleted unless devstack "
            f"runs them for a set time). To place all {everyone} at once: {to_place_all}"
        )


# --- the components ------------------------------------------------------------------------------------
def _resizer_hints(jobs: list[JobFacts]) -> Iterator[str]:
    not_resized = [j for j in jobs if j.leader_bound and j.resize_pending]
    still_gated = [j for j in jobs if j.leader_bound and j.gated_followers]
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


def _suspended_hints(jobs: list[JobFacts]) -> Iterator[str]:
    suspended = [j for j in jobs if j.suspended]
    if suspended:
        yield (
            f"{_subject(suspended, 'is', 'are')} suspended (spec.suspend: true): nothing creates pods "
            "until it is set to false"
        )


def _scheduler_name_hints(unknown_schedulers: Iterable[str]) -> Iterator[str]:
    for name in sorted(set(unknown_schedulers)):
        yield f"pods ask for schedulerName {name}, which no scheduler here serves: drop spec.schedulerName"
