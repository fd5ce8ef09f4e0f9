"""What `make run` / `make demo` show: per-Job state from jobs, pods and nodes, and the final table.

Objects are read as the product reads them (`placement.objects`): a pod's Job, its role, a Job's topology
key and target size."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from kubekit.keys import object_key
from placement.constants import RESIZE_DONE, RESIZE_LABEL, RESIZE_PENDING
from placement.objects import (
    Obj,
    is_leader,
    labels_of,
    node_name,
    owner_job_key,
    section,
    target_size,
    topology_key_of_job,
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


def _condition(job: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in section(job, "status").get("conditions") or []
    )


def job_status(job: Obj, pods: Iterable[Obj], node_labels: Mapping[str, Mapping[str, str]]) -> JobStatus:
    """State of one Job from its own pods (`pods` may hold other Jobs' pods: they are skipped)."""
    key = object_key(job)
    own = [p for p in pods if owner_job_key(p) == key]
    tkey = topology_key_of_job(job)
    bound = [(p, node) for p in own if (node := node_name(p)) is not None]
    domains = sorted({node_labels.get(node, {}).get(tkey or "", "?") for _p, node in bound})
    running = sum(1 for p in own if section(p, "status").get("phase") == "Running")
    leader_bound = any(is_leader(p) for p, _node in bound)
    resize_label = labels_of(job).get(RESIZE_LABEL)
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


def node_label_map(nodes: Iterable[Obj]) -> dict[str, dict[str, str]]:
    return {object_key(node): labels_of(node) for node in nodes}


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
