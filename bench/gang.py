"""What a gang scenario measures, from the timeline of its pods (pure functions, no I/O).

Every pod's stage changes (created, bound into a domain, Running, Succeeded, gone) are recorded on the pod
watch as `PodEvent`s, seconds after the JobSets were created. Between two events nothing changes, so the
figures are sums over those intervals:

- a JobSet *holds* a domain while one of its pods is bound there and neither finished nor gone;
- it is *partially placed* while it holds at least one domain but fewer than all of its pods (its gang
  size: every pod of every Job, whatever size `elastic` shrank the Jobs to) are Running or Succeeded. Under
  a gang's program (bench.rendezvous) such a JobSet makes no progress: the domains it holds are wasted;
- it is *complete* once all of its pods have Succeeded.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from placement.constants import JOBSET_NAME_LABEL


class PodStage(StrEnum):
    PENDING = "pending"
    """Exists, not bound."""
    BOUND = "bound"
    """Bound, containers not started yet."""
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    GONE = "gone"
    """Failed or deleted."""


HOLDING = frozenset({PodStage.BOUND, PodStage.RUNNING})
PROGRESSED = frozenset({PodStage.RUNNING, PodStage.SUCCEEDED})


def stage_of(pod: Mapping[str, Any], *, deleted: bool = False) -> PodStage:
    phase = (pod.get("status") or {}).get("phase")
    if deleted or phase == "Failed":
        return PodStage.GONE
    if phase == "Succeeded":
        return PodStage.SUCCEEDED
    if phase == "Running":
        return PodStage.RUNNING
    return PodStage.BOUND if (pod.get("spec") or {}).get("nodeName") else PodStage.PENDING


def jobset_of(pod: Mapping[str, Any]) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(JOBSET_NAME_LABEL) or "")


@dataclass(frozen=True)
class PodEvent:
    at: float
    """Seconds after the JobSets were created."""
    pod: str
    jobset: str
    domain: str
    """The topology domain of its node ("" while unbound)."""
    stage: PodStage


@dataclass(frozen=True)
class Holding:
    """A JobSet holding a domain from `start` to `end`, partially placed all along or not at all."""

    jobset: str
    domain: str
    start: float
    end: float
    partial: bool

    def as_json(self) -> dict[str, Any]:
        return {
            "jobset": self.jobset,
            "domain": self.domain,
            "from": round(self.start, 3),
            "to": round(self.end, 3),
            "partial": self.partial,
        }


@dataclass
class GangOutcome:
    jobsets: int
    completed_at: dict[str, float] = field(default_factory=dict)
    """JobSet → when its last pod Succeeded."""
    whole_at: dict[str, float] = field(default_factory=dict)
    """JobSet → when all of its pods were first Running or Succeeded."""
    max_partially_placed_jobsets: int = 0
    partial_domain_seconds: float = 0.0
    holdings: list[Holding] = field(default_factory=list)

    @property
    def seconds_to_all_complete(self) -> float | None:
        if len(self.completed_at) < self.jobsets:
            return None
        return max(self.completed_at.values(), default=0.0)

    def fields(self) -> dict[str, Any]:
        """The gang figures of strategies.json (seconds: wall seconds after the JobSets' creation)."""
        done = self.seconds_to_all_complete
        return {
            "jobsets_completed": len(self.completed_at),
            "max_partially_placed_jobsets": self.max_partially_placed_jobsets,
            "partial_domain_seconds": round(self.partial_domain_seconds, 3),
            "seconds_to_all_complete": None if done is None else round(done, 3),
            "jobset_whole_at": {k: round(v, 3) for k, v in sorted(self.whole_at.items())},
            "jobset_completed_at": {k: round(v, 3) for k, v in sorted(self.completed_at.items())},
            "domain_timeline": [h.as_json() for h in self.holdings],
        }


@dataclass
class _Sweep:
    sizes: Mapping[str, int]
    outcome: GangOutcome
    pods: dict[str, PodEvent] = field(default_factory=dict)
    open: dict[tuple[str, str], tuple[float, bool]] = field(default_factory=dict)
    """(JobSet, domain) held now → since when, and whether partially placed since then."""

    def held(self) -> dict[tuple[str, str], bool]:
        """(JobSet, domain) held now → whether that JobSet is partially placed now."""
        domains: dict[str, set[str]] = defaultdict(set)
        progressed: dict[str, int] = defaultdict(int)
        for pod in self.pods.values():
            if pod.stage in HOLDING:
                domains[pod.jobset].add(pod.domain)
            if pod.stage in PROGRESSED:
                progressed[pod.jobset] += 1
        return {
            (jobset, domain): progressed[jobset] < self.sizes.get(jobset, 0)
            for jobset, held in domains.items()
            for domain in held
        }

    def advance(self, start: float, end: float) -> None:
        """The state held from `start` to `end`: count it, and close or open holdings that changed."""
        held = self.held()
        partial = {jobset for (jobset, _), is_partial in held.items() if is_partial}
        self.outcome.max_partially_placed_jobsets = max(
            self.outcome.max_partially_placed_jobsets, len(partial)
        )
        self.outcome.partial_domain_seconds += (end - start) * sum(held.values())
        for key, (since, was_partial) in list(self.open.items()):
            if held.get(key) != was_partial:
                self._close(key, since, start, was_partial)
        for key, is_partial in held.items():
            self.open.setdefault(key, (start, is_partial))

    def _close(self, key: tuple[str, str], since: float, until: float, partial: bool) -> None:
        del self.open[key]
        if until > since:
            self.outcome.holdings.append(Holding(key[0], key[1], since, until, partial))

    def record_milestones(self, at: float) -> None:
        succeeded: dict[str, int] = defaultdict(int)
        progressed: dict[str, int] = defaultdict(int)
        for pod in self.pods.values():
            succeeded[pod.jobset] += pod.stage is PodStage.SUCCEEDED
            progressed[pod.jobset] += pod.stage in PROGRESSED
        for jobset, size in self.sizes.items():
            if progressed[jobset] >= size:
                self.outcome.whole_at.setdefault(jobset, at)
            if succeeded[jobset] >= size:
                self.outcome.completed_at.setdefault(jobset, at)

    def finish(self, end: float) -> None:
        for key, (since, partial) in list(self.open.items()):
            self._close(key, since, end, partial)
        self.outcome.holdings.sort(key=lambda h: (h.domain, h.start, h.jobset))


def gang_outcome(events: Sequence[PodEvent], sizes: Mapping[str, int], end: float) -> GangOutcome:
    """The gang figures of a run from its pod events (any order; those after `end` are ignored) and each
    JobSet's size in pods; the run ended `end` seconds after the JobSets' creation."""
    sweep = _Sweep(sizes, GangOutcome(jobsets=len(sizes)))
    ordered = sorted((e for e in events if e.at <= end), key=lambda e: e.at)
    index = 0
    now = 0.0
    while index < len(ordered):
        at = ordered[index].at
        sweep.advance(now, at)
        while index < len(ordered) and ordered[index].at == at:
            sweep.pods[ordered[index].pod] = ordered[index]
            index += 1
        sweep.record_milestones(at)
        now = at
    sweep.advance(now, end)
    sweep.finish(end)
    return sweep.outcome
