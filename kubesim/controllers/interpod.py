"""Inter-pod affinity: required pod affinity / anti-affinity terms and an index that answers them fast.

Semantics follow kube-scheduler's InterPodAffinity filter:
- a node passes an affinity term when its topology domain (node label `topologyKey`) already holds a pod
  matching the term; the first pod of a group passes anyway when no pod anywhere matches any of its terms
  and the pod matches its own terms;
- a node fails an anti-affinity term when its domain holds a matching pod;
- symmetry: a node fails when its domain holds a pod whose own anti-affinity term matches the new pod.
A term's namespaces are its `namespaces` list plus those its `namespaceSelector` selects (`{}` = all);
with neither, the namespace of the pod carrying the term.

The index keeps, per topology key in use and per domain, per-namespace counts of label values, so a
term whose selector looks at a single label key (JobSet's and this project's terms) is answered from counts,
without visiting pods. Existing anti-affinity terms are grouped by identical term, each with the domains
it occupies, so the symmetry check costs one selector match per distinct term.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kubesim.apiserver.selectors import LabelSelector, selector_from_dict

from .objects import Obj

AffinityKind = Literal["podAffinity", "podAntiAffinity"]
NamespaceLabels = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class AffinityTerm:
    topology_key: str
    selector: LabelSelector
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None = None
    """None: only `namespaces`; an empty selector selects every namespace."""

    def matches_namespace(self, namespace: str, namespace_labels: NamespaceLabels) -> bool:
        if namespace in self.namespaces:
            return True
        if self.namespace_selector is None:
            return False
        if self.namespace_selector.empty:
            return True
        return self.namespace_selector.matches(namespace_labels.get(namespace, {}))

    def matches_pod(
        self, namespace: str, labels: Mapping[str, str], namespace_labels: NamespaceLabels
    ) -> bool:
        return self.matches_namespace(namespace, namespace_labels) and self.selector.matches(labels)


def parse_term(term: Mapping[str, Any], pod_namespace: str) -> AffinityTerm:
    """Raises ValueError (with the offending field) on a malformed term."""
    topology_key = term.get("topologyKey")
    if not topology_key:
        raise ValueError("pod affinity term: topologyKey is required")
    try:
        selector = selector_from_dict(term.get("labelSelector"))
        raw_ns_selector = term.get("namespaceSelector")
        ns_selector = None if raw_ns_selector is None else selector_from_dict(raw_ns_selector)
    except Exception as error:
        raise ValueError(f"pod affinity term: {getattr(error, 'message', error)}") from error
    namespaces = frozenset(str(n) for n in term.get("namespaces") or [])
    if not namespaces and ns_selector is None:
        namespaces = frozenset({pod_namespace})
    return AffinityTerm(str(topology_key), selector, namespaces, ns_selector)


def required_terms(pod: Obj, kind: AffinityKind) -> list[AffinityTerm]:
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    raw = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    return [parse_term(term, namespace) for term in raw]


@dataclass
class _Domain:
    pods: set[str] = field(default_factory=set)
    totals: Counter[str] = field(default_factory=Counter)
    """Pods per namespace."""
    values: dict[str, dict[str, Counter[str]]] = field(default_factory=dict)
    """namespace -> label key -> label value -> pods."""


@dataclass
class _PlacedPod:
    node: str
    namespace: str
    labels: dict[str, str]
    anti_terms: list[AffinityTerm]


class AffinityIndex:
    def __init__(self) -> None:
        self.namespace_labels: dict[str, dict[str, str]] = {}
        self._node_labels: dict[str, dict[str, str]] = {}
        self._pods: dict[str, _PlacedPod] = {}
        self._domains: dict[str, dict[str, _Domain]] = {}
        self._anti: dict[AffinityTerm, Counter[str]] = {}

    # --- maintenance -----------------------------------------------------------------------------------

    def set_node(self, name: str, labels: Mapping[str, str]) -> None:
        if self._node_labels.get(name) == labels:
            return
        moved = [(key, placed) for key, placed in self._pods.items() if placed.node == name]
        for key, _ in moved:
            self.remove_pod(key)
        self._node_labels[name] = dict(labels)
        for key, placed in moved:
            self.add_pod(key, placed.node, placed.namespace, placed.labels, placed.anti_terms)

    def remove_node(self, name: str) -> None:
        for key in [k for k, placed in self._pods.items() if placed.node == name]:
            self.remove_pod(key)
        self._node_labels.pop(name, None)

    def add_pod(
        self, key: str, node: str, namespace: str, labels: Mapping[str, str], anti_terms: list[AffinityTerm]
    ) -> None:
        if key in self._pods:
            self.remove_pod(key)
        placed = _PlacedPod(node, namespace, dict(labels), anti_terms)
        self._pods[key] = placed
        node_labels = self._node_labels.get(node, {})
        for topology_key, domains in self._domains.items():
            value = node_labels.get(topology_key)
            if value is not None:
                self._count(domains.setdefault(value, _Domain()), key, placed, +1)
        for term in anti_terms:
            value = node_labels.get(term.topology_key)
            if value is not None:
                self._anti.setdefault(term, Counter())[value] += 1

    def remove_pod(self, key: str) -> None:
        placed = self._pods.pop(key, None)
        if placed is None:
            return
        node_labels = self._node_labels.get(placed.node, {})
        for topology_key, domains in self._domains.items():
            value = node_labels.get(topology_key)
            if value is not None and value in domains:
                self._count(domains[value], key, placed, -1)
        for term in placed.anti_terms:
            value = node_labels.get(term.topology_key)
            domains_of_term = self._anti.get(term)
            if value is None or domains_of_term is None:
                continue
            domains_of_term[value] -= 1
            if domains_of_term[value] <= 0:
                del domains_of_term[value]
            if not domains_of_term:
                del self._anti[term]

    def track(self, topology_key: str) -> None:
        """Start keeping per-domain counts for a topology key (done once, on first use)."""
        if topology_key in self._domains:
            return
        domains: dict[str, _Domain] = {}
        self._domains[topology_key] = domains
        for key, placed in self._pods.items():
            value = self._node_labels.get(placed.node, {}).get(topology_key)
            if value is not None:
                self._count(domains.setdefault(value, _Domain()), key, placed, +1)

    @staticmethod
    def _count(domain: _Domain, key: str, placed: _PlacedPod, delta: int) -> None:
        if delta > 0:
            domain.pods.add(key)
        else:
            domain.pods.discard(key)
        domain.totals[placed.namespace] += delta
        per_key = domain.values.setdefault(placed.namespace, {})
        for label, value in placed.labels.items():
            counter = per_key.setdefault(label, Counter())
            counter[value] += delta
            if counter[value] <= 0:
                del counter[value]

    # --- queries ---------------------------------------------------------------------------------------

    def domain_has_match(self, term: AffinityTerm, domain_value: str) -> bool:
        """Whether the domain `term.topology_key=domain_value` holds a pod matching `term`."""
        self.track(term.topology_key)
        domain = self._domains[term.topology_key].get(domain_value)
        if domain is None or not domain.pods:
            return False
        return self._domain_matches(term, domain)

    def any_match(self, term: AffinityTerm) -> bool:
        """Whether any domain of `term.topology_key` holds a pod matching `term`."""
        self.track(term.topology_key)
        return any(
            d.pods and self._domain_matches(term, d) for d in self._domains[term.topology_key].values()
        )

    def forbidden_by_existing(
        self, namespace: str, labels: Mapping[str, str]
    ) -> tuple[dict[str, set[str]], int]:
        """Domains (per topology key) where an existing pod's anti-affinity term matches this pod, and the
        number of distinct terms evaluated."""
        forbidden: dict[str, set[str]] = {}
        for term, domains in self._anti.items():
            if domains and term.matches_pod(namespace, labels, self.namespace_labels):
                forbidden.setdefault(term.topology_key, set()).update(domains)
        return forbidden, len(self._anti)

    def _domain_matches(self, term: AffinityTerm, domain: _Domain) -> bool:
        requirements = term.selector.requirements
        keys = {r.key for r in requirements}
        for namespace, total in domain.totals.items():
            if total <= 0 or not term.matches_namespace(namespace, self.namespace_labels):
                continue
            if not requirements:
                return True
            if len(keys) == 1:
                (label,) = keys
                values = domain.values.get(namespace, {}).get(label, Counter())
                for value, count in values.items():
                    if count > 0 and all(r.matches({label: value}) for r in requirements):
                        return True
                if total - sum(values.values()) > 0 and all(r.matches({}) for r in requirements):
                    return True
                continue
            for key in domain.pods:
                placed = self._pods[key]
                if placed.namespace == namespace and term.selector.matches(placed.labels):
                    return True
        return False
