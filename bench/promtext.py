"""Counters from a Prometheus text page, and what they grew by between two scrapes (pure functions).

A run scrapes kube-apiserver's and kube-scheduler's `/metrics` before and after its window: the difference
is what the window added (counters only grow while the process lives, and a run never outlives it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

Labels = frozenset[tuple[str, str]]


@dataclass(frozen=True)
class Samples:
    """Every sample of a page: (sample name, its labels) → value."""

    values: Mapping[tuple[str, Labels], float]

    @classmethod
    def parse(cls, text: str) -> Samples:
        values: dict[tuple[str, Labels], float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                values[sample.name, frozenset(sample.labels.items())] = sample.value
        return cls(values)

    def minus(self, earlier: Samples) -> Samples:
        """What each sample grew by since `earlier` (a sample new since then counts from 0)."""
        return Samples({key: value - earlier.values.get(key, 0.0) for key, value in self.values.items()})

    def total(self, metric: str, /, **labels: str) -> float:
        """The sum of `metric`'s samples whose labels include `labels`."""
        return sum(self.by_label(metric, "", **labels).values())

    def by_label(self, metric: str, label: str, /, **labels: str) -> dict[str, float]:
        """`metric`'s samples whose labels include `labels`, summed per value of `label`."""
        wanted = set(labels.items())
        sums: dict[str, float] = {}
        for (sample, have), value in self.values.items():
            if sample == metric and wanted <= have:
                key = dict(have).get(label, "")
                sums[key] = sums.get(key, 0.0) + value
        return sums
