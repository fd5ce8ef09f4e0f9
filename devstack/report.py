"""What `make run` / `make demo` show: per-Job state from jobs, pods and nodes, and the final table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from devstack.exclusivity import job_of
from placement.constants import (
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_COMPLETION_INDEX_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    LEADER_COMPLETION_INDEX,
    RESIZE_DONE,
    RESIZE_LABEL,
    RESIZE_PENDING,
    TARGET_COMPLETIONS_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)

JobState = Literal["pending", "leader-bound", "resized", "running", "complete", "failed"]
DONE_STATES: frozenset[JobState] = frozenset({"running", "complete"})
"""A Job in one of these is placed whole."""


@dataclass(frozen=True)
class JobStatus:
    job: str
    """namespace/name."""
    state: JobState
    domains: tuple[str, ...]
    """Distinct topology domains of the Job's bound pods."""
    pods_running: int
    target: int
    leader_bound: bool
    resized: bool | None
    """None for Jobs that are not resized (strategies other than elastic)."""


def topology_key(job: Mapping[str, Any]) -> str | None:
    """Ours wins over JobSet's; the Job's metadata over its pod template."""
    for meta in (job.get("metadata", {}), job.get("spec", {}).get("template", {}).get("metadata", {})):
        annotations = meta.get("annotations") or {}
        for key in (TOPOLOGY_ANNOTATION, JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION):
            if annotations.get(key):
                return str(annotations[key])
    return None


def target_size(job: Mapping[str, Any]) -> int:
    annotations = job.get("metadata", {}).get("annotations") or {}
    if TARGET_COMPLETIONS_ANNOTATION in annotations:
        return int(annotations[TARGET_COMPLETIONS_ANNOTATION])
    return int(job.get("spec", {}).get("completions") or 1)


def is_leader(pod: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata", {})
    index = (meta.get("annotations") or {}).get(JOB_COMPLETION_INDEX_ANNOTATION) or (
        meta.get("labels") or {}
    ).get(JOB_COMPLETION_INDEX_LABEL)
    return index == LEADER_COMPLETION_INDEX


def _condition(job: Mapping[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in job.get("status", {}).get("conditions") or []
    )


def job_status(
    job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], node_labels: Mapping[str, Mapping[str, str]]
) -> JobStatus:
    """State of one Job from its own pods (`pods` may hold other Jobs' pods: they are skipped)."""
    meta = job["metadata"]
    key = f"{meta.get('namespace', '')}/{meta['name']}"
    own = [p for p in pods if job_of(p) == key]
    tkey = topology_key(job)
    domains = sorted(
        {
            node_labels.get(p["spec"]["nodeName"], {}).get(tkey or "", "?")
            for p in own
            if (p.get("spec") or {}).get("nodeName")
        }
    )
    running = sum(1 for p in own if (p.get("status") or {}).get("phase") == "Running")
    leader_bound = any(is_leader(p) and (p.get("spec") or {}).get("nodeName") for p in own)
    resize_label = (meta.get("labels") or {}).get(RESIZE_LABEL)
    resized = None if resize_label not in (RESIZE_PENDING, RESIZE_DONE) else resize_label == RESIZE_DONE
    target = target_size(job)
    state: JobState
    if _condition(job, "Complete"):
        state = "complete"
    elif _condition(job, "Failed"):
        state = "failed"
    elif running >= target:
        state = "running"
    elif resized:
        state = "resized"
    elif leader_bound:
        state = "leader-bound"
    else:
        state = "pending"
    return JobStatus(key, state, tuple(domains), running, target, bool(leader_bound), resized)


def node_label_map(nodes: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    return {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in nodes}


def state_summary(statuses: Iterable[JobStatus]) -> str:
    """e.g. "4 Jobs: 1 pending, 2 resized, 1 running"."""
    statuses = list(statuses)
    counts = Counter(s.state for s in statuses)
    order: tuple[JobState, ...] = ("pending", "leader-bound", "resized", "running", "complete", "failed")
    parts = [f"{counts[state]} {state}" for state in order if counts[state]]
    return f"{len(statuses)} Jobs: " + ", ".join(parts) if statuses else "waiting for Jobs"


@dataclass
class Timeline:
    """First time (seconds after `start`) each Job was seen with its leader bound, and resized."""

    start: float
    leader_bound: dict[str, float] = field(default_factory=dict)
    resized: dict[str, float] = field(default_factory=dict)

    def observe(self, statuses: Iterable[JobStatus], now: float) -> None:
        for status in statuses:
            if status.leader_bound:
                self.leader_bound.setdefault(status.job, now - self.start)
            if status.resized:
                self.resized.setdefault(status.job, now - self.start)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def format_table(statuses: Iterable[JobStatus], timeline: Timeline) -> str:
    header = ("Job", "node pool", "pods running", "leader bound", "resized", "state")
    rows = [header]
    for s in sorted(statuses, key=lambda s: s.job):
        resize = "n/a" if s.resized is None else _seconds(timeline.resized.get(s.job))
        rows.append(
            (
                s.job,
                ",".join(s.domains) or "-",
                f"{s.pods_running}/{s.target}",
                _seconds(timeline.leader_bound.get(s.job)),
                resize,
                s.state,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


RESIZER_PREFIX = "exclusive_placement_resizer"
_RESIZER_SAMPLES = (
    "resizes_total",
    "gate_releases_total",
    "bind_to_resize_seconds_sum",
    "bind_to_resize_seconds_count",
)


def resizer_summary(metrics_texts: Iterable[str]) -> str | None:
    """ "resizer: 4 resizes, 0 gate releases, mean bind→resize 3.2 ms" from the replicas' /metrics pages
    (None before the first resize)."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {f"{RESIZER_PREFIX}_{name}": name for name in _RESIZER_SAMPLES}
    totals = dict.fromkeys(_RESIZER_SAMPLES, 0.0)
    for text in metrics_texts:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in wanted:
                    totals[wanted[sample.name]] += sample.value
    count = totals["bind_to_resize_seconds_count"]
    if not count:
        return None
    mean_ms = 1000 * totals["bind_to_resize_seconds_sum"] / count
    resizes, releases = int(totals["resizes_total"]), int(totals["gate_releases_total"])
    return (
        f"resizer: {resizes} resizes, {releases} gate releases, mean bind→resize {mean_ms:.1f} ms (/metrics)"
    )
