"""Counters behind `GET /debug/stats` (a contract read by benchmarks and checks; see issue 3).

One process-wide `Stats` object is shared by the API server and the controllers. Everything runs on one
asyncio event loop, so plain integer increments are safe.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass
class Stats:
    requests_total: int = 0
    requests_writes: int = 0
    by_verb_resource: Counter[str] = field(default_factory=Counter)
    by_client: Counter[str] = field(default_factory=Counter)
    by_client_verb_resource: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(client, "verb resource"): which component made which request (where a strategy's cost comes from)."""
    by_namespace: Counter[str] = field(default_factory=Counter)
    """Requests about one namespace's objects (cluster-scoped and all-namespace requests are not counted)."""
    writes_by_namespace: Counter[str] = field(default_factory=Counter)
    pods_create_accepted: int = 0
    pods_create_rejected: int = 0
    pods_patched: int = 0
    pods_bound: int = 0
    pods_running: int = 0
    jobs_patched: int = 0
    event_writes_by_reason: Counter[str] = field(default_factory=Counter)
    """Event creates and updates/patches the API server stored, by the event's reason (either API group)."""
    admission_calls: int = 0
    admission_denied: int = 0
    admission_errors: int = 0
    jobset_webhook_calls: int = 0
    jobset_webhook_denied: int = 0
    scheduler_attempts: int = 0
    scheduler_filter_evaluations: int = 0
    scheduler_affinity_evaluations: int = 0
    scheduler_unschedulable: int = 0
    scheduler_preemptions: int = 0
    """Scheduling cycles whose PostFilter nominated a node (DefaultPreemption succeeded)."""
    scheduler_preemption_victims: int = 0
    """Pods the scheduler preempted (DisruptionTarget PreemptionByScheduler, then deleted)."""
    watch_streams_dropped: int = 0
    faults_injected: Counter[str] = field(default_factory=Counter)
    client_throttled: Counter[str] = field(default_factory=Counter)
    """Per controller client: requests that waited in its client-side token bucket."""
    client_throttle_seconds: dict[str, float] = field(default_factory=dict)
    """Per controller client: simulated seconds its requests waited in the token bucket, summed."""

    def count_request(
        self, verb: str, resource: str, client: str = "external", namespace: str | None = None
    ) -> None:
        """Count one API request; `resource` may carry a subresource, e.g. "pods/binding"; `namespace`: the
        namespace the request is about (None: cluster-scoped, or across all namespaces)."""
        self.requests_total += 1
        write = verb in WRITE_VERBS
        if write:
            self.requests_writes += 1
        if namespace:
            self.by_namespace[namespace] += 1
            if write:
                self.writes_by_namespace[namespace] += 1
        verb_resource = f"{verb} {resource}"
        self.by_verb_resource[verb_resource] += 1
        self.by_client[client] += 1
        self.by_client_verb_resource[client, verb_resource] += 1

    def count_event_write(self, event: dict[str, Any]) -> None:
        self.event_writes_by_reason[str(event.get("reason") or "")] += 1

    def count_throttled(self, client: str, waited: float) -> None:
        """One request of `client` waited `waited` simulated seconds for a client-side rate-limit token."""
        self.client_throttled[client] += 1
        self.client_throttle_seconds[client] = self.client_throttle_seconds.get(client, 0.0) + waited

    def reset(self) -> None:
        fresh = Stats()
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(fresh, name))

    def _by_client_verb_resource(self) -> dict[str, dict[str, int]]:
        nested: dict[str, dict[str, int]] = {}
        for (client, verb_resource), count in sorted(self.by_client_verb_resource.items()):
            nested.setdefault(client, {})[verb_resource] = count
        return nested

    def snapshot(self) -> dict[str, Any]:
        return {
            "requests": {
                "total": self.requests_total,
                "writes": self.requests_writes,
                "by_verb_resource": dict(self.by_verb_resource),
                "by_client": dict(self.by_client),
                "by_client_verb_resource": self._by_client_verb_resource(),
                "by_namespace": {
                    ns: {"total": n, "writes": self.writes_by_namespace[ns]}
                    for ns, n in sorted(self.by_namespace.items())
                },
            },
            "pods": {
                "create_accepted": self.pods_create_accepted,
                "create_rejected": self.pods_create_rejected,
                "patched": self.pods_patched,
                "bound": self.pods_bound,
                "running": self.pods_running,
            },
            "jobs": {"patched": self.jobs_patched},
            "events": {"writes_by_reason": dict(self.event_writes_by_reason)},
            "admission": {
                "calls": self.admission_calls,
                "denied": self.admission_denied,
                "errors": self.admission_errors,
            },
            "jobset_webhooks": {
                "calls": self.jobset_webhook_calls,
                "denied": self.jobset_webhook_denied,
            },
            "scheduler": {
                "attempts": self.scheduler_attempts,
                "filter_evaluations": self.scheduler_filter_evaluations,
                "affinity_evaluations": self.scheduler_affinity_evaluations,
                "unschedulable": self.scheduler_unschedulable,
                "preemptions": self.scheduler_preemptions,
                "preemption_victims": self.scheduler_preemption_victims,
            },
            "client_throttling": {
                client: {
                    "throttled": count,
                    "waited_seconds": round(self.client_throttle_seconds.get(client, 0.0), 3),
                }
                for client, count in sorted(self.client_throttled.items())
            },
            "faults": {
                "watch_streams_dropped": self.watch_streams_dropped,
                "injected": dict(self.faults_injected),
            },
        }
