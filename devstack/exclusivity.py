"""Exclusivity, checked from pod placement: every Job whole in one domain, no domain shared at once.

A replay over pod states in API-server order (a watch stream, or one final list): a pod occupies its
node's domain from the moment it is bound until it is terminal or deleted. Two Jobs occupying the same
domain at the same time is a violation; so is one Job spread over two domains. A domain used by Job A
and, after A finished, by Job B (the contended case) is not. A Job JobSet restarted (recreated under the same
name, labelled with the new restart attempt) may land in another domain, and its previous attempt's pods,
still terminating, are the same Job: one domain per (Job, attempt), and sharing is between Jobs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kubekit.keys import object_key
from placement.constants import JOBSET_RESTART_ATTEMPT_LABEL
from placement.objects import Obj, is_finished_pod, labels_of, node_name, owner_job_key


@dataclass(frozen=True)
class PodState:
    """What the replay needs from one pod object at one point in time."""

    key: str
    """namespace/name."""
    job: str
    """namespace/job name ("" for pods not owned by a Job: ignored)."""
    node: str
    active: bool
    """Bound, not terminal and not deleted."""
    attempt: str = ""
    """JobSet's restart attempt of the Job ("" outside a JobSet)."""


def pod_state(pod: Obj, *, deleted: bool = False) -> PodState:
    node = node_name(pod) or ""
    active = bool(node) and not deleted and not is_finished_pod(pod)
    attempt = labels_of(pod).get(JOBSET_RESTART_ATTEMPT_LABEL, "")
    return PodState(object_key(pod), owner_job_key(pod) or "", node, active, attempt)


@dataclass
class ExclusivityReplay:
    """Feed pod states in order; read `violations` (and the details) at any point."""

    node_domain: Mapping[str, str]
    """node name → topology domain (the value of the topology label on that node)."""
    _active: dict[str, PodState] = field(default_factory=dict)
    _job_domains: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    _shared: set[tuple[str, str, str]] = field(default_factory=set)

    def observe(self, state: PodState) -> None:
        if not state.job:
            return
        if not state.active:
            self._active.pop(state.key, None)
            return
        domain = self.node_domain.get(state.node, f"<unknown node {state.node}>")
        self._job_domains[_attempt_key(state)].add(domain)
        for other in self._active.values():
            if other.job != state.job and self.node_domain.get(other.node) == domain:
                first, second = sorted((state.job, other.job))
                self._shared.add((domain, first, second))
        self._active[state.key] = state

    def observe_all(self, states: Iterable[PodState]) -> None:
        for state in states:
            self.observe(state)

    @property
    def split_jobs(self) -> dict[str, set[str]]:
        """Jobs whose pods ran in more than one domain."""
        return {job: domains for job, domains in self._job_domains.items() if len(domains) > 1}

    @property
    def shared_domains(self) -> set[tuple[str, str, str]]:
        """(domain, job A, job B) for every pair of Jobs that occupied one domain at the same time."""
        return set(self._shared)

    @property
    def violations(self) -> int:
        return sum(len(d) - 1 for d in self.split_jobs.values()) + len(self._shared)

    def describe(self) -> list[str]:
        problems = [f"Job {job} spans domains {sorted(d)}" for job, d in sorted(self.split_jobs.items())]
        problems += [f"domain {d} shared by {a} and {b}" for d, a, b in sorted(self._shared)]
        return problems


def _attempt_key(state: PodState) -> str:
    return f"{state.job} (restart attempt {state.attempt})" if state.attempt else state.job


def node_domains(nodes: Iterable[Obj], topology_key: str) -> dict[str, str]:
    return {object_key(node): labels_of(node).get(topology_key, "") for node in nodes}
