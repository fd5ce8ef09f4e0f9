"""What a Kueue scenario measures (`python -m bench strategies --kueue`): JobSets queued through Kueue,
admitted one at a time (pure functions, and the JobSet watch's recorder).

A JobSet naming a LocalQueue is created suspended (Kueue's JobSet webhook) and Kueue unsuspends it when its
Workload is admitted. The JobSet watch (`JobSetRecorder`, one stream opened before the window, so never
counted) records each JobSet's instants: first seen, first seen unsuspended (*admitted*: Kueue's admission
as JobSet sees it), suspended again (an eviction), and its `Completed` or `Failed` condition. With the pod
watch's instant at which all of a JobSet's pods had run (`bench.gang.GangOutcome.whole_at`) they give:

- `seconds_to_all_complete`: from the JobSets' creation to the last one's `Completed` condition;
- per admitted JobSet, admission → all of its pods Running (`admitted_to_all_running_seconds_*`): this
  project's part, or JobSet's, of a queued JobSet's start;
- the queue's own figures: creation → admission (`queue_wait_*`), a JobSet's completion → the next one's
  admission (`handover_seconds_*`: Kueue's and JobSet's reaction, the same under every strategy), the most
  JobSets admitted at once (1 when the quota holds one).

Kueue's requests are counted apart by client (the audit log's user of Kueue's manager,
`bench.audit.KUEUE_CLIENT`) and its webhooks' calls apart from both projects' (`kueue_fields`), so the
comparison of the projects (`KUEUE_HEADLINE_METRICS`) excludes them and the report shows them.

Under Kueue, `elastic` is elastic: a child Job of a JobSet Kueue queues is admitted at size 1 and resized
once its leader binds (Kueue takes the JobSet's quota from its spec and never checks the child Jobs).
`fallback_problems` checks that no Job fell back to `gate` (`exclusive-placement.io/elastic-fallback`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from bench.audit import KUEUE_CLIENT
from bench.counters import WindowCounts
from bench.measures import nearest_rank
from bench.recorder import watch_objects
from placement.constants import ELASTIC_FALLBACK_ANNOTATION

KUEUE_HEADLINE_METRICS: tuple[tuple[str, str], ...] = (
    ("api_requests_in_namespace_without_kueue", "API requests (namespace, Kueue's apart)"),
    ("api_writes_in_namespace_without_kueue", "API writes (namespace, Kueue's apart)"),
    ("all_webhook_calls", "admission calls (both projects' webhooks)"),
    ("apiserver_cpu_seconds", "kube-apiserver CPU seconds"),
    ("wasted_requests", "wasted requests"),
    ("seconds_to_all_complete", "time to all complete"),
    ("admitted_to_all_running_seconds_p50", "admitted → all running (p50)"),
    ("kueue_requests", "Kueue's requests"),
)
"""The figures a Kueue scenario's ratios compare (`bench.repeats.paired_ratios`): the projects' without
Kueue's requests or webhook calls, and Kueue's own requests beside them (which the strategy may change)."""


@dataclass
class JobSetTimes:
    """One JobSet's instants on the JobSet watch (seconds of the recorder's clock)."""

    created: float
    queued: bool
    """Suspended when first seen: Kueue's webhook queued it."""
    admitted: float | None = None
    """First seen unsuspended."""
    evictions: int = 0
    """Times it was seen suspended again after an admission."""
    completed: float | None = None
    failed: float | None = None

    @property
    def finished(self) -> float | None:
        return self.completed if self.completed is not None else self.failed

    def shifted(self, by: float) -> JobSetTimes:
        def at(value: float | None) -> float | None:
            return None if value is None else value - by

        return dataclasses.replace(
            self,
            created=self.created - by,
            admitted=at(self.admitted),
            completed=at(self.completed),
            failed=at(self.failed),
        )


