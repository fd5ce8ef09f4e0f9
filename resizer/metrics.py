"""Prometheus metrics of the resizer, on a registry of its own (so tests can run several in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

PREFIX = "exclusive_placement_resizer"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.resizes = Counter(
            f"{PREFIX}_resizes", "Jobs restored to their target size.", registry=self.registry
        )
        self.gate_releases = Counter(
            f"{PREFIX}_gate_releases",
            "Followers pinned to their leader's domain and ungated.",
            registry=self.registry,
        )
        self.follower_repairs = Counter(
            f"{PREFIX}_follower_repairs",
            "Unbound followers pinned to another domain than their leader's, marked DisruptionTarget and "
            "deleted.",
            registry=self.registry,
        )
        self.retired = Counter(
            f"{PREFIX}_pin_followers_retired",
            "Finished Jobs whose pin-followers label was removed: no longer params of the follower "
            "MutatingAdmissionPolicy.",
            registry=self.registry,
        )
        self.rewound = Counter(
            f"{PREFIX}_suspended_jobs_rewound",
            "Resized Jobs put back to size 1 (resize: pending, no recorded domain) while suspended, so that "
            "their resume places them as at their first start.",
            registry=self.registry,
        )
        self.bind_to_resize = Histogram(
            f"{PREFIX}_bind_to_resize_seconds",
            "From observing the leader bound to the Job patch (or the last gate release) being acknowledged.",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.retries = Counter(
            f"{PREFIX}_retries",
            "Work items re-queued with backoff, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.errors = Counter(
            f"{PREFIX}_errors",
            "Failed API calls, and reconciles that failed (retried with backoff or given up), by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.skips = Counter(
            f"{PREFIX}_skips", "Decisions not to act, by reason.", ["reason"], registry=self.registry
        )
        self.conflicts = Counter(
            f"{PREFIX}_conflicts",
            "Patches refused for a stale precondition, then re-decided.",
            registry=self.registry,
        )
        self.watch_restarts = Counter(
            f"{PREFIX}_watch_restarts",
            "Watches restarted, by informer and reason.",
            ["informer", "reason"],
            registry=self.registry,
        )
        self.gang_admissions = Counter(
            f"{PREFIX}_gang_admissions",
            "All-or-nothing JobSets released from the queue (every gated leader ungated).",
            registry=self.registry,
        )
        self.leader_releases = Counter(
            f"{PREFIX}_leader_releases",
            "All-or-nothing leader pods ungated (one patch each).",
            registry=self.registry,
        )
        self.gang_timeouts = Counter(
            f"{PREFIX}_gang_timeouts",
            "All-or-nothing JobSets whose leaders did not all bind within the timeout: their ungated leaders "
            "deleted.",
            registry=self.registry,
        )
        self.gangs_queued = Gauge(
            f"{PREFIX}_gangs_queued",
            "All-or-nothing JobSets waiting in the queue for free domains.",
            registry=self.registry,
        )
        self.event_writes = Counter(
            f"{PREFIX}_event_writes",
            "Event requests (events.k8s.io/v1) that succeeded, by verb: create, patch (a series' count).",
            ["verb"],
            registry=self.registry,
        )
        self.events_dropped = Counter(
            f"{PREFIX}_events_dropped",
            "Event writes given up, by reason: queue-full (record never waits), rejected (the API server "
            "refused it), retries-exhausted.",
            ["reason"],
            registry=self.registry,
        )
        self.is_leader = Gauge(
            f"{PREFIX}_is_leader", "1 while this replica holds the Lease and acts.", registry=self.registry
        )
        self.queue_depth = Gauge(
            f"{PREFIX}_queue_depth", "Keys waiting in the work queue.", registry=self.registry
        )
