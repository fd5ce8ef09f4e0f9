"""Every label key the cluster's nodes carry, and each node's room, kept from the node informer's events.

The admission checks that a topology key is a label some node carries (`placement.topology`). Counting keys
as nodes come and go makes that a set lookup at any cluster size, instead of a walk over 15,000 cached
nodes per admission. The capacity warnings (`placement.capacity`) read each node's labels, whether it is
cordoned and its allocatable (`NodeRoom`, parsed once per node event). Called on the informer thread
(quick: a few dictionary updates per event), read on the event loop.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable

from kubekit.projection import FieldProjection
from placement.cached_fields import NODE_FIELDS
from placement.capacity import NodeRoom, NodeRooms, node_room, parse_allocatable
from placement.objects import Obj, labels_of, metadata, section

ROOMS_REFRESH_SECONDS = 5.0


class NodeLabelKeys:
    """An informer `Handler` of nodes, and its projection: how many nodes carry each label key, and each
    node's room."""

    def __init__(self, refresh_seconds: float = ROOMS_REFRESH_SECONDS) -> None:
        self._refresh_seconds = refresh_seconds
        self._counts: Counter[str] = Counter()
        self._rooms: dict[str, NodeRoom] = {}
        self._arrived: dict[str, NodeRoom] = {}
        """Rooms of nodes projected and not yet handed to `on_upsert`/`on_relist`, by name."""
        self._projection = FieldProjection(NODE_FIELDS)
        self._listed = NodeRooms()
        """`_rooms` as one look, with what was computed of it; built again at most every
        `refresh_seconds` while nodes change (the warnings may be that late)."""
        self._changed = False
        self._listed_at = 0.0
        self._lock = threading.Lock()

    def label_keys(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._counts)

    def project(self, node: Obj) -> Obj:
        """The informer's projection (`NODE_FIELDS`: labels), noting the node's room first: the cache keeps
        neither spec nor status, so whether it is cordoned and its allocatable (parsed into ints) are read
        here, once. A node projected before (labels only) notes nothing: projecting stays idempotent."""
        projected = self._projection(node)
        if "spec" in node or "status" in node:
            room = node_room(projected, parse_allocatable(node), schedulable=_schedulable(node))
            with self._lock:
                self._arrived[_name(node)] = room
        return projected

    def _room(self, node: Obj) -> NodeRoom:
        """Call with the lock held."""
        name = _name(node)
        room = self._arrived.pop(name, None)
        if room is None and ("spec" in node or "status" in node):  # given whole, not through `project`
            room = node_room(node)
        if room is None:  # nothing arrived with it: what was known of the node, else nothing
            room = self._rooms.get(name) or NodeRoom(labels_of(node), True, {})
        labels = metadata(node).get("labels")
        shared = labels if isinstance(labels, dict) else {}  # the cached node's own map: one copy
        return NodeRoom(shared, room.schedulable, room.allocatable)

    def rooms(self) -> NodeRooms:
        with self._lock:
            now = time.monotonic()
            if self._changed and (now - self._listed_at >= self._refresh_seconds or not self._listed):
                self._listed, self._listed_at, self._changed = NodeRooms(self._rooms.values()), now, False
            return self._listed

    def on_upsert(self, old: Obj | None, new: Obj) -> None:
        with self._lock:
            if old is not None:
                self._counts.subtract(labels_of(old).keys())
            room = self._room(new)
            if old is not None:
                self._rooms.pop(_name(old), None)
            self._counts.update(labels_of(new).keys())
            self._rooms[_name(new)] = room
            self._changed = True
            self._drop_zeros()

    def on_delete(self, old: Obj) -> None:
        with self._lock:
            self._counts.subtract(labels_of(old).keys())
            self._rooms.pop(_name(old), None)
            self._arrived.pop(_name(old), None)
            self._changed = True
            self._drop_zeros()

    def on_relist(self, objects: list[Obj]) -> None:
        with self._lock:
            self._counts = _count(objects)
            self._rooms = {_name(node): self._room(node) for node in objects}
            self._arrived.clear()
            self._changed = True

    def _drop_zeros(self) -> None:
        for key in [key for key, count in self._counts.items() if count <= 0]:
            del self._counts[key]


def _schedulable(node: Obj) -> bool:
    return not section(node, "spec").get("unschedulable")


def _name(node: Obj) -> str:
    return str(metadata(node).get("name") or "")


def _count(nodes: Iterable[Obj]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for node in nodes:
        counts.update(labels_of(node).keys())
    return counts
