"""The counters kubekit's machinery increments, as the caller passes them in: a controller's or an event
recorder's metrics are named by the binary that runs it (prometheus_client's `Counter` with one label fits),
so kubekit names no metric."""

from __future__ import annotations

from typing import Protocol


class Incrementable(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class LabelledCounter(Protocol):
    """A counter with one label: `counter.labels("reason").inc()`."""

    def labels(self, *values: str) -> Incrementable: ...
