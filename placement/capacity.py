"""Whether a Job or a JobSet can ever be placed whole: enough domains, and a domain large enough.

One diagnosis, used at admission (the webhook's warnings), by `kubectl exclusive-placement status|explain`
(the reasons `too-few-domains` and `domain-too-small`) and by devstack's stall hint:

- **too few domains**: a JobSet whose exclusive Jobs on one topology key outnumber the schedulable domains
  of that key (a domain with at least one node not cordoned) can never run all of them at once: each Job
  takes a domain to itself. "5 Jobs need 5 cloud.google.com/gke-nodepool domains; 4 exist".
- **domain too small**: a Job whose pods, by their requests, do not fit in any one domain, counted as the
  scheduler's resource fit counts them: a pod fits a node when each resource it requests is within the
  node's allocatable, so a domain holds the sum over its schedulable nodes of min over the requested
  resources of floor(allocatable / request) (one `pods` slot each). Counted on empty domains, so it says
  what can never fit, not what is busy now. Taints, affinity other than the domain's own, and daemon pods
  are not counted: the scheduler's own message covers those. "8 pods x 4 nvidia.com/gpu need 32
  nvidia.com/gpu in one cloud.google.com/gke-nodepool domain; the largest has 16 (room for 4 such pods)".

Quantities are parsed as the API server writes them (`100m`, `4Gi`, `1e3`) into thousandths, so CPU's
milli-units compare exactly.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from enum import StrEnum

from placement.admission import Verdict, in_node_selector_mode
from placement.constants import JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION, TARGET_PARALLELISM_ANNOTATION
from placement.jobset import exclusive_replicated_jobs
from placement.objects import (
    Obj,
    annotations_of,
    items,
    labels_of,
    metadata,
    pod_template,
    positive_int,
    section,
    topology_key_from_annotations,
    topology_key_of_job,
)

PODS_RESOURCE = "pods"
MILLI = 1000
UNLIMITED = 10**9
"""The pods a node holds when nothing it says limits them."""
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL = {suffix: Decimal(f"1e{exponent}") for suffix, exponent in _DECIMAL_EXPONENTS.items()}
_QUANTITY = re.compile(r"^(?P<number>[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)(?P<suffix>[A-Za-z]*)$")
_BYTES = ("memory", "ephemeral-storage")


class CapacityReason(StrEnum):
    TOO_FEW_DOMAINS = "too-few-domains"
    DOMAIN_TOO_SMALL = "domain-too-small"


@dataclass(frozen=True)
class CapacityProblem:
    reason: CapacityReason
    message: str
    """Without a prefix: "5 Jobs need 5 cloud.google.com/gke-nodepool domains; 4 exist"."""
    needed: int = 0
    """Domains (too few) or pods in one domain (too small)."""
    available: int = 0
    """Schedulable domains (too few), or the pods the largest domain holds (too small)."""
    resource: str = ""
    """Too small: the resource that limits the largest domain; its request per pod, in thousandths."""
    request: int = 0
    per_node: int = 0
    """Too small: the most such pods one node of the largest domain holds."""
    domain_nodes: int = 0
    """Too small: the schedulable nodes of the largest domain."""


# --- quantities ----------------------------------------------------------------------------------------


def parse_quantity(value: object) -> int | None:
    """A resource quantity in thousandths of its unit (rounded up); None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value * MILLI
    return _parse_quantity_text(str(value).strip())


@functools.lru_cache(maxsize=1024)
def _parse_quantity_text(text: str) -> int | None:
    """Remembered: a cluster writes few distinct quantities, and each admission of a Job parses its own."""
    match = _QUANTITY.match(text)
    if match is None:
        return None
    suffix = match["suffix"]
    scale = Decimal(_BINARY[suffix]) if suffix in _BINARY else _DECIMAL.get(suffix)
    if scale is None or ("e" in match["number"].lower() and suffix):
        return None
    try:
        amount = Decimal(match["number"]) * scale * MILLI
    except InvalidOperation:
        return None
    return int(amount.to_integral_value(rounding=ROUND_CEILING))


