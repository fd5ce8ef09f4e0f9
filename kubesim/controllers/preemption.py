"""Preemption: the DefaultPreemption PostFilter plugin's dry run, on the scheduler's cache.

kubernetes/kubernetes `pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go` and
`pkg/scheduler/framework/preemption/preemption.go` (`Evaluator.Preempt`), for a pod no node fits:
1. `PodEligibleToPreemptOthers`: never with `preemptionPolicy: Never`; not while a lower-priority pod on
   the pod's nominated node is terminating by preemption (unless that node became unresolvable).
2. `findCandidates`: the potential nodes are those whose filter failure removing pods may resolve
   (status Unschedulable: NodeResourcesFit, InterPodAffinity's anti-affinity and existing pods'
   anti-affinity), not UnschedulableAndUnresolvable (cordoned, taints, node affinity/selector, pod
   affinity rules). `DryRunPreemption` tries them from a random offset until `calculateNumCandidates`
   (10 % of them, at least 100) candidates are found.
3. `SelectVictimsOnNode`: take every lower-priority pod off the node; if the pod still does not fit, the
   node is no candidate; else put them back one by one from the most important (`util.MoreImportantPod`:
   higher priority, then earlier start) and keep back each one the pod still fits with; the rest are the
   victims. Only the node's own pods are removed: a domain another node's pods forbid by anti-affinity is
   not freed (no cross-node preemption). There are no PodDisruptionBudgets in kubesim.
4. `pickOneNodeForPreemption`: fewest PDB violations (none), lowest highest-priority victim, lowest sum of
   priorities, fewest victims, latest earliest start time among the highest-priority victims, first found.
The scheduler then does `prepareCandidate` (DisruptionTarget condition, graceful delete, clearing the
nominations of lower-priority pods on the node) and sets the pod's `status.nominatedNodeName`.
Not modelled: nominated pods are not added to their node when filtering others
(`RunFilterPluginsWithNominatedPods`), asynchronous preemption (alpha in 1.32), extenders.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from .interpod import REASON_AFFINITY, AffinityCheck
from .nodecache import Accounted, SchedulerCache
from .nodefit import first_untolerated
from .nodestate import NodeState, unschedulable_message
from .objects import Obj, is_deleting
from .podinfo import PodInfo

PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
"""v1.PodReasonPreemptionByScheduler: the reason of the victims' DisruptionTarget condition."""
PREEMPT_NEVER = "Never"
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100
"""DefaultPreemptionArgs defaults (pkg/scheduler/apis/config/v1/defaults.go)."""
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
_NOT_STARTED = "~"
"""Sorts after every RFC 3339 time: GetPodStartTime reads a pod without startTime as started now."""


def pod_priority(pod: Obj) -> int:
    """corev1helpers.PodPriority: spec.priority, 0 when unset."""
    priority = (pod.get("spec") or {}).get("priority")
    return priority if isinstance(priority, int) else 0


def start_time(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("startTime") or _NOT_STARTED)


def terminating_by_preemption(pod: Obj) -> bool:
    """podTerminatingByPreemption: being deleted with DisruptionTarget=True, reason PreemptionByScheduler."""
    if not is_deleting(pod):
        return False
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "DisruptionTarget":
            reason = condition.get("reason")
            return bool(condition.get("status") == "True" and reason == PREEMPTION_BY_SCHEDULER)
    return False


@dataclass(frozen=True)
class Victim:
    key: str
    pod: Obj
    priority: int
    started: str

    @classmethod
    def of(cls, key: str, pod: Obj) -> Victim:
        return cls(key, pod, pod_priority(pod), start_time(pod))

    @property
    def importance(self) -> tuple[int, str]:
        """Sort key, most important first (util.MoreImportantPod)."""
        return (-self.priority, self.started)


@dataclass(frozen=True)
class Candidate:
    node: str
    victims: tuple[Victim, ...]
    """Most important first."""


@dataclass(frozen=True)
class Outcome:
    """What PostFilter answers: a candidate to prepare, or why not. `nominate` is the PostFilterResult:
    None keeps the pod's nominatedNodeName, "" clears it, a name sets it."""

    candidate: Candidate | None
    message: str = ""
    nominate: str | None = None


def num_candidates(potential_nodes: int) -> int:
    """calculateNumCandidates."""
    wanted = potential_nodes * MIN_CANDIDATE_NODES_PERCENTAGE // 100
    return min(max(wanted, MIN_CANDIDATE_NODES_ABSOLUTE), potential_nodes)


def _earliest_start_of_highest(victims: tuple[Victim, ...]) -> str:
    """util.GetEarliestPodStartTime: the earliest start among the highest-priority victims."""
    highest = max(v.priority for v in victims)
    return min(v.started for v in victims if v.priority == highest)


def pick_one_node(candidates: list[Candidate]) -> Candidate:
    """pickOneNodeForPreemption's default score functions, each applied to the ties of the previous."""
    scores: list[Callable[[Candidate], object]] = [
        lambda c: -max(v.priority for v in c.victims),
        lambda c: -sum(v.priority + 2**31 for v in c.victims),
        lambda c: -len(c.victims),
        _earliest_start_of_highest_key,
    ]
    remaining = list(candidates)
    for score in scores:
        best = max(score(c) for c in remaining)  # type: ignore[type-var]
        remaining = [c for c in remaining if score(c) == best]
        if len(remaining) == 1:
            break
    return remaining[0]


