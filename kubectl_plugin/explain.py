"""What `explain` prints: one Job, JobSet or pod on its way to being placed, what it waits for next, and
what would unblock it, in one screen. Pure: objects in (as `cluster` read them), text out; the decisions
are `placement.status`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    DOMAIN,
    JOB_KEY_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_NAME_LABEL,
    STRATEGY_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from placement.gang import gang_of
from placement.jobset import jobset_startup, parse_bool
from placement.objects import (
    Obj,
    annotations_of,
    completion_index,
    is_finished_job,
    labels_of,
    metadata,
    namespace_of,
    node_name,
    owner_job_key,
    section,
    topology_key_of_job,
    topology_key_of_pod,
)
from placement.resize import pinned_domain
from placement.status import (
    ALL_OR_NOTHING_WAITS,
    DomainStatus,
    JobProgress,
    Snapshot,
    WaitReason,
    domain_statuses,
    exclusive_child_jobs,
    is_exclusive_job,
    job_progress,
    resolved_strategy,
    scheduler_verdict,
    waits_for_a_domain,
    waits_for_a_held_domain,
)

EVENTS_SHOWN = 5
LABEL_WIDTH = 17


def _name(obj: Obj) -> str:
    return f"{namespace_of(obj)}/{metadata(obj).get('name') or ''}"


def _field(label: str, value: str) -> str:
    return f"{label + ':':<{LABEL_WIDTH}}{value}"


def _domain_summary(key: str, domains: Sequence[DomainStatus]) -> str:
    if not domains:
        return f"{key} (no node carries this label: no domain exists)"
    held = sum(1 for d in domains if d.holders)
    free = sum(1 for d in domains if d.free)
    cordoned = sum(1 for d in domains if not d.schedulable)
    return f"{key} ({len(domains)} domains: {held} held, {free} free, {cordoned} unschedulable)"


# --- a Job ---------------------------------------------------------------------------------------------


def explain_job(snapshot: Snapshot, job: Obj, events: Iterable[Obj], job_pods: Sequence[Obj] = ()) -> str:
    """`job_pods`: every pod of the Job, so that those the webhook never admitted can be named."""
    title = f"Job {_name(job)}" + (f" (JobSet {js})" if (js := labels_of(job).get(JOBSET_NAME_LABEL)) else "")
    if not is_exclusive_job(job):
        return (
            f"{title} does not ask for exclusive placement: neither {TOPOLOGY_ANNOTATION} nor "
            f"{JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION} is on the Job or its pod template (or it is in JobSet's "
            "node-selector mode)."
        )
    progress = job_progress(snapshot, job)
    domains = domain_statuses(snapshot, [progress.topology_key])
    lines = [title, _field("Exclusive on", _domain_summary(progress.topology_key, domains))]
    unplaced = [pod for pod in job_pods if JOB_KEY_LABEL not in labels_of(pod) and topology_key_of_pod(pod)]
    if unplaced:
        example = metadata(unplaced[0]).get("name")
        lines.append(
            _field(
                "Not placed",
                f"{len(unplaced)} pods without the {JOB_KEY_LABEL} label (e.g. {example}): the webhook did "
                "not admit them; is it configured for this namespace?",
            )
        )
    lines.append("Progress:")
    width = max(len(step.name) for step in progress.steps)
    lines += [
        f"  [{'x' if step.done else ' '}] {step.name:<{width}}   {step.detail}".rstrip()
        for step in progress.steps
    ]
    if is_finished_job(job):
        lines.append(_field("Finished", "the Job has a terminal condition; nothing waits"))
    elif progress.waiting is None:
        where = f"{progress.topology_key}={progress.domain}" if progress.domain else progress.topology_key
        lines.append(_field("Placed", f"every pod is bound in {where}"))
    else:
        lines.append(_field("Waiting for", progress.waiting.reason.value))
        lines.append(f"  {progress.waiting.message}")
        lines.append("What would unblock it:")
        lines += [f"  - {hint}" for hint in unblock_hints(progress, domains)]
    pods = {str(metadata(pod).get("name") or "") for pod in snapshot.pods_of(job)}
    involved = {("Job", str(metadata(job).get("name") or ""))} | {("Pod", pod) for pod in pods}
    lines += _events(events, involved)
    return "\n".join(lines)


def _holders_text(domains: Sequence[DomainStatus]) -> str:
    held = [
        f"{d.domain} by {', '.join(f'{h.namespace}/{h.job}' for h in d.holders)}"
        for d in domains
        if d.holders
    ]
    return "; ".join(held) or "none"


def unblock_hints(progress: JobProgress, domains: Sequence[DomainStatus]) -> list[str]:
    """What would let a waiting Job go on, for its reason and the state of its topology key's domains."""
    assert progress.waiting is not None
    reason = progress.waiting.reason
    key = progress.topology_key
    free = [d.domain for d in domains if d.free]
    if waits_for_a_domain(progress):
        return _domain_hints(progress, domains, free)
    hints = {
        WaitReason.QUEUED_BY_KUEUE: [
            "quota in the LocalQueue's ClusterQueue: the workloads admitted before it finishing or deleted, "
            "or more nominalQuota (kubectl get workloads,clusterqueues; kubectl describe workload); this "
            "project places it once Kueue admits it",
        ],
        WaitReason.PLACED_BY_KUEUE_TAS: [
            "its Workload's topology assignment, which no room elsewhere changes: give the ClusterQueue (or "
            "a ClusterQueue for exclusive workloads) a flavor without spec.topologyName, then delete and "
            "re-create the workload (kubectl get workload -o yaml shows status.admission's "
            'topologyAssignment; docs/kueue.md, "Topology Aware Scheduling")',
        ],
        WaitReason.SUSPENDED: [
            f"resume it: kubectl patch job {progress.job} -n {progress.namespace} --type merge "
            '-p \'{"spec":{"suspend":false}}\''
        ],
        WaitReason.LEADER_NOT_CREATED: [
            "the Job controller creates the leader pod; a FailedCreate event (below) says what refuses it, "
            "e.g. a quota or an admission webhook"
        ],
        WaitReason.LEADER_GATED: ["removing that scheduling gate, which this project does not own"],
        WaitReason.ALL_OR_NOTHING_GANG_INCOMPLETE: _gang_incomplete_hints(progress),
        WaitReason.RESIZE_PENDING: _resizer_hints(),
        WaitReason.FOLLOWERS_GATED: _resizer_hints(),
        WaitReason.FOLLOWERS_UNSCHEDULABLE: [
            f"room in {key}={progress.domain}, where the followers are pinned next to their leader: other "
            "pods there finishing, or more capacity on that domain's nodes"
        ],
        WaitReason.FOLLOWERS_PENDING: ["nothing: the scheduler has not looked at them yet"],
        WaitReason.PODS_UNSCHEDULABLE: [
            f"room in {key}={progress.domain}, where its first pods were bound and the others follow them: "
            "other pods there finishing, or more capacity on that domain's nodes"
        ],
        WaitReason.PODS_PENDING: ["nothing: the scheduler has not looked at them yet"],
        WaitReason.FOLLOWERS_NOT_CREATED: [
            "the Job controller creates them, with backoff after rejected creations; FailedCreate events "
            "(below) say what refuses them"
        ],
        WaitReason.TOO_FEW_DOMAINS: [
            f"more schedulable {key} domains: nodes labelled {key} with a value no node has yet, or "
            "uncordoning a domain",
            "fewer exclusive Jobs in its JobSet (the replicated Jobs' replicas); a sibling that completes "
            "frees its domain only if the others do not wait for the missing one",
        ],
        WaitReason.DOMAIN_TOO_SMALL: [
            f"a larger {key} domain: more nodes in one, or nodes with more of the resource named above",
            "fewer pods per Job (completions and parallelism), or smaller requests per pod",
        ],
        WaitReason.ELASTIC_FALLBACK: [
            "the Job controller creates the followers one retry at a time; to avoid the rejections, make "
            f"elastic possible for the Job (the reason above), or set {STRATEGY_ANNOTATION}: scheduling-gate"
        ],
    }
    return hints[reason]


