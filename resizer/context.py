"""What every reconciler of the resizer is given (controller-runtime's reconciler fields: client, cache,
recorder)."""

from __future__ import annotations

from dataclasses import dataclass

from resizer.api import Api
from resizer.bind_times import BindTimes
from resizer.caches import Caches
from resizer.gang_index import GangIndex
from resizer.metrics import Metrics
from resizer.recorder import Recorder


@dataclass(frozen=True)
class Context:
    api: Api
    caches: Caches
    """The informers' caches: read by every reconciler, owned by none."""
    gangs: GangIndex
    bind_times: BindTimes
    metrics: Metrics
    recorder: Recorder
    """Told what each reconciler did (the Events' seam)."""
    dry_run: bool
    """Decide and log what would be done; write nothing."""


class WithContext:
    """A reconciler's share of its `Context`, as fields."""

    def __init__(self, context: Context) -> None:
        self.api = context.api
        self.caches = context.caches
        self.gangs = context.gangs
        self.bind_times = context.bind_times
        self.metrics = context.metrics
        self.recorder = context.recorder
        self.dry_run = context.dry_run
