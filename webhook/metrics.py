"""Prometheus metrics of one webhook instance (own registry, so tests can build many apps)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

M = TypeVar("M", bound=MetricWrapperBase)


def _registry() -> CollectorRegistry:
    return CollectorRegistry()


class Children(Generic[M]):
    """`metric.labels(*values)`, each child looked up once: `labels` takes a lock and builds its key on every
    call, which every admission paid several times."""

    def __init__(self, metric: M) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=_registry)

    def __post_init__(self) -> None:
        r = self.registry
        self.admissions = Counter(
            "exclusive_placement_admissions_total",
            "Admission requests by endpoint and result "
            "(allowed, patched, denied, over_limit, errored, bad_request, shed)",
            ["endpoint", "result"],
            registry=r,
        )
        self.latency = Histogram(
            "exclusive_placement_admission_duration_seconds",
            "Admission handling time by endpoint",
            ["endpoint"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=r,
        )
        self.cache_lookups = Counter(
            "exclusive_placement_leader_cache_total",
            "Leader lookups answered from the informer cache (hit) or not (miss)",
            ["result"],
            registry=r,
        )
        self.live_lookups = Counter(
            "exclusive_placement_live_lookups_total",
            "Live API lookups after a cache miss, by object kind and outcome (found, not_found, error)",
            ["kind", "outcome"],
            registry=r,
        )
        self.jobset_lookups = Counter(
            "exclusive_placement_jobset_lookups_total",
            "Startup orders of owning JobSets, by source (memory, live) or failure (not_found, error)",
            ["result"],
            registry=r,
        )
        self.kueue_queue_lookups = Counter(
            "exclusive_placement_kueue_queue_lookups_total",
            "Kueue LocalQueues read (with their ClusterQueue and flavors) for a queued exclusive workload's "
            "CREATE, by result (read, not_found, error)",
            ["result"],
            registry=r,
        )
        self.errors = Counter(
            "exclusive_placement_errors_total",
            "Unexpected exceptions while handling admission requests",
            ["endpoint"],
            registry=r,
        )
        self.cert_reloads = Counter(
            "exclusive_placement_cert_reloads_total",
            "Serving certificate reloads by outcome (ok, error)",
            ["outcome"],
            registry=r,
        )
        self.cache_objects = Gauge(
            "exclusive_placement_cache_objects", "Objects in the informer caches", ["kind"], registry=r
        )
        self.connections_open = Gauge(
            "exclusive_placement_connections_open",
            "Client connections open, counted from the TCP accept (before TLS)",
            registry=r,
        )
        self.connections_closed = Counter(
            "exclusive_placement_connections_closed_total",
            "Client connections closed by the server for a limit, by reason (max-connections, "
            "max-connections-per-client, tls-handshake-timeout, tls-handshake-failed, header-timeout, "
            "header-too-large, idle: no byte of a request within the header timeout, closed unanswered)",
            ["reason"],
            registry=r,
        )
        self.admission_memory = Gauge(
            "exclusive_placement_admission_memory_bytes",
            "Memory reserved by admission requests in flight (bodies, and their estimated parsed size)",
            registry=r,
        )
        self.admissions_by = Children(self.admissions)
        self.latency_by = Children(self.latency)
        self.cache_lookups_by = Children(self.cache_lookups)
        self.jobset_lookups_by = Children(self.jobset_lookups)
        self.watch_restarts = Counter(
            "exclusive_placement_watch_restarts_total",
            "Informer watches started again, by informer and reason (ended, gone, connection, an HTTP "
            "status, decode, unexpected)",
            ["informer", "reason"],
            registry=r,
        )