def _condition(jobset: Mapping[str, Any], kind: str) -> bool:
    conditions = (jobset.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _suspended(jobset: Mapping[str, Any]) -> bool:
    return bool((jobset.get("spec") or {}).get("suspend"))


class JobSetRecorder:
    """Follows a namespace's JobSets named in `names` over one watch: their `JobSetTimes`, and
    `all_finished` once every one of them is Completed or Failed."""

    def __init__(self, names: Sequence[str], clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.names = frozenset(names)
        self.times: dict[str, JobSetTimes] = {}
        self._suspended: dict[str, bool] = {}
        self.connected = asyncio.Event()
        self.all_finished = asyncio.Event()

    def observe(self, event_type: str, jobset: dict[str, Any]) -> None:
        name = str(jobset["metadata"].get("name") or "")
        if name not in self.names or event_type == "DELETED":
            return
        now = self._clock()
        suspended = _suspended(jobset)
        times = self.times.setdefault(name, JobSetTimes(created=now, queued=suspended))
        if not suspended and times.admitted is None:
            times.admitted = now
        if suspended and self._suspended.get(name) is False and times.finished is None:
            times.evictions += 1
        self._suspended[name] = suspended
        if _condition(jobset, "Completed") and times.completed is None:
            times.completed = now
        if _condition(jobset, "Failed") and times.failed is None:
            times.failed = now
        if len(self.times) == len(self.names) and all(t.finished is not None for t in self.times.values()):
            self.all_finished.set()

    def relative_to(self, start: float) -> dict[str, JobSetTimes]:
        return {name: times.shifted(start) for name, times in sorted(self.times.items())}

    async def follow(self, http: httpx.AsyncClient, path: str) -> None:
        """Watch the JobSets at `path` until cancelled."""
        await watch_objects(http, path, self.connected, self.observe)


def max_admitted_at_once(times: Mapping[str, JobSetTimes]) -> int:
    """The most JobSets admitted and not yet finished at one moment (a finish at the instant of another's
    admission is counted first: the handover)."""
    changes: list[tuple[float, int]] = []
    for entry in times.values():
        if entry.admitted is None:
            continue
        changes.append((entry.admitted, 1))
        if entry.finished is not None:
            changes.append((entry.finished, -1))
    most = current = 0
    for _, change in sorted(changes):
        current += change
        most = max(most, current)
    return most


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _p50_max(values: Sequence[float], name: str) -> dict[str, float | None]:
    return {
        f"{name}_p50": _rounded(nearest_rank(values, 0.5)),
        f"{name}_max": _rounded(max(values)) if values else None,
    }


def admission_order(times: Mapping[str, JobSetTimes]) -> list[str]:
    admitted = [(t.admitted, name) for name, t in times.items() if t.admitted is not None]
    return [name for _, name in sorted(admitted)]


def handovers(times: Mapping[str, JobSetTimes]) -> list[float]:
    """For each JobSet admitted after another: the previous one's finish → its admission."""
    order = admission_order(times)
    gaps = []
    for previous, following in itertools.pairwise(order):
        finished, admitted = times[previous].finished, times[following].admitted
        if finished is not None and admitted is not None:
            gaps.append(admitted - finished)
    return gaps


def queued_fields(times: Mapping[str, JobSetTimes], whole_at: Mapping[str, float]) -> dict[str, Any]:
    """A Kueue run's queue figures (module docstring); `times` and `whole_at` in seconds after the JobSets'
    creation."""
    completed = [t.completed for t in times.values() if t.completed is not None]
    all_complete = len(completed) == len(times) and bool(times)
    waits = [t.admitted - t.created for t in times.values() if t.admitted is not None]
    starts = [
        whole_at[name] - t.admitted
        for name, t in times.items()
        if t.admitted is not None and name in whole_at
    ]
    return {
        "jobsets_admitted": len(waits),
        "jobsets_completed": len(completed),
        "jobsets_failed": sum(1 for t in times.values() if t.failed is not None),
        "seconds_to_all_complete": _rounded(max(completed)) if all_complete else None,
        "max_jobsets_admitted_at_once": max_admitted_at_once(times),
        "kueue_evictions": sum(t.evictions for t in times.values()),
        **_p50_max(starts, "admitted_to_all_running_seconds"),
        **_p50_max(waits, "queue_wait_seconds"),
        **_p50_max(handovers(times), "handover_seconds"),
        "admission_order": admission_order(times),
    }


def queue_problems(times: Mapping[str, JobSetTimes], expected: Sequence[str]) -> list[str]:
    """What says the run did not measure JobSets Kueue admitted one at a time."""
    problems = [f"JobSet {name} never seen" for name in expected if name not in times]
    problems += [
        f"JobSet {name} was not created suspended: Kueue did not queue it"
        for name, t in times.items()
        if not t.queued
    ]
    problems += [f"JobSet {name} failed" for name, t in times.items() if t.failed is not None]
    at_once = max_admitted_at_once(times)
    if at_once > 1:
        problems.append(f"Kueue admitted {at_once} JobSets at once: the quota should hold one")
    return problems


def kueue_fields(counts: WindowCounts, namespace: str) -> dict[str, Any]:
    """Kueue's requests apart (by client), its webhooks' calls, and the projects' requests without them."""
    requests = counts.requests

    def not_kueue_in(write: bool) -> int:
        return requests.count(
            lambda key: key.client != KUEUE_CLIENT and key.namespace == namespace and (key.write or not write)
        )

    return {
        "kueue_requests": requests.client_requests(KUEUE_CLIENT),
        "kueue_requests_in_namespace": requests.count(
            lambda key: key.client == KUEUE_CLIENT and key.namespace == namespace
        ),
        "kueue_writes": requests.count(lambda key: key.client == KUEUE_CLIENT and key.write),
        "kueue_requests_by_verb_resource": _kueue_by_verb_resource(counts),
        "kueue_webhook_calls": counts.admission.kueue,
        "api_requests_without_kueue": requests.count(lambda key: key.client != KUEUE_CLIENT),
        "api_requests_in_namespace_without_kueue": not_kueue_in(False),
        "api_writes_in_namespace_without_kueue": not_kueue_in(True),
    }


def _kueue_by_verb_resource(counts: WindowCounts) -> dict[str, int]:
    sums: Counter[str] = Counter()
    for key, n in counts.requests.requests.items():
        if key.client == KUEUE_CLIENT:
            sums[key.verb_resource] += n
    return dict(sorted(sums.items()))


def fallback_problems(jobs: Sequence[Mapping[str, Any]]) -> list[str]:
    """No child Job of a JobSet Kueue queues falls back from `elastic` (whatever the contender)."""
    return [
        f"Job {job['metadata']['name']}: fell back ({ELASTIC_FALLBACK_ANNOTATION})"
        for job in jobs
        if ELASTIC_FALLBACK_ANNOTATION in (job["metadata"].get("annotations") or {})
    ]


def elastic_fallback_jobs(jobs: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for job in jobs if ELASTIC_FALLBACK_ANNOTATION in (job["metadata"].get("annotations") or {}))