def _domain_hints(progress: JobProgress, domains: Sequence[DomainStatus], free: list[str]) -> list[str]:
    key = progress.topology_key
    if not domains:
        return [f"nodes labelled {key}, or a topology annotation naming a label the nodes carry"]
    if not waits_for_a_held_domain(progress, domains):
        return [
            f"free {key} domains exist ({', '.join(free)}), so the scheduler's reason above is not "
            "exclusivity: compare the pod's requests, tolerations and node selector with those domains' nodes"
        ]
    hints = [
        f"a {key} domain freeing up: held are {_holders_text(domains)}; one frees when its Job completes or "
        "is deleted",
        f"more domains: nodes labelled {key} with a value no node has yet",
    ]
    cordoned = [d.domain for d in domains if not d.schedulable]
    if cordoned:
        hints.append(f"uncordoning {', '.join(cordoned)} (kubectl uncordon)")
    if progress.waiting is not None and progress.waiting.reason in ALL_OR_NOTHING_WAITS:
        hints.append(
            f'fewer Jobs in the JobSet, or {ALL_OR_NOTHING_ANNOTATION}: "false" on a new JobSet to take '
            "domains as they free up (and risk holding some while waiting for the rest)"
        )
    return hints


def _gang_incomplete_hints(progress: JobProgress) -> list[str]:
    return [
        f"the other Jobs of JobSet {progress.namespace}/{progress.jobset} getting their leaders bound: "
        f"kubectl exclusive-placement explain jobset/{progress.jobset} -n {progress.namespace} shows what "
        "each of them waits for",
        "else the resizer's all-or-nothing time-out (--all-or-nothing-timeout-seconds, 300 s by default): it "
        "suspends the JobSet's Jobs with a released leader, freeing their domains, and the JobSet queues "
        "again for all of them at once",
    ]


