"""What the benchmarks measure, computed from what they recorded (pure functions, no I/O).

- Statistics every benchmark uses: nearest-rank percentiles, quantiles of a Prometheus histogram read from
  a `/metrics` page, a metric's value, least-squares fits (memory per 1,000 objects).
- What one strategy run measures. Two sources: the counters of the run's window
  (`bench.counters.WindowCounts`: the audit log's requests, the components' metrics) and the per-Job
  timeline the pod watch recorded (`JobTimeline`: instants on the watch). The definitions here are the ones
  docs/results.md states.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from bench.counters import SchedulerCounts, WindowCounts
from bench.promtext import Samples
from placement.constants import LEADER_COMPLETION_INDEX

WEBHOOK_CLIENT = "exclusive-placement-webhook"
"""This project's webhook as a client of the API server (its User-Agent, webhook/server.py)."""
RESIZER_CLIENT = "exclusive-placement-resizer"
"""The resizer as a client of the API server (its User-Agent, resizer/app.py)."""
JOB_CONTROLLER_CLIENT = "job-controller"
LOOKUP_VERBS = frozenset({"get", "list"})
"""A client's live reads; its watches (opened before the run, renewed every few minutes) are not lookups."""
FAILED_CREATE_REASON = "FailedCreate"
"""The Job controller's Event for a pod create the API server refused (RealPodControl.CreatePods)."""
LOOKUPS_PER_REJECTION = 2
"""This project's webhook admits a follower in two calls (mutating, validating); a follower is rejected only
when its leader is not cached as bound, which is a cache miss, and each miss costs one live LIST of the
Job's leader (webhook/cache.py `LeaderDirectory.leader_state`). An unbound leader needs no node lookup."""


# --- statistics ------------------------------------------------------------------------------------------


def nearest_rank(values: Sequence[float], quantile: float) -> float | None:
    """The nearest-rank percentile (an observed value, never interpolated); None for no values."""
    if not 0 < quantile <= 1:
        raise ValueError(f"quantile must be in (0, 1], got {quantile}")
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(quantile * len(ordered)) - 1)]


def metric_value(metrics_text: str, name: str, labels: Mapping[str, str] | None = None) -> float:
    """The sum of the samples of `name` on a `/metrics` page whose labels include `labels` (0 if none)."""
    return Samples.parse(metrics_text).total(name, **(labels or {}))


def histogram_buckets(metrics_text: str, name: str) -> list[tuple[float, float]]:
    """The cumulative (upper bound, count) buckets of histogram `name`, summed over its label sets (every
    endpoint of the webhook's admission histogram, say), by bound."""
    totals: dict[float, float] = {}
    for bound, value in Samples.parse(metrics_text).by_label(f"{name}_bucket", "le").items():
        totals[float(bound)] = totals.get(float(bound), 0.0) + value
    return sorted(totals.items())


def histogram_quantile(buckets: Sequence[tuple[float, float]], quantile: float) -> float | None:
    """Prometheus' `histogram_quantile` over cumulative (upper bound, count) buckets: linear within the
    bucket the rank falls in; None when nothing was observed."""
    if not buckets or buckets[-1][1] == 0:
        return None
    rank = quantile * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            share = (rank - lower_count) / (count - lower_count) if count > lower_count else 0.0
            return lower_bound + (bound - lower_bound) * share
        lower_bound, lower_count = bound, count
    return lower_bound


def linear_fit(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares (slope, intercept) of y over x; None with fewer than two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    count = len(points)
    mean_x = sum(x for x, _ in points) / count
    mean_y = sum(y for _, y in points) / count
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in points)
    variance = sum((x - mean_x) ** 2 for x, _ in points)
    slope = covariance / variance
    return slope, mean_y - slope * mean_x


def per_thousand(points: Sequence[tuple[float, float]]) -> float | None:
    """MB per 1,000 objects: the slope of (objects, MB) times 1,000, rounded."""
    fit = linear_fit(points)
    return None if fit is None else round(fit[0] * 1000, 2)


# --- one strategy run ------------------------------------------------------------------------------------


@dataclass
class JobTimeline:
    """One Job's instants on the pod watch (seconds of the recorder's clock)."""

    leader_created: float | None = None
    """When its leader pod (completion index 0) was first seen: within milliseconds of the Job's creation."""
    leader_bound: float | None = None
    """When its leader was first seen with a node."""
    created: dict[str, float] = field(default_factory=dict)
    """Completion index → when a pod of that index was first seen (its creation, on the watch)."""
    running: dict[str, float] = field(default_factory=dict)
    """Completion index → when that pod was first seen Running (or already Succeeded)."""

    @property
    def leader_wait(self) -> float | None:
        if self.leader_created is None or self.leader_bound is None:
            return None
        return self.leader_bound - self.leader_created

    def bind_to_all_running(self, pods_per_job: int) -> float | None:
        """From the leader's bind to the moment every pod of the Job (the leader included) had been Running;
        None until then."""
        if self.leader_bound is None or len(self.running) < pods_per_job:
            return None
        return max(self.running.values()) - self.leader_bound

    def followers_created(self) -> list[float]:
        return [at for index, at in self.created.items() if index != LEADER_COMPLETION_INDEX]

    def bind_to_last_follower_created(self, pods_per_job: int) -> float | None:
        """From the leader's bind to the creation of the Job's last follower (negative when every follower
        was created before the leader bound, as a gated follower is); None until all exist."""
        followers = self.followers_created()
        if self.leader_bound is None or len(followers) < pods_per_job - 1:
            return None
        return max(followers) - self.leader_bound if followers else 0.0