def show_quantity(resource: str, milli: int) -> str:
    """A quantity as people write it: `4`, `500m`, `64Gi`."""
    if resource in _BYTES or resource.startswith("hugepages-"):
        whole = milli // MILLI
        for suffix, size in sorted(_BINARY.items(), key=lambda item: -item[1]):
            if whole >= size and whole % size == 0:
                return f"{whole // size}{suffix}"
        return str(whole)
    if milli % MILLI == 0:
        return str(milli // MILLI)
    return f"{milli}m"


# --- pods and nodes ------------------------------------------------------------------------------------


def _container_requests(container: Obj) -> dict[str, int]:
    """A container's requests; a limit stands in for a request it does not set (as the API server
    defaults it)."""
    resources = section(container, "resources")
    found: dict[str, int] = {}
    for source in (section(resources, "limits"), section(resources, "requests")):
        for name, value in source.items():
            parsed = parse_quantity(value)
            if parsed is not None:
                found[str(name)] = parsed
    return found


def pod_requests(pod_spec: Obj) -> dict[str, int]:
    """What the scheduler counts for one pod: the containers' requests summed, at least each init
    container's, plus the pod's overhead, and one `pods` slot."""
    total: dict[str, int] = {}
    for container in items(pod_spec, "containers"):
        if isinstance(container, dict):
            for name, value in _container_requests(container).items():
                total[name] = total.get(name, 0) + value
    for container in items(pod_spec, "initContainers"):
        if isinstance(container, dict):
            for name, value in _container_requests(container).items():
                total[name] = max(total.get(name, 0), value)
    for name, value in section(pod_spec, "overhead").items():
        parsed = parse_quantity(value)
        if parsed is not None:
            total[str(name)] = total.get(str(name), 0) + parsed
    total[PODS_RESOURCE] = MILLI
    return {name: value for name, value in total.items() if value > 0}


def pods_at_once(job: Obj) -> int:
    """The pods a Job runs at once when whole: its recorded target while it is shrunk, else
    min(parallelism, completions) (parallelism 1 when unset, as the API server defaults it)."""
    recorded = positive_int(annotations_of(job).get(TARGET_PARALLELISM_ANNOTATION))
    if recorded:
        return recorded
    spec = section(job, "spec")
    parallelism = spec.get("parallelism", 1)
    if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 0:
        parallelism = 1
    completions = positive_int(spec.get("completions"))
    return parallelism if completions is None else min(parallelism, completions)


@dataclass(frozen=True, slots=True)
class NodeRoom:
    """What of a node the diagnosis reads: its labels, whether it takes pods, its allocatable."""

    labels: Mapping[str, str]
    schedulable: bool
    allocatable: Mapping[str, int]
    """In thousandths; empty when unknown (a node cache that keeps no status)."""


def parse_allocatable(node: Obj) -> dict[str, int]:
    """`status.allocatable` in thousandths; resource names interned and zero quantities left out (15,000
    nodes share a few names)."""
    return {
        sys.intern(str(name)): parsed
        for name, value in section(section(node, "status"), "allocatable").items()
        if (parsed := parse_quantity(value))
    }


def node_room(
    node: Obj, allocatable: Mapping[str, int] | None = None, *, schedulable: bool | None = None
) -> NodeRoom:
    """`allocatable` and `schedulable`: already read (a cache that keeps no spec or status), else read from
    the node."""
    return NodeRoom(
        labels_of(node),
        not section(node, "spec").get("unschedulable") if schedulable is None else schedulable,
        parse_allocatable(node) if allocatable is None else allocatable,
    )


def node_fits(node: NodeRoom, requests: Mapping[str, int]) -> int:
    """How many such pods the empty node holds (`UNLIMITED` when no request limits it)."""
    fits: int | None = None
    for name, request in requests.items():
        if name == PODS_RESOURCE and PODS_RESOURCE not in node.allocatable:
            continue  # a node that does not say how many pods it takes is not limited by it here
        room = node.allocatable.get(name, 0) // request
        fits = room if fits is None else min(fits, room)
    return UNLIMITED if fits is None else fits


Shape = tuple[int, tuple[tuple[str, int], ...], str]
"""(pods at once, requests per pod, topology key): what decides whether a Job fits a domain."""


class NodeRooms(tuple[NodeRoom, ...]):
    """The rooms of one look at the nodes, remembering per topology key its domains and per Job shape the
    diagnosis: at 15,000 nodes one walk over them takes ~0.1 s, too long for every admission."""

    def __new__(cls, rooms: Iterable[NodeRoom] = ()) -> NodeRooms:
        made = super().__new__(cls, rooms)
        made._domains = {}
        made._too_small = {}
        made._carried = {}
        return made

    _domains: dict[str, dict[str, list[NodeRoom]]]
    _too_small: dict[Shape, CapacityProblem | None]
    _carried: dict[str, bool]


def schedulable_domains(nodes: Iterable[NodeRoom], key: str) -> dict[str, list[NodeRoom]]:
    """Domain (the value of `key`) -> its schedulable nodes; a domain of cordoned nodes only is left out."""
    if isinstance(nodes, NodeRooms):
        if key not in nodes._domains:
            nodes._domains[key] = _schedulable_domains(nodes, key)
        return nodes._domains[key]
    return _schedulable_domains(nodes, key)


def carried_by_some_node(nodes: Iterable[NodeRoom], key: str) -> bool:
    """Whether any node carries the label `key`."""
    if isinstance(nodes, NodeRooms):
        if key not in nodes._carried:
            nodes._carried[key] = any(key in node.labels for node in nodes)
        return nodes._carried[key]
    return any(key in node.labels for node in nodes)


def _schedulable_domains(nodes: Iterable[NodeRoom], key: str) -> dict[str, list[NodeRoom]]:
    found: dict[str, list[NodeRoom]] = {}
    for node in nodes:
        domain = node.labels.get(key)
        if domain and node.schedulable:
            found.setdefault(domain, []).append(node)
    return found


# --- the diagnosis -------------------------------------------------------------------------------------


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def too_few_domains(jobs: int, key: str, domains: int) -> CapacityProblem | None:
    if jobs <= domains:
        return None
    exist = "none exists" if domains == 0 else f"{domains} exist" if domains > 1 else "1 exists"
    if domains == 0:
        exist += f" (no schedulable node carries the label {key})"
    return CapacityProblem(
        CapacityReason.TOO_FEW_DOMAINS,
        f"{_count(jobs, 'Job')} {'needs' if jobs == 1 else 'need'} {jobs} {key} "
        f"{'domain' if jobs == 1 else 'domains'}; {exist}",
        needed=jobs,
        available=domains,
    )


def domain_too_small(
    pods: int, requests: Mapping[str, int], key: str, domains: Mapping[str, Sequence[NodeRoom]]
) -> CapacityProblem | None:
    """None when some domain holds `pods` such pods, or when nothing is known of the nodes' allocatable
    (no domain, or no node's allocatable: nothing to say)."""
    known = {domain: nodes for domain, nodes in domains.items() if any(node.allocatable for node in nodes)}
    if not known or pods <= 0:
        return None
    room = {domain: sum(node_fits(node, requests) for node in nodes) for domain, nodes in known.items()}
    best = max(sorted(room), key=lambda domain: room[domain])
    if room[best] >= pods:
        return None

    def held(name: str) -> int:
        return sum(node_fits(node, {name: requests[name]}) for node in known[best])

    limiting = min(sorted(requests), key=held)
    request = requests[limiting]
    has = sum(node.allocatable.get(limiting, 0) for node in known[best])
    each = "" if limiting == PODS_RESOURCE else f" x {show_quantity(limiting, request)} {limiting}"
    need = pods * request
    return CapacityProblem(
        CapacityReason.DOMAIN_TOO_SMALL,
        f"{pods} pods{each} need {show_quantity(limiting, need)} {limiting} in one {key} domain; the "
        f"largest has {show_quantity(limiting, has)} (room for {_count(room[best], 'such pod')})",
        needed=pods,
        available=room[best],
        resource=limiting,
        request=request,
        per_node=max(node_fits(node, requests) for node in known[best]),
        domain_nodes=len(known[best]),
    )


def job_capacity_problem(job: Obj, nodes: Iterable[NodeRoom]) -> CapacityProblem | None:
    """Whether an exclusive Job (its topology key set) is too large for every domain of its key."""
    key = topology_key_of_job(job)
    if key is None:
        return None
    return _too_small(pods_at_once(job), pod_requests(section(pod_template(job), "spec")), key, nodes)


def _shape(pods: int, requests: Mapping[str, int], key: str) -> Shape:
    return (pods, tuple(sorted(requests.items())), key)


def _template_shape(template: Obj, key: str) -> Shape:
    """The shape of a Job, or of a replicated Job's template."""
    return _shape(pods_at_once(template), pod_requests(section(pod_template(template), "spec")), key)


def _too_small(
    pods: int, requests: Mapping[str, int], key: str, nodes: Iterable[NodeRoom]
) -> CapacityProblem | None:
    if not isinstance(nodes, NodeRooms):
        return domain_too_small(pods, requests, key, schedulable_domains(nodes, key))
    shape = _shape(pods, requests, key)
    if shape not in nodes._too_small:
        nodes._too_small[shape] = domain_too_small(pods, requests, key, schedulable_domains(nodes, key))
    return nodes._too_small[shape]


def _replicated_key(jobset: Obj, replicated: Obj) -> str | None:
    template = section(replicated, "template")
    own = annotations_of(template) | annotations_of(pod_template(template))
    return topology_key_from_annotations(own) or (
        annotations_of(jobset).get(JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION, "").strip() or None
    )


def _replicas(replicated: Obj) -> int:
    replicas = replicated.get("replicas", 1)
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas >= 0 else 1


def jobset_capacity_problems(jobset: Obj, nodes: Sequence[NodeRoom]) -> list[CapacityProblem]:
    """At a JobSet's admission: per topology key, too few domains for its exclusive Jobs; per replicated
    Job, a domain too small for one of its Jobs."""
    jobs_by_key: dict[str, int] = {}
    problems: list[CapacityProblem] = []
    for replicated in exclusive_replicated_jobs(jobset):
        key = _replicated_key(jobset, replicated)
        if key is None:
            continue
        jobs_by_key[key] = jobs_by_key.get(key, 0) + _replicas(replicated)
        template = section(replicated, "template")
        small = _too_small(
            pods_at_once(template), pod_requests(section(pod_template(template), "spec")), key, nodes
        )
        if small is not None:
            name = replicated.get("name") or ""
            problems.append(replace(small, message=f"replicated Job {name}: {small.message}"))
    few = [
        problem
        for key, count in sorted(jobs_by_key.items())
        if carried_by_some_node(nodes, key)  # else `placement.topology` warns: no node has it
        and (problem := too_few_domains(count, key, len(schedulable_domains(nodes, key)))) is not None
    ]
    return few + problems


def sibling_problem(jobs_of_jobset: int, key: str, nodes: Iterable[NodeRoom]) -> CapacityProblem | None:
    """For one waiting Job of a JobSet whose `jobs_of_jobset` exclusive Jobs on `key` are unfinished."""
    return too_few_domains(jobs_of_jobset, key, len(schedulable_domains(nodes, key)))


# --- whether the nodes answered before ---


def job_capacity_known(job: Obj, nodes: Sequence[NodeRoom]) -> bool:
    """Whether `with_capacity_warning(verdict, job, nodes)` only looks up what this look at the nodes (a
    `NodeRooms`) answered before: then it takes microseconds at any cluster size, else up to a walk over
    every node."""
    key = topology_key_of_job(job)
    if key is None or not nodes:
        return True
    return isinstance(nodes, NodeRooms) and _template_shape(job, key) in nodes._too_small


def jobset_capacity_known(jobset: Obj, nodes: Sequence[NodeRoom]) -> bool:
    """Whether `jobset_capacity_warnings(jobset, nodes)` only looks up what this look at the nodes answered
    before (`job_capacity_known`, for every exclusive replicated Job and topology key of a JobSet)."""
    if not nodes:
        return True
    if not isinstance(nodes, NodeRooms):
        return False
    for replicated in exclusive_replicated_jobs(jobset):
        key = _replicated_key(jobset, replicated)
        if key is None:
            continue
        template = section(replicated, "template")
        if key not in nodes._carried or key not in nodes._domains:
            return False
        if _template_shape(template, key) not in nodes._too_small:
            return False
    return True


# --- at admission --------------------------------------------------------------------------------------


def with_capacity_warning(verdict: Verdict, job: Obj, nodes: Sequence[NodeRoom]) -> Verdict:
    """An allowed exclusive Job's admission, with a warning when no domain can ever hold its pods."""
    if not verdict.allowed or in_node_selector_mode(job):
        return verdict
    problem = job_capacity_problem(job, nodes)
    if problem is None:
        return verdict
    name = metadata(job).get("name") or metadata(job).get("generateName") or ""
    warning = f"exclusive placement: Job {name}: {problem.message}: it waits until a domain that large exists"
    return replace(verdict, warnings=(*verdict.warnings, warning))


def jobset_capacity_warnings(jobset: Obj, nodes: Sequence[NodeRoom]) -> list[str]:
    name = metadata(jobset).get("name") or metadata(jobset).get("generateName") or ""
    consequence = {
        CapacityReason.TOO_FEW_DOMAINS: "they can never all run at once (all-or-nothing: it never starts)",
        CapacityReason.DOMAIN_TOO_SMALL: "such a Job waits until a domain that large exists",
    }
    return [
        f"exclusive placement: JobSet {name}: {problem.message}: {consequence[problem.reason]}"
        for problem in jobset_capacity_problems(jobset, nodes)
    ]
