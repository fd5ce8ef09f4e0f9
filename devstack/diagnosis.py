"""Why placement stalls: what is waiting, grouped by reason with counts, and a hint for each known cause.

`make demo` prints it when it times out, `make run` when nothing progressed for `--stall-seconds`. Every
decision is `placement.status`'s, the model behind `kubectl exclusive-placement status|explain`: why each
Job waits (and with what capacity numbers), which domains are held, why a pod is not running. What is
devstack's own is reading the cluster (`read_cluster`), grouping and counting for the report, and the
latest warning event (`FailedCreate`, `JobCreationFailed`) of every Job still short of what it should have
and of every JobSet short of exclusive child Jobs (counted as `explain jobset` counts them). The hints
(`devstack.hints`) name devstack's flags.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devstack.hints import JobFacts, hints_for
from kubekit.client import KubeError
from kubekit.generic import GenericClient
from placement.constants import JOBSET_KIND, RESIZE_LABEL, RESIZE_PENDING
from placement.objects import metadata, topology_key_of_job
from placement.status import (
    DEFAULT_SCHEDULER,
    DomainStatus,
    Snapshot,
    WaitReason,
    domain_statuses,
    exclusive_child_jobs,
    pod_wait_reason,
    scheduler_name,
    stepped_over_jobsets,
    unplaced,
    waits_for_a_held_domain,
)

Obj = dict[str, Any]

UNKNOWN_CAUSE = (
    "devstack knows no hint for this cause; the reasons above are the cluster's own words "
    "(kubectl describe the pods; the components' logs are in the workdir's logs/)"
)
NOTHING_WAITS = (
    "no pod waits for the scheduler and no controller reported a failure: devstack cannot tell what "
    "holds the Jobs back (kubectl get jobs,pods; the components' logs are in the workdir's logs/)"
)
JOB_GROUPS: Mapping[WaitReason, str] = {
    WaitReason.SUSPENDED: "suspended (spec.suspend: true)",
    WaitReason.QUEUED_BY_KUEUE: "queued by Kueue (suspended until its Workload is admitted)",
    WaitReason.PLACED_BY_KUEUE_TAS: "placed by Kueue's Topology Aware Scheduling, blind to exclusivity",
    WaitReason.RESIZE_PENDING: f"leader bound, resize still pending ({RESIZE_LABEL}={RESIZE_PENDING})",
    WaitReason.ALL_OR_NOTHING_GANG_INCOMPLETE: (
        "leader bound, waiting for the other Jobs of its all-or-nothing JobSet to bind theirs"
    ),
}
"""The Jobs' reasons the report counts: those no pod shows (a Job without pods, or one not grown yet)."""
_WEBHOOK_FAILURE = re.compile(r'failed calling webhook "[^"]+"|admission webhook "[^"]+" denied the request')


@dataclass(frozen=True)
class Reading:
    """What the report reads: `placement.status`'s snapshot of one namespace (or all; nodes are
    cluster-wide), and the JobSets and Events only the report looks at."""

    snapshot: Snapshot
    jobsets: Sequence[Obj]
    events: Sequence[Obj]


def read_cluster(client: GenericClient, namespace: str | None) -> Reading:
    """`namespace` None: every namespace."""
    events = client.list("Event", namespace=namespace)
    snapshot = Snapshot(
        nodes=client.list("Node"),
        pods=client.list("Pod", namespace=namespace),
        jobs=client.list("Job", namespace=namespace),
        stepped_over=stepped_over_jobsets(events),
        workloads=_workloads(client, namespace),
    )
    return Reading(snapshot, client.list(JOBSET_KIND, namespace=namespace), events)


def _workloads(client: GenericClient, namespace: str | None) -> list[Obj]:
    try:
        return client.list("Workload", namespace=namespace)
    except KubeError as err:
        if not err.not_found:  # else: no Kueue in this stack
            raise
        return []


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


# --- events --------------------------------------------------------------------------------------------
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


