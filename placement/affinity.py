"""Scheduling constraints: leader affinity terms, follower nodeSelector, the leader's domain.

- `pod_priority(pod)`: the pod's `spec.priority` as the label value (`DEFAULT_PRIORITY` when unset).
- `leader_affinity_terms(job_key, topology_key, priority)`: (podAffinity term, podAntiAffinity term). The
  affinity keeps every pod of the Job in one domain; the anti-affinity keeps the other exclusive Jobs of the
  same priority out of it (JobSet's term since its #687: exclusivity holds within a priority level, a
  higher level takes domains by preemption). The affinity term has no `namespaceSelector`: it selects pods
  of the leader's own namespace only, so no pod of another namespace that carries the key (any pod may
  carry any label) can pull the leader to itself; the anti-affinity keeps `namespaceSelector: {}` (every
  namespace), since exclusivity is cluster-wide. JobSet puts `{}` on both (docs/jobset-parity.md).
- `add_leader_affinity(pod_spec, job_key, topology_key, priority)`: merges those terms into the spec's
  existing affinity in place, never dropping what is there; adding them twice changes nothing.
- `leader_domain(topology_key, node)`: the value of the topology label on the leader's Node (None if unset).
- `follower_node_selector(topology_key, node)`: `{topology_key: domain}`, the follower's nodeSelector entry.
"""

from __future__ import annotations

from typing import Any

from placement.constants import DEFAULT_PRIORITY, JOB_KEY_LABEL, PRIORITY_LABEL
from placement.objects import Obj, label, section

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def pod_priority(pod: Obj) -> str:
    """`spec.priority`, which the Priority admission plugin sets before any mutating webhook runs."""
    priority = section(pod, "spec").get("priority")
    return str(priority if isinstance(priority, int) and not isinstance(priority, bool) else DEFAULT_PRIORITY)


def leader_affinity_terms(job_key: str, topology_key: str, priority: str) -> tuple[Obj, Obj]:
    affinity_term: Obj = {
        "labelSelector": {
            "matchExpressions": [{"key": JOB_KEY_LABEL, "operator": "In", "values": [job_key]}]
        },
        "topologyKey": topology_key,
    }
    anti_affinity_term: Obj = {
        "labelSelector": {
            "matchExpressions": [
                {"key": JOB_KEY_LABEL, "operator": "Exists"},
                {"key": JOB_KEY_LABEL, "operator": "NotIn", "values": [job_key]},
                {"key": PRIORITY_LABEL, "operator": "In", "values": [priority]},
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


def add_leader_affinity(pod_spec: Obj, job_key: str, topology_key: str, priority: str) -> None:
    affinity_term, anti_affinity_term = leader_affinity_terms(job_key, topology_key, priority)
    affinity = _ensure_dict(pod_spec, "affinity")
    _append_term(affinity, "podAffinity", affinity_term)
    _append_term(affinity, "podAntiAffinity", anti_affinity_term)


def leader_domain(topology_key: str, node: Obj) -> str | None:
    return label(node, topology_key) or None


def follower_node_selector(topology_key: str, node: Obj) -> dict[str, str]:
    """Empty when the node lacks the topology label (the caller must reject, not pin to nothing)."""
    domain = leader_domain(topology_key, node)
    return {topology_key: domain} if domain else {}
