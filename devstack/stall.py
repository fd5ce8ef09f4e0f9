"""The stall report of `make run` / `make demo`: when the Jobs made no progress for a while, say why once.

Progress is any change of the per-Job statuses (state, pods running, domains, leader bound, resized).
After `after` seconds without any, the watcher asks for a diagnosis (at most every `recheck` seconds
while the stall lasts) and reports it when the picture differs from the last one it reported: the first
time, and again only when the Jobs' states, the reason groups, their counts or the hints change. Within one
stall it keeps the best hint it found: when the cluster's words change into ones devstack has no hint for
(the scheduler reports the GPUs a full pool uses instead of its anti-affinity), the hint found before
stays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from devstack.diagnosis import Diagnosis
from devstack.report import JobStatus, state_summary


class StallWatcher:
    def __init__(self, *, after: float, diagnose: Callable[[], Diagnosis], recheck: float = 1.0):
        if after <= 0:
            raise ValueError(f"the stall report needs a positive number of seconds, got {after}")
        self._after = after
        self._recheck = min(recheck, after)
        self._diagnose = diagnose
        self._progress: tuple[JobStatus, ...] | None = None
        self._since = 0.0
        self._next_check = 0.0
        self._reported: object = None
        self._best_hints: tuple[str, ...] = ()

    def observe(self, statuses: Sequence[JobStatus], now: float) -> str | None:
        """The report to print now, or None (progress, not stalled long enough, or nothing new)."""
        progress = tuple(sorted(statuses, key=lambda status: status.job))
        if progress != self._progress:
            self._progress, self._since, self._next_check = progress, now, now + self._after
            self._best_hints = ()
            return None
        if now < self._next_check:
            return None
        self._next_check = now + self._recheck
        diagnosis = self._diagnose()
        if diagnosis.recognised:
            self._best_hints = diagnosis.hints
        elif self._best_hints:
            diagnosis = replace(diagnosis, hints=self._best_hints)
        summary = state_summary(statuses)
        picture = (summary, diagnosis.fingerprint)
        if picture == self._reported:
            return None
        self._reported = picture
        return f"no progress for {now - self._since:.0f}s ({summary}). Waiting:\n{diagnosis.render()}"