def _resizer_hints() -> list[str]:
    return [
        "the resizer, which acts within a second: check that one replica runs and holds its Lease "
        "(kubectl get pods,leases -n <the release namespace>; its log says what it decided)"
    ]


def _event_time(event: Obj) -> str:
    return str(event.get("eventTime") or event.get("lastTimestamp") or event.get("firstTimestamp") or "")


def _worth_showing(event: Obj) -> bool:
    """Warnings, and what this project's components report (routine Normal events would crowd them out)."""
    source = str(event.get("reportingController") or section(event, "source").get("component") or "")
    return event.get("type") == "Warning" or source.startswith(DOMAIN)


def _events(events: Iterable[Obj], involved: set[tuple[str, str]]) -> list[str]:
    mine = [
        event
        for event in events
        if _worth_showing(event)
        and (
            str(section(event, "involvedObject").get("kind")),
            str(section(event, "involvedObject").get("name")),
        )
        in involved
    ]
    if not mine:
        return []
    lines = [f"Events, warnings and this project's (last {min(EVENTS_SHOWN, len(mine))} of {len(mine)}):"]
    for event in sorted(mine, key=_event_time)[-EVENTS_SHOWN:]:
        target = section(event, "involvedObject")
        count = event.get("count") or section(event, "series").get("count") or 1
        repeated = f" (x{count})" if isinstance(count, int) and count > 1 else ""
        lines.append(
            f"  {event.get('type') or 'Normal'} {event.get('reason') or ''} "
            f"{str(target.get('kind')).lower()}/{target.get('name')}{repeated}: {event.get('message') or ''}"
        )
    return lines


# --- a JobSet ---------------------------------------------------------------------------------------------


def explain_jobset(snapshot: Snapshot, jobset: Obj, events: Iterable[Obj]) -> str:
    """`snapshot.jobs` are the JobSet's child Jobs."""
    name = str(metadata(jobset).get("name") or "")
    lines = [f"JobSet {_name(jobset)}"]
    children = exclusive_child_jobs(jobset, snapshot.jobs)
    if children.wanted == 0:
        lines.append(
            "  asks for no exclusive placement (no topology annotation on it or its replicated Jobs)"
        )
        return "\n".join(lines)
    exclusive = list(children.jobs)
    keys = sorted({key for job in exclusive if (key := topology_key_of_job(job))})
    lines.append(
        _field(
            "Exclusive Jobs",
            f"{len(exclusive)} of {children.wanted} created" + (f", on {', '.join(keys)}" if keys else ""),
        )
    )
    lines.append(_field("All-or-nothing", _all_or_nothing(jobset, exclusive)))
    strategy = _strategy(jobset, exclusive)
    if strategy:
        lines.append(_field("Strategy", strategy))
    rows = [("JOB", "STATE", "DOMAIN")]
    first_waiting: JobProgress | None = None
    for job in sorted(exclusive, key=lambda j: str(metadata(j).get("name"))):
        progress = job_progress(snapshot, job)
        state = (
            "finished"
            if is_finished_job(job)
            else progress.waiting.reason.value
            if progress.waiting
            else "placed"
        )
        rows.append((progress.job, state, progress.domain or "<none>"))
        if progress.waiting is not None and not is_finished_job(job) and first_waiting is None:
            first_waiting = progress
    if exclusive:
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        lines += [
            "  " + "   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows
        ]
    if first_waiting is not None and first_waiting.waiting is not None:
        domains = domain_statuses(snapshot, [first_waiting.topology_key])
        lines.append(_field("Next", f"{first_waiting.job}: {first_waiting.waiting.reason.value}"))
        lines.append(f"  {first_waiting.waiting.message}")
        lines.append("What would unblock it:")
        lines += [f"  - {hint}" for hint in unblock_hints(first_waiting, domains)]
    elif children.missing:
        lines.append(
            _field(
                "Next",
                f"JobSet's controller creates the other {children.missing} Jobs (events say why not)",
            )
        )
    lines += _events(events, {("JobSet", name)} | {("Job", str(metadata(j).get("name"))) for j in exclusive})
    return "\n".join(lines)


