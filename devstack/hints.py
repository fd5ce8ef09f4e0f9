"""What to change when placement stalls, for the causes devstack recognises; an honest "don't know" else.

Each rule reads facts about the stalled Jobs (`JobFacts`) and the nodes, and names the devstack flag or the
manifest value to change. Capacity is counted in nvidia.com/gpu, the resource devstack's `--gpus-per-node`
sizes: a topology domain holds as many of a Job's pods as the sum over its nodes of
floor(allocatable GPUs / GPUs per pod). Jobs that request no GPUs get no capacity hint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
    gpus_per_pod: int
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
def node_gpus(node: Mapping[str, Any]) -> int:
    value = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE, 0)
    try:
        return int(str(value))
    except ValueError:
        return 0


def domains(nodes: Iterable[Mapping[str, Any]], key: str) -> dict[str, list[int]]:
    """Topology domain (the nodes' value of `key`) -> the allocatable GPUs of each of its nodes."""
    found: dict[str, list[int]] = {}
    for node in nodes:
        value = ((node.get("metadata") or {}).get("labels") or {}).get(key)
        if value is not None:
            found.setdefault(str(value), []).append(node_gpus(node))
    return found


def pods_that_fit(node_gpus_list: Iterable[int], gpus_per_pod: int) -> int:
    return sum(gpus // gpus_per_pod for gpus in node_gpus_list)


def _noun(key: str) -> str:
    return "node pool" if key == GKE_NODEPOOL_LABEL else f"{key} domain"


def _subject(jobs: list[JobFacts], verb: str, plural_verb: str) -> str:
    """ "Job ns/a needs" or "3 Jobs (ns/a, ...) need"."""
    if len(jobs) == 1:
        return f"Job {jobs[0].name} {verb}"
    return f"{len(jobs)} Jobs ({jobs[0].name}, ...) {plural_verb}"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _does_not_fit(job: JobFacts, nodes: Sequence[Mapping[str, Any]]) -> bool:
    if job.topology_key is None or job.gpus_per_pod <= 0:
        return False
    doms = domains(nodes, job.topology_key)
    return not doms or max(pods_that_fit(g, job.gpus_per_pod) for g in doms.values()) < job.pods


def _capacity_hints(jobs: list[JobFacts], nodes: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    shapes: dict[tuple[str, int, int], list[JobFacts]] = {}
    for job in jobs:
        if job.topology_key is not None and _does_not_fit(job, nodes):
            shapes.setdefault((job.topology_key, job.pods, job.gpus_per_pod), []).append(job)
    for (key, pods, gpus), members in sorted(shapes.items()):
        yield _capacity_hint(members, key, pods, gpus, nodes)


def _capacity_hint(
    jobs: list[JobFacts], key: str, pods: int, gpus: int, nodes: Sequence[Mapping[str, Any]]
) -> str:
    doms = domains(nodes, key)
    if not doms:
        labels = ", ".join((GKE_NODEPOOL_LABEL, ZONE_LABEL, RACK_LABEL, HOSTNAME_LABEL))
        return (
            f"{_subject(jobs, 'is', 'are')} exclusive on the node label {key}, which no node carries: "
            f"fix the topology annotation (kubesim's nodes carry {labels})"
        )
    most_gpus = max(g for dom in doms.values() for g in dom)
    if gpus > most_gpus:
        return (
            f"{_subject(jobs, 'asks', 'ask')} for {gpus} {GPU_RESOURCE} per pod and no node has more than "
            f"{most_gpus}: --gpus-per-node {gpus}, or fewer GPUs per pod in the manifest"
        )
    best = max(pods_that_fit(g, gpus) for g in doms.values())
    largest = max(len(g) for g in doms.values())
    need_nodes = _ceil_div(pods, most_gpus // gpus)
    more_gpus = f"--gpus-per-node {_ceil_div(pods, largest) * gpus}"
    shape = f"{_subject(jobs, 'needs', 'need')} {pods} pods x {gpus} {GPU_RESOURCE} in one {_noun(key)}"
    if key != GKE_NODEPOOL_LABEL:
        return (
            f"{shape}; the largest holds {best} such pods: give the domains more nodes (--nodes) or "
            f"{more_gpus}, or ask for fewer pods or GPUs per pod in the manifest"
        )
    pools = len(doms)
    total_nodes = sum(len(g) for g in doms.values())
    options = [f"--nodes {need_nodes * pools} (with --pools {pools}: {need_nodes} nodes per pool)"]
    fewer_pools = total_nodes // need_nodes
    if fewer_pools >= 1:
        turns = (
            f"; {len(jobs) - fewer_pools} of the Jobs then wait their turn" if fewer_pools < len(jobs) else ""
        )
        options.append(f"--pools {fewer_pools} (with --nodes {total_nodes}{turns})")
    options += [more_gpus, "fewer pods per Job or GPUs per pod in the manifest"]
    return (
        f"{shape}; the largest pool holds {best} ({largest} nodes x {most_gpus} GPUs). "
        f"Any one of: {'; '.join(options)}"
    )


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
            and not _does_not_fit(job, nodes)
        ):
            waiting.setdefault(job.topology_key, []).append(job)
    for key, members in sorted(waiting.items()):
        doms = domains(nodes, key)
        sample = members[0]
        usable = [
            g
            for g in doms.values()
            if sample.gpus_per_pod <= 0 or pods_that_fit(g, sample.gpus_per_pod) >= sample.pods
        ]
        everyone = len(usable) + len(members)
        noun = _noun(key)
        if key == GKE_NODEPOOL_LABEL:
            per_pool = max(len(g) for g in usable) if usable else 1
            to_place_all = f"--pools {everyone} --nodes {everyone * per_pool}"
        else:
            to_place_all = f"more {noun}s"
        yield (
            f"{_subject(members, 'waits', 'wait')} for a free {noun}: each Job gets a {noun} to itself, "
            f"and all {len(usable)} that can hold one are taken. Expected under contention: a waiting Job "
            "is placed when a placed Job completes or is deleted (pods run until deleted unless kubesim "
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
