"""Scheduling constraints: leader affinity terms, follower nodeSelector, the leader's domain.

- `leader_affinity_terms(job_key, topology_key)`: (podAffinity term, podAntiAffinity term). The affinity
  keeps every pod of the Job in one domain; the anti-affinity keeps other exclusive Jobs out of it.
  Both use `namespaceSelector: {}` (all namespaces), as JobSet does.
- `add_leader_affinity(pod_spec, job_key, topology_key)`: merges those terms into the spec's existing
  affinity in place, never dropping what is there; adding them twice changes nothing.
- `leader_domain(topology_key, node)`: the value of the topology label on the leader's Node (None if unset).
- `follower_node_selector(topology_key, node)`: `{topology_key: domain}`, the follower's nodeSelector entry.
"""

from __future__ import annotations

from typing import Any

from placement.constants import JOB_KEY_LABEL
from placement.objects import Obj, labels_of

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def leader_affinity_terms(job_key: str, topology_key: str) -> tuple[Obj, Obj]:
    affinity_term: Obj = {
        "labelSelector": {
            "matchExpressions": [{"key": JOB_KEY_LABEL, "operator": "In", "values": [job_key]}]
        },
        "topologyKey": topology_key,
        "namespaceSelector": {},
    }
    anti_affinity_term: Obj = {
        "labelSelector": {
            "matchExpressions": [
                {"key": JOB_KEY_LABEL, "operator": "Exists"},
                {"key": JOB_KEY_LABEL, "operator": "NotIn", "values": [job_key]},
            ]
        },
        "topologyKey": topology_key,
        "namespaceSelector": {},
    }
    return affinity_term, anti_affinity_term


def _ensure_dict(parent: Obj, key: str) -> Obj:
    value = parent.get(key)
    if not isinstance(value, dict):
        value = {}
        parent[key] = value
    return value


def _append_term(affinity: Obj, kind: str, term: Obj) -> None:
    section = _ensure_dict(affinity, kind)
    terms: Any = section.get(REQUIRED)
    if not isinstance(terms, list):
        terms = []
        section[REQUIRED] = terms
    if term not in terms:
        terms.append(term)


def add_leader_affinity(pod_spec: Obj, job_key: str, topology_key: str) -> None:
    affinity_term, anti_affinity_term = leader_affinity_terms(job_key, topology_key)
    affinity = _ensure_dict(pod_spec, "affinity")
    _append_term(affinity, "podAffinity", affinity_term)
    _append_term(affinity, "podAntiAffinity", anti_affinity_term)


def leader_domain(topology_key: str, node: Obj) -> str | None:
    value = labels_of(node).get(topology_key)
    return value or None


def follower_node_selector(topology_key: str, node: Obj) -> dict[str, str]:
    """Empty when the node lacks the topology label (the caller must reject, not pin to nothing)."""
    domain = leader_domain(topology_key, node)
    return {topology_key: domain} if domain else {}