def _all_or_nothing(jobset: Obj, jobs: Sequence[Obj]) -> str:
    """What the JobSet asks for, next to what its Jobs got (the gang annotations the webhook wrote)."""
    value = parse_bool(annotations_of(jobset).get(ALL_OR_NOTHING_ANNOTATION))
    asked = "the webhook's default" if value is None else "yes" if value else "no"
    if not jobs:
        return f"asked: {asked}; its Jobs: none created yet"
    in_gang = sum(gang_of(job) is not None for job in jobs)
    got = f"{in_gang} of {len(jobs)} in its gang" if in_gang else "none in a gang"
    line = f"asked: {asked}; its Jobs: {got}"
    if in_gang == len(jobs):
        return line + " (their leaders are released together, once enough domains are free for all)"
    if value is True and jobset_startup(jobset).waits_for_readiness():
        return line + " (startupPolicy InOrder or a dependsOn Ready: its Jobs cannot all hold a domain first)"
    if value is True:
        return line + " (admitted without it: the webhook could not read the JobSet, or was not called)"
    return line


def _strategy(jobset: Obj, jobs: Sequence[Obj]) -> str | None:
    """The JobSet's strategy annotation next to the strategies its Jobs were admitted with."""
    asked = annotations_of(jobset).get(STRATEGY_ANNOTATION, "").strip()
    counts: dict[str, int] = {}
    for job in jobs:
        counts[resolved_strategy(job)] = counts.get(resolved_strategy(job), 0) + 1
    got = ", ".join(f"{strategy} x{count}" for strategy, count in sorted(counts.items()))
    if not asked and not got:
        return None
    asked_text = f"{asked} (the JobSet's annotation: its Jobs' default)" if asked else "the webhook's default"
    return f"asked: {asked_text}; its Jobs: {got or 'none created yet'}"


# --- a pod ------------------------------------------------------------------------------------------------


def explain_pod(snapshot: Snapshot, pod: Obj, job: Obj | None, events: Iterable[Obj]) -> str:
    index = completion_index(pod)
    role = "leader" if index == "0" else "follower" if index is not None else "pod (NonIndexed Job)"
    owner = owner_job_key(pod)
    lines = [
        f"Pod {_name(pod)}: {role}"
        + (f" (completion index {index})" if index else "")
        + (f" of Job {owner}" if owner else "")
    ]
    key = topology_key_of_pod(pod)
    if key is None:
        lines.append("  asks for no exclusive placement (no topology annotation)")
        return "\n".join(lines)
    if JOB_KEY_LABEL not in labels_of(pod):
        lines.append(
            f"  not labelled {JOB_KEY_LABEL}: the webhook did not admit it, so it is not placed (is the "
            "webhook configured for this namespace?)"
        )
    bound_to = node_name(pod)
    domain = snapshot.domain_of(pod, key) if bound_to else ""
    lines.append(_field("Node", f"{bound_to} ({key}={domain or '?'})" if bound_to else "not bound"))
    pinned = pinned_domain(pod)
    if pinned:
        lines.append(_field("Pinned to", f"{key}={pinned} (its leader's domain)"))
    gates = [
        str(g.get("name")) for g in section(pod, "spec").get("schedulingGates") or [] if isinstance(g, dict)
    ]
    if gates:
        lines.append(_field("Gated by", ", ".join(gates)))
    verdict = scheduler_verdict(pod)
    if verdict and not bound_to:
        lines.append(_field("Scheduler", verdict))
    if job is not None:
        lines += ["", explain_job(snapshot, job, events)]
    else:
        lines += _events(events, {("Pod", str(metadata(pod).get("name") or ""))})
    return "\n".join(lines)