def _earliest_start_of_highest_key(candidate: Candidate) -> str:
    return _earliest_start_of_highest(candidate.victims)


class Preemption:
    """The dry run on the live cache: pods are taken out and always put back before a call returns."""

    def __init__(self, cache: SchedulerCache, pods: Callable[[str], Obj | None], rng: random.Random) -> None:
        self._cache = cache
        self._pods = pods
        self._rng = rng

    def preempt(self, info: PodInfo, pod: Obj) -> Outcome:
        """Evaluator.Preempt up to the choice of the candidate (the caller prepares it)."""
        priority = pod_priority(pod)
        ineligible = self._ineligible(info, pod, priority)
        if ineligible:
            return Outcome(None, f"preemption: {ineligible}")
        order, _ = self._cache.node_order()
        potential = [name for name in order if self._resolvable(info, self._cache.nodes[name])]
        statuses: Counter[str] = Counter()
        candidates: list[Candidate] = []
        if potential:
            wanted = num_candidates(len(potential))
            offset = self._rng.randrange(len(potential))
            for i in range(len(potential)):
                name = potential[(offset + i) % len(potential)]
                victims, reason = self.select_victims(info, priority, name)
                if victims:
                    candidates.append(Candidate(name, tuple(victims)))
                    if len(candidates) >= wanted:
                        break
                else:
                    statuses[reason] += 1
        if not candidates:
            if len(order) > len(potential):
                statuses[NOT_HELPFUL] += len(order) - len(potential)
            return Outcome(None, f"preemption: {unschedulable_message(len(order), statuses)}", nominate="")
        chosen = pick_one_node(candidates)
        return Outcome(chosen, nominate=chosen.node)

    def _ineligible(self, info: PodInfo, pod: Obj, priority: int) -> str:
        """PodEligibleToPreemptOthers: why not, or ""."""
        if (pod.get("spec") or {}).get("preemptionPolicy") == PREEMPT_NEVER:
            return NOT_ELIGIBLE_NEVER
        nominated = str((pod.get("status") or {}).get("nominatedNodeName") or "")
        state = self._cache.nodes.get(nominated) if nominated else None
        if state is None or not self._resolvable(info, state):
            return ""
        for key in state.pods:
            other = self._pods(key)
            if other is not None and pod_priority(other) < priority and terminating_by_preemption(other):
                return NOT_ELIGIBLE_TERMINATING
        return ""

    def _resolvable(self, info: PodInfo, state: NodeState) -> bool:
        """Whether the node's first failing filter said Unschedulable (removing pods may help) rather than
        UnschedulableAndUnresolvable; a node that fits now is not in the failure map either."""
        if state.unschedulable and not info.tolerates_unschedulable:
            return False
        if state.hard_taints and first_untolerated(info.tolerations, state.hard_taints) is not None:
            return False
        if info.node_affinity.active and not info.node_affinity.matches(state.name, state.labels):
            return False
        if state.requested.shortfalls(info.request, state.allocatable):
            return True
        reason = self._affinity_reason(info, state)
        return reason is not None and reason != REASON_AFFINITY

    def _affinity_reason(self, info: PodInfo, state: NodeState) -> str | None:
        check = AffinityCheck(
            self._cache.affinity, info.namespace, info.labels, info.affinity_terms, info.anti_terms
        )
        return None if check.skip else check.reason(state.labels)

    def _misfit(self, info: PodInfo, state: NodeState) -> str | None:
        """The first filter that rejects the pod on the node as the cache stands, or None."""
        shortfalls = state.requested.shortfalls(info.request, state.allocatable)
        if shortfalls:
            return shortfalls[0]
        return self._affinity_reason(info, state)

    def select_victims(self, info: PodInfo, priority: int, node: str) -> tuple[list[Victim], str]:
        """SelectVictimsOnNode: (victims, "") or ([], why the node is no candidate)."""
        state = self._cache.nodes[node]
        potential = []
        for key in sorted(state.pods):
            other = self._pods(key)
            if other is not None and pod_priority(other) < priority:
                potential.append(Victim.of(key, other))
        if not potential:
            return [], NO_VICTIMS
        taken: dict[str, Accounted] = {}
        try:
            for victim in potential:
                accounted = self._cache.take_out(victim.key)
                if accounted is not None:
                    taken[victim.key] = accounted
            reason = self._misfit(info, state)
            if reason is not None:
                return [], reason
            victims: list[Victim] = []
            for victim in sorted(potential, key=lambda v: v.importance):
                accounted = taken.pop(victim.key, None)
                if accounted is None:
                    continue
                self._cache.put_back(accounted)
                if self._misfit(info, state) is None:
                    continue  # reprieved
                self._cache.take_out(victim.key)
                taken[victim.key] = accounted
                victims.append(victim)
            return victims, ""
        finally:
            for accounted in taken.values():
                self._cache.put_back(accounted)