# --- the whole picture ---------------------------------------------------------------------------------
def stalled_jobs(
    snapshot: Snapshot,
    warnings: Mapping[tuple[str, str], Mapping[str, Any]],
    domains: Sequence[DomainStatus],
) -> list[JobFacts]:
    """Every Job not placed whole yet (exclusive or not), with what the hints need to know about it;
    `warnings` is `latest_warnings` of the events, `domains` the `domain_statuses` of the Jobs' keys."""
    facts = []
    for progress in unplaced(snapshot, snapshot.jobs):
        assert progress.waiting is not None
        warning = warnings.get(("Job", progress.job))
        facts.append(
            JobFacts(
                name=f"{progress.namespace}/{progress.job}",
                topology_key=progress.topology_key or None,
                waiting=progress.waiting,
                leader_bound=progress.leader_bound,
                held_up=waits_for_a_held_domain(progress, domains),
                failure=str(warning.get("message") or "") if warning else None,
            )
        )
    return facts


def _unknown_schedulers(pods: Iterable[Obj]) -> set[str]:
    """schedulerNames of waiting pods that no scheduler here serves (devstack runs only the default)."""
    return {scheduler_name(pod) for pod in pods if pod_wait_reason(pod)} - {DEFAULT_SCHEDULER}


def _jobset_shortfalls(reading: Reading) -> dict[str, tuple[int, int]]:
    """JobSets with fewer exclusive child Jobs than they ask for, counted as `explain jobset` counts them
    (`placement.status.exclusive_child_jobs`): name -> (have, want)."""
    short: dict[str, tuple[int, int]] = {}
    for jobset in reading.jobsets:
        children = exclusive_child_jobs(jobset, reading.snapshot.jobs)
        if children.missing:
            short[str(metadata(jobset).get("name"))] = (len(children.jobs), children.wanted)
    return short


def _groups(counts: Counter[tuple[str, str]], details: Mapping[tuple[str, str], str]) -> list[ReasonGroup]:
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [
        ReasonGroup(count, unit, reason, details.get((unit, reason), "")) for (unit, reason), count in ordered
    ]


def _job_group(job: JobFacts) -> tuple[str, str] | None:
    """(the group's reason, this Job's detail) for a reason the report counts per Job."""
    reason = JOB_GROUPS.get(job.waiting.reason)
    if reason is None:
        return None
    with_message = (WaitReason.QUEUED_BY_KUEUE, WaitReason.PLACED_BY_KUEUE_TAS)
    return reason, job.waiting.message if job.waiting.reason in with_message else ""


def diagnose(reading: Reading) -> Diagnosis:
    snapshot = reading.snapshot
    warnings = latest_warnings(reading.events)
    domains = domain_statuses(snapshot, filter(None, map(topology_key_of_job, snapshot.jobs)))
    jobs = stalled_jobs(snapshot, warnings, domains)
    stalled_names = {j.name.split("/", 1)[1] for j in jobs}
    counts: Counter[tuple[str, str]] = Counter()
    details: dict[tuple[str, str], str] = {}
    for reason in filter(None, map(pod_wait_reason, snapshot.pods)):
        counts[("pod", reason)] += 1
    for job in jobs:
        group = _job_group(job)
        if group is not None:
            counts[("Job", group[0])] += 1
            details.setdefault(("Job", group[0]), group[1])
    shortfalls = _jobset_shortfalls(reading)
    jobset_failures: list[str] = []
    for (kind, name), event in sorted(warnings.items()):
        if not ((kind == "Job" and name in stalled_names) or (kind == JOBSET_KIND and name in shortfalls)):
            continue
        message = str(event.get("message") or "")
        category, detail = failure_category(message)
        key = (kind, f"{event.get('reason')}: {category}")
        counts[key] += 1
        details.setdefault(key, detail)
        if kind == JOBSET_KIND:
            jobset_failures.append(message)
    for name, (have, want) in sorted(shortfalls.items()):
        if (JOBSET_KIND, name) not in warnings:
            counts[(JOBSET_KIND, f"{have} of {want} exclusive child Jobs created, no failure reported")] += 1
    groups = tuple(_groups(counts, details))
    hints = hints_for(jobs, snapshot.nodes, domains, _unknown_schedulers(snapshot.pods), jobset_failures)
    return Diagnosis(groups, tuple(hints or [UNKNOWN_CAUSE if groups else NOTHING_WAITS]))
