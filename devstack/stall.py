"""The stall report of `make run` / `make demo`: when the Jobs made no progress for a while, say why once.

Progress is any change of the per-Job statuses (state, pods running, domains, leader bound, resized).
After `after` seconds without any, the watcher asks for a diagnosis (at most every `recheck` seconds
while the stall lasts) and reports it when the picture differs from the last one it reported: the first
time, and again only when the Jobs' states, the reason groups, their counts or the hints change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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

    def observe(self, statuses: Sequence[JobStatus], now: float) -> str | None:
        """The report to print now, or None (progress, not stalled long enough, or nothing new)."""
        progress = tuple(sorted(statuses, key=lambda status: status.job))
        if progress != self._progress:
            self._progress, self._since, self._next_check = progress, now, now + self._after
            return None
        if now < self._next_check:
            return None
        self._next_check = now + self._recheck
        diagnosis = self._diagnose()
        summary = state_summary(statuses)
        picture = (summary, diagnosis.fingerprint)
        if picture == self._reported:
            return None
        self._reported = picture
        return f"no progress for {now - self._since:.0f}s ({summary}). Waiting:\n{diagnosis.render()}"