def _rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def timeline_fields(timelines: Mapping[str, JobTimeline], pods_per_job: int) -> dict[str, Any]:
    """Per-Job figures of the run: leader waits (creation → bind, seconds), leader bind → all of the
    Job's pods Running (p50/p99 over Jobs), leader bind → its last follower's creation (p50, max), and the
    waiting it adds up to (sum over Jobs of creation → leader bind, in minutes)."""
    waits = [w for t in timelines.values() if (w := t.leader_wait) is not None]
    spans = [s for t in timelines.values() if (s := t.bind_to_all_running(pods_per_job)) is not None]
    followers = [
        f for t in timelines.values() if (f := t.bind_to_last_follower_created(pods_per_job)) is not None
    ]
    return {
        "leader_wait_mean_seconds": _rounded(sum(waits) / len(waits)) if waits else None,
        "leader_wait_max_seconds": _rounded(max(waits)) if waits else None,
        "leader_bind_to_all_running_seconds_p50": _rounded(nearest_rank(spans, 0.5)),
        "leader_bind_to_all_running_seconds_p99": _rounded(nearest_rank(spans, 0.99)),
        "leader_bind_to_last_follower_created_seconds_p50": _rounded(nearest_rank(followers, 0.5)),
        "leader_bind_to_last_follower_created_seconds_max": _rounded(max(followers)) if followers else None,
        "jobs_timed": len(spans),
        "waiting_job_minutes": round(sum(waits) / 60, 2),
    }


CACHE_RACE_SECONDS = 2.0
"""A follower created more than this after its leader bound waited past the Job controller's first retry
(an owned pod's update re-queues its Job after about 1 s, `enqueueSyncJobBatched`; the rest is slack for
a loaded machine)."""


def _follower_rejections(counts: WindowCounts) -> dict[str, list[datetime]]:
    """Job key → when the Job controller recorded each of its rejected pod creations: its writes of the
    Job's `FailedCreate` Event (a create, then one patch per repeat), which follow each rejected create
    within milliseconds (the audit log names no pod in a rejected create of a generated name)."""
    rejections: dict[str, list[datetime]] = {}
    for write in counts.requests.event_writes:
        event = counts.events.get((write.namespace, write.name))
        if (
            write.client == JOB_CONTROLLER_CLIENT
            and event is not None
            and event.reason == FAILED_CREATE_REASON
            and event.involved_kind == "Job"
        ):
            rejections.setdefault(f"{write.namespace}/{event.involved_name}", []).append(write.received)
    return rejections


def per_job_fields(
    timelines: Mapping[str, JobTimeline], pods_per_job: int, counts: WindowCounts, start: float
) -> dict[str, Any]:
    """The long wait's per-Job figures (`start`: the recorder's clock when `counts`' window opened):

    - `jobs`: Job → its leader's wait, leader bind → last follower created, the follower creations
      rejected after its leader bound;
    - `jobs_delayed_by_cache_race`: the Jobs whose follower was rejected after their leader had bound and
      whose followers came later than `CACHE_RACE_SECONDS` after the bind: the rejecting webhook's cache
      had not seen the bind, so the next try waited for the Job's backoff, not for the bind's 1 s re-queue.
    """

    def wall(at: float) -> datetime:
        return counts.window.start + timedelta(seconds=at - start)

    rejections = _follower_rejections(counts)
    jobs: dict[str, Any] = {}
    delayed = 0
    for job, timeline in sorted(timelines.items()):
        to_followers = timeline.bind_to_last_follower_created(pods_per_job)
        bound = timeline.leader_bound
        after_bind = 0 if bound is None else sum(1 for at in rejections.get(job, []) if at > wall(bound))
        first = min(timeline.followers_created(), default=None)
        late = bound is not None and first is not None and first - bound > CACHE_RACE_SECONDS
        delayed += bool(after_bind and late)
        jobs[job] = {
            "leader_wait_seconds": _rounded(timeline.leader_wait),
            "leader_bind_to_last_follower_created_seconds": _rounded(to_followers),
            "follower_creates_rejected_after_leader_bound": after_bind,
        }
    return {"jobs": jobs, "jobs_delayed_by_cache_race": delayed}


def workload_requests(counts: WindowCounts, client: str) -> int:
    """`client`'s requests about the workload: neither its watches (opened before the run, renewed every
    few minutes) nor its Lease (background, `bench.audit`)."""
    return counts.requests.client_requests(client)


