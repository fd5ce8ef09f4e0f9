"""The scheduler's cache: nodes with their requested resources, assumed/bound pods, and the indexes a
scheduling cycle reads (upstream's pkg/scheduler/backend/cache plus the inter-pod affinity index)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from .interpod import AffinityIndex, AffinityTerm, required_terms
from .nodefit import Resources, pod_requests
from .nodestate import NodeState
from .objects import Obj, labels_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Accounted:
    """A pod's accounting on its node, taken out for a preemption dry run and put back after."""

    key: str
    node: str
    request: Resources
    namespace: str
    labels: dict[str, str]
    anti_terms: list[AffinityTerm]


class SchedulerCache:
    def __init__(self) -> None:
        self.nodes: dict[str, NodeState] = {}
        self.affinity = AffinityIndex()
        self.special: set[str] = set()
        """Cordoned or tainted nodes (the only ones the first two filters can reject)."""
        self._order: list[str] = []
        self._position: dict[str, int] = {}
        self._order_stale = False
        self._label_index: dict[tuple[str, str], set[str]] = {}
        self._assigned: dict[str, tuple[str, Resources]] = {}
        self._nominated: dict[str, dict[str, tuple[int, Resources]]] = {}
        """node -> pod key -> (priority, request) of the pending pods nominated to it (the nominator)."""
        self._nominated_to: dict[str, str] = {}

    # --- nodes -----------------------------------------------------------------------------------------

    def node_order(self) -> tuple[list[str], dict[str, int]]:
        """Node names in the order cycles search them (by name), and each name's position."""
        if self._order_stale:
            self._order = sorted(self.nodes)
            self._position = {name: i for i, name in enumerate(self._order)}
            self._order_stale = False
        return self._order, self._position

    def set_node(self, node: Obj) -> Obj | None:
        """Add or refresh a node; returns the previous version (None when the node is new)."""
        name = str(node["metadata"]["name"])
        state = self.nodes.get(name)
        previous = None if state is None else state.obj
        if state is None:
            state = NodeState(name, {}, node, Resources())
            self.nodes[name] = state
            self._order_stale = True
        else:
            self._unindex(state)
        state.refresh(node)
        for item in state.labels.items():
            self._label_index.setdefault(item, set()).add(name)
        if state.special:
            self.special.add(name)
        else:
            self.special.discard(name)
        self.affinity.set_node(name, state.labels)
        return previous

    def remove_node(self, name: str) -> None:
        state = self.nodes.pop(name, None)
        if state is None:
            return
        self._unindex(state)
        self.special.discard(name)
        self._order_stale = True
        for key in list(state.pods):
            self._assigned.pop(key, None)
        self.affinity.remove_node(name)

    def nodes_labelled(self, selector: Iterable[tuple[str, str]]) -> set[str]:
        """Names of the nodes carrying every `key=value` pair (a non-empty selector)."""
        matching: set[str] | None = None
        for item in selector:
            names = self._label_index.get(item, set())
            matching = set(names) if matching is None else matching & names
            if not matching:
                return set()
        return matching or set()

    def _unindex(self, state: NodeState) -> None:
        for item in state.labels.items():
            names = self._label_index.get(item)
            if names is not None:
                names.discard(state.name)
                if not names:
                    del self._label_index[item]

    # --- nominated pods (backend/queue/nominator.go) ------------------------------------------------------

    def set_nomination(
        self, key: str, node: str | None, priority: int = 0, request: Resources | None = None
    ) -> None:
        """Record (or, with `node` None, forget) that a pending pod is nominated to `node`."""
        previous = self._nominated_to.pop(key, None)
        if previous is not None:
            on_node = self._nominated.get(previous, {})
            on_node.pop(key, None)
            if not on_node:
                self._nominated.pop(previous, None)
        if node:
            self._nominated_to[key] = node
            self._nominated.setdefault(node, {})[key] = (priority, request or Resources(pods=1))

    def nominated_request(self, node: str, priority: int, exclude: str) -> Resources | None:
        """What the pods nominated to `node` with at least `priority` (other than `exclude`) request: what
        RunFilterPluginsWithNominatedPods adds to the node before filtering a pod on it; None when none."""
        total: Resources | None = None
        for key, (nominated_priority, request) in self._nominated.get(node, {}).items():
            if key != exclude and nominated_priority >= priority:
                total = request if total is None else total + request
        return total

    def has_any_nominations(self) -> bool:
        return bool(self._nominated)

    # --- pods ------------------------------------------------------------------------------------------

    def is_assigned(self, key: str) -> bool:
        return key in self._assigned

    def assign(
        self, key: str, pod: Obj, node_name: str, parsed: tuple[Resources, list[AffinityTerm]] | None = None
    ) -> None:
        """Account a pod on a node (assumed by this scheduler, or seen bound); `parsed` is its request and
        anti-affinity terms when the caller has them already."""
        current = self._assigned.get(key)
        if current is not None and current[0] == node_name:
            return
        if current is not None:
            self.release(key)
        if parsed is not None:
            request, anti_terms = parsed
        else:
            try:
                request, anti_terms = pod_requests(pod), required_terms(pod, "podAntiAffinity")
            except ValueError as error:
                log.warning("pod %s on %s: ignoring malformed spec: %s", key, node_name, error)
                request, anti_terms = Resources(pods=1), []
        self._assigned[key] = (node_name, request)
        state = self.nodes.get(node_name)
        if state is not None:
            state.requested = state.requested + request
            state.account()
            state.pods.add(key)
        namespace = str(pod["metadata"].get("namespace") or "default")
        self.affinity.add_pod(key, node_name, namespace, labels_of(pod), anti_terms)

    def take_out(self, key: str) -> Accounted | None:
        """Remove a pod's accounting (NodeInfo.RemovePod + InterPodAffinity's RemovePod), to `put_back`."""
        current = self._assigned.get(key)
        placed = self.affinity.placed(key)
        if current is None or placed is None:
            return None
        namespace, labels, anti_terms = placed
        self.release(key)
        return Accounted(key, current[0], current[1], namespace, labels, anti_terms)

    def put_back(self, accounted: Accounted) -> None:
        self._assigned[accounted.key] = (accounted.node, accounted.request)
        state = self.nodes.get(accounted.node)
        if state is not None:
            state.requested = state.requested + accounted.request
            state.account()
            state.pods.add(accounted.key)
        self.affinity.add_pod(
            accounted.key, accounted.node, accounted.namespace, accounted.labels, accounted.anti_terms
        )

    def release(self, key: str) -> bool:
        """Forget a pod's accounting; returns whether it was accounted."""
        current = self._assigned.pop(key, None)
        if current is None:
            return False
        node_name, request = current
        state = self.nodes.get(node_name)
        if state is not None:
            state.requested = state.requested - request
            state.account()
            state.pods.discard(key)
        self.affinity.remove_pod(key)
        return True
