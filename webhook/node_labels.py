"""Every label key the cluster's nodes carry, kept from the node informer's events.

The admission checks that a topology key is a label some node carries (`placement.topology`). Counting keys
as nodes come and go makes that a set lookup at any cluster size, instead of a walk over 15,000 cached
nodes per admission. Called on the informer thread (quick: a few dictionary updates per event), read on
the event loop.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable

from placement.objects import Obj, labels_of


class NodeLabelKeys:
    """An informer `Handler` of nodes: how many nodes carry each label key."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def label_keys(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._counts)

    def on_upsert(self, old: Obj | None, new: Obj) -> None:
        with self._lock:
            if old is not None:
                self._counts.subtract(labels_of(old).keys())
            self._counts.update(labels_of(new).keys())
            self._drop_zeros()

    def on_delete(self, old: Obj) -> None:
        with self._lock:
            self._counts.subtract(labels_of(old).keys())
            self._drop_zeros()

    def on_relist(self, objects: list[Obj]) -> None:
        with self._lock:
            self._counts = _count(objects)

    def _drop_zeros(self) -> None:
        for key in [key for key, count in self._counts.items() if count <= 0]:
            del self._counts[key]


def _count(nodes: Iterable[Obj]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for node in nodes:
        counts.update(labels_of(node).keys())
    return counts