@dataclass(frozen=True)
class Waste:
    """API requests caused by rejected pod creations (docs/results.md, "Wasted requests")."""

    rejected_creates: int
    """Pod creates the API server refused."""
    event_writes: int
    """Event creates and count patches recording them (writes of `FailedCreate` Events)."""
    webhook_lookups: int
    """Live leader lookups this project's webhook made while admitting them: LOOKUPS_PER_REJECTION per
    rejection, never more than the lookups it made in the window (its GET and LIST requests)."""

    @property
    def total(self) -> int:
        return self.rejected_creates + self.event_writes + self.webhook_lookups


MAX_FAILED_CREATE_MESSAGES = 5
FAILED_SCHEDULING_REASON = "FailedScheduling"
"""kube-scheduler's Event for a pod it could not place, saying why per node."""


def event_messages(events: Iterable[Mapping[str, Any]], reason: str, *, prefix: str = "") -> dict[str, int]:
    """The messages of the Events of `reason` (without `prefix`) → how many times they were recorded (the
    Events' counts, or their series' for events.k8s.io ones), the MAX_FAILED_CREATE_MESSAGES most frequent."""
    counts: dict[str, int] = {}
    for event in events:
        if event.get("reason") == reason:
            message = str(event.get("message") or event.get("note") or "").removeprefix(prefix)
            repeats = event.get("count") or (event.get("series") or {}).get("count") or 1
            counts[message] = counts.get(message, 0) + int(repeats)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return dict(ranked[:MAX_FAILED_CREATE_MESSAGES])


def failed_create_messages(events: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Why pod creations were refused, from the Job controller's `FailedCreate` Events."""
    return event_messages(events, FAILED_CREATE_REASON, prefix="Error creating: ")


def failed_scheduling_messages(events: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Why kube-scheduler could not place pods, from its `FailedScheduling` Events."""
    return event_messages(events, FAILED_SCHEDULING_REASON)


def waste_of(counts: WindowCounts) -> Waste:
    rejected = counts.requests.pod_creates_rejected
    events = counts.event_writes_by_reason().get(FAILED_CREATE_REASON, 0)
    lookups = counts.requests.client_requests(WEBHOOK_CLIENT, LOOKUP_VERBS)
    return Waste(rejected, events, min(LOOKUPS_PER_REJECTION * rejected, lookups))


def ratio(value: float | None, reference: float | None) -> float | None:
    """value / reference, rounded; None when either is missing or the reference is 0."""
    if value is None or not reference:
        return None
    return round(value / reference, 3)


HEADLINE_METRICS: tuple[tuple[str, str], ...] = (
    ("api_requests_in_namespace", "API requests (JobSet's namespace)"),
    ("api_writes_in_namespace", "API writes (JobSet's namespace)"),
    ("all_webhook_calls", "admission calls (both projects' webhooks)"),
    ("apiserver_cpu_seconds", "kube-apiserver CPU seconds"),
    ("wasted_requests", "wasted requests"),
    ("seconds_to_all_running", "time to all running"),
    ("leader_bind_to_all_running_seconds_p50", "leader bind → all running (p50)"),
)
"""The figures `bench.repeats.paired_ratios` compares: elastic's value over a baseline's. Requests and
writes are those about the measured JobSet's namespace, so a backlog's traffic in the window does not
dilute them."""


class LowPriorityState(StrEnum):
    """What became of the preempted low-priority JobSet when every high-priority pod ran."""

    RUNNING = "running"
    """Every one of its pods Running: nothing was preempted."""
    RESTARTED_WAITING = "restarted-waiting"
    """JobSet restarted it (status.restarts >= 1) and its pods wait for free domains."""
    PREEMPTED_NOT_RESTARTED = "preempted-not-restarted"
    """Pods lost, no restart yet."""
    FAILED = "failed"
    """JobSet marked it Failed (its failurePolicy's restarts exhausted)."""


def _condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def low_priority_state(jobset: Mapping[str, Any], running_pods: int, expected_pods: int) -> LowPriorityState:
    if _condition_true(jobset, "Failed"):
        return LowPriorityState.FAILED
    if running_pods >= expected_pods:
        return LowPriorityState.RUNNING
    if int((jobset.get("status") or {}).get("restarts") or 0) >= 1:
        return LowPriorityState.RESTARTED_WAITING
    return LowPriorityState.PREEMPTED_NOT_RESTARTED


def preemption_fields(
    scheduler: SchedulerCounts, low_jobset: Mapping[str, Any], low_running_pods: int, expected_pods: int
) -> dict[str, Any]:
    """The preemption scenario's own figures: victims and preemptions from kube-scheduler's counters over
    the window (opened when the high-priority JobSet went in), and what became of the low-priority JobSet
    (its status.restarts, its state, its pods still Running)."""
    return {
        "pods_preempted": scheduler.preemption_victims,
        "preemptions": scheduler.preemptions,
        "low_priority_restarts": int((low_jobset.get("status") or {}).get("restarts") or 0),
        "low_priority_state": str(low_priority_state(low_jobset, low_running_pods, expected_pods)),
        "low_priority_pods_running": low_running_pods,
    }
