"""Why placement stalls: what is waiting, grouped by reason with counts, and a hint for each known cause.

`make demo` prints it when it times out, `make run` when nothing progressed for `--stall-seconds`. One
reader (`read_snapshot`) and pure functions over its plain dicts: the scheduler's `PodScheduled=False`
messages, scheduling gates, and the latest warning event (`FailedCreate`, `JobCreationFailed`) of every
Job or JobSet still short of what it should have. The hints (`devstack.hints`) name devstack's flags.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devstack.hints import JobFacts, hints_for
from devstack.report import DONE_STATES, job_status, node_label_map
from kubekit.generic import GenericClient
from kubekit.keys import object_key
from placement.capacity import (
    CapacityProblem,
    NodeRoom,
    job_capacity_problem,
    node_room,
    pod_requests,
    schedulable_domains,
    too_few_domains,
)
from placement.constants import JOBSET_NAME_LABEL, RESIZE_LABEL, RESIZE_PENDING
from placement.objects import (
    is_leader,
    owner_job_key,
    pod_template,
    section,
    target_size,
    topology_key_of_job,
)
from placement.resize import has_gate

Obj = dict[str, Any]

DEFAULT_SCHEDULER = "default-scheduler"
UNKNOWN_CAUSE = (
    "devstack knows no hint for this cause; the reasons above are the cluster's own words "
    "(kubectl describe the pods; the components' logs are in the workdir's logs/)"
)
NOTHING_WAITS = (
    "no pod waits for the scheduler and no controller reported a failure: devstack cannot tell what "
    "holds the Jobs back (kubectl get jobs,pods; the components' logs are in the workdir's logs/)"
)
_WEBHOOK_FAILURE = re.compile(r'failed calling webhook "[^"]+"|admission webhook "[^"]+" denied the request')


@dataclass(frozen=True)
class Snapshot:
    """One namespace as the diagnosis sees it (nodes are cluster-wide)."""

    nodes: list[Obj]
    jobsets: list[Obj]
    jobs: list[Obj]
    pods: list[Obj]
    events: list[Obj]


def read_snapshot(client: GenericClient, namespace: str | None) -> Snapshot:
    """`namespace` None: every namespace."""
    return Snapshot(
        nodes=client.list("Node"),
        jobsets=client.list("JobSet", namespace=namespace),
        jobs=client.list("Job", namespace=namespace),
        pods=client.list("Pod", namespace=namespace),
        events=client.list("Event", namespace=namespace),
    )


@dataclass(frozen=True)
class ReasonGroup:
    count: int
    unit: str
    """What is counted: "pod", "Job" or "JobSet"."""
    reason: str
    """Identical for every member: the grouping key."""
    detail: str = ""
    """The rest of one member's message, when `reason` is a category of messages that differ in names."""

    def render(self) -> str:
        line = f"{self.count} {self.unit if self.count == 1 else self.unit + 's'}: {self.reason}"
        if not self.detail:
            return line
        return f"{line} ({self.detail})" if self.count == 1 else f"{line} (e.g. {self.detail})"


@dataclass(frozen=True)
class Diagnosis:
    groups: tuple[ReasonGroup, ...]
    hints: tuple[str, ...]

    @property
    def recognised(self) -> bool:
        """Some hint names a cause (not only devstack's "no hint for this cause" or "nothing waits")."""
        return not set(self.hints) <= {UNKNOWN_CAUSE, NOTHING_WAITS}

    @property
    def fingerprint(self) -> tuple[object, ...]:
        """What makes two diagnoses the same picture: reasons, counts and hints, not the details."""
        return tuple((g.count, g.unit, g.reason) for g in self.groups), self.hints

    def render(self, indent: str = "  ") -> str:
        lines = [g.render() for g in self.groups] or ["nothing is pending and no failure was reported"]
        lines += [f"hint: {hint}" for hint in self.hints]
        return "\n".join(indent + line for line in lines)


# --- reading one object --------------------------------------------------------------------------------
def pod_wait_reason(pod: Mapping[str, Any]) -> str | None:
    """Why a pod is not running yet, in the cluster's own words; None if it is not waiting."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    if meta.get("deletionTimestamp") or status.get("phase", "Pending") != "Pending":
        return None
    gates = [str(g.get("name")) for g in spec.get("schedulingGates") or []]
    if gates:
        return f"SchedulingGated: waiting for the scheduling gate {', '.join(gates)} to be removed"
    if spec.get("nodeName"):
        return "bound to a node, not started yet"
    scheduler = spec.get("schedulerName") or DEFAULT_SCHEDULER
    if scheduler != DEFAULT_SCHEDULER:
        return f"schedulerName {scheduler}: no such scheduler runs here (only {DEFAULT_SCHEDULER})"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return f"{cond.get('reason') or 'Unschedulable'}: {cond.get('message') or '(no message)'}"
    return "not scheduled yet (the scheduler has not reported on it)"


def failure_category(message: str) -> tuple[str, str]:
    """(the part of a failure message every object it hits shares, the rest): a webhook's failure names
    the pod, the Job and the leader; everything else is grouped by its whole message."""
    match = _WEBHOOK_FAILURE.search(message)
    if match is None:
        return message, ""
    return match.group(0), message[match.end() :].lstrip(": ")


def _event_order(event: Mapping[str, Any]) -> str:
    return str(event.get("eventTime") or event.get("lastTimestamp") or event.get("firstTimestamp") or "")


def latest_warnings(events: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """Per involved (kind, name): its latest event, kept only if that event is a Warning.

    A later Normal event (e.g. SuccessfulCreate) means the failure before it has passed."""
    latest: dict[tuple[str, str], Mapping[str, Any]] = {}
    for event in sorted(events, key=_event_order):
        involved = event.get("involvedObject") or {}
        latest[(str(involved.get("kind")), str(involved.get("name")))] = event
    return {key: event for key, event in latest.items() if event.get("type") == "Warning"}


def capacity_problem(job: Obj, rooms: Sequence[NodeRoom]) -> CapacityProblem | None:
    """`placement.capacity`'s diagnosis of an exclusive Job: no domain holds its pods, or (for a key no
    schedulable node carries) there is no domain at all."""
    key = topology_key_of_job(job)
    if key is None:
        return None
    if not schedulable_domains(rooms, key):
        return too_few_domains(1, key, 0)
    return job_capacity_problem(job, rooms)


# --- the whole picture ---------------------------------------------------------------------------------
def stalled_jobs(snapshot: Snapshot, warnings: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[JobFacts]:
    """Every Job not yet running whole (nor complete), with what the hints need to know about it;
    `warnings` is `latest_warnings` of the snapshot's events."""
    labels = node_label_map(snapshot.nodes)
    rooms = [node_room(node) for node in snapshot.nodes]
    pods_by_job: dict[str | None, list[Obj]] = {}
    for pod in snapshot.pods:
        pods_by_job.setdefault(owner_job_key(pod), []).append(pod)
    facts: list[JobFacts] = []
    for job in snapshot.jobs:
        meta = job["metadata"]
        own = pods_by_job.get(object_key(job), [])
        status = job_status(job, own, labels)
        if status.state in DONE_STATES:
            continue
        leaders = [p for p in own if is_leader(p)]
        warning = warnings.get(("Job", meta["name"]))
        facts.append(
            JobFacts(
                name=status.job,
                topology_key=topology_key_of_job(job),
                pods=target_size(job),
                requests=pod_requests(section(pod_template(job), "spec")),
                capacity=capacity_problem(job, rooms),
                leader_bound=status.leader_bound,
                leader_reason=next((r for r in map(pod_wait_reason, leaders) if r), None),
                resize_pending=(meta.get("labels") or {}).get(RESIZE_LABEL) == RESIZE_PENDING,
                gated_followers=sum(1 for p in own if has_gate(p) and not is_leader(p)),
                suspended=bool((job.get("spec") or {}).get("suspend")),
                failure=str(warning.get("message") or "") if warning else None,
            )
        )
    return facts


def _unknown_schedulers(pods: Iterable[Mapping[str, Any]]) -> set[str]:
    """schedulerNames of waiting pods that no scheduler here serves."""
    names = {
        str((p.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER)
        for p in pods
        if pod_wait_reason(p)
    }
    return names - {DEFAULT_SCHEDULER}


def _jobset_shortfalls(snapshot: Snapshot) -> dict[str, tuple[int, int]]:
    """JobSets with fewer child Jobs than their replicatedJobs ask for: name -> (have, want)."""
    children = Counter((j["metadata"].get("labels") or {}).get(JOBSET_NAME_LABEL) for j in snapshot.jobs)
    short: dict[str, tuple[int, int]] = {}
    for jobset in snapshot.jobsets:
        name = jobset["metadata"]["name"]
        want = sum(
            int(rj.get("replicas", 1)) for rj in (jobset.get("spec") or {}).get("replicatedJobs") or []
        )
        if children[name] < want:
            short[name] = (children[name], want)
    return short


def _groups(counts: Counter[tuple[str, str]], details: Mapping[tuple[str, str], str]) -> list[ReasonGroup]:
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [
        ReasonGroup(count, unit, reason, details.get((unit, reason), "")) for (unit, reason), count in ordered
    ]


def diagnose(snapshot: Snapshot) -> Diagnosis:
    warnings = latest_warnings(snapshot.events)
    jobs = stalled_jobs(snapshot, warnings)
    stalled_names = {j.name.split("/", 1)[1] for j in jobs}
    counts: Counter[tuple[str, str]] = Counter()
    details: dict[tuple[str, str], str] = {}
    for reason in filter(None, map(pod_wait_reason, snapshot.pods)):
        counts[("pod", reason)] += 1
    for job in jobs:
        if job.suspended:
            counts[("Job", "suspended (spec.suspend: true)")] += 1
        if job.leader_bound and job.resize_pending:
            counts[("Job", f"leader bound, resize still pending ({RESIZE_LABEL}={RESIZE_PENDING})")] += 1
    shortfalls = _jobset_shortfalls(snapshot)
    jobset_failures: list[str] = []
    for (kind, name), event in sorted(warnings.items()):
        if not ((kind == "Job" and name in stalled_names) or (kind == "JobSet" and name in shortfalls)):
            continue
        message = str(event.get("message") or "")
        category, detail = failure_category(message)
        key = (kind, f"{event.get('reason')}: {category}")
        counts[key] += 1
        details.setdefault(key, detail)
        if kind == "JobSet":
            jobset_failures.append(message)
    for name, (have, want) in sorted(shortfalls.items()):
        if ("JobSet", name) not in warnings:
            counts[("JobSet", f"{have} of {want} child Jobs created, no failure reported")] += 1
    groups = tuple(_groups(counts, details))
    hints = hints_for(jobs, snapshot.nodes, _unknown_schedulers(snapshot.pods), jobset_failures)
    return Diagnosis(groups, tuple(hints or [UNKNOWN_CAUSE if groups else NOTHING_WAITS]))
