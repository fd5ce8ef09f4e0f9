"""One scheduling cycle's algorithm: PreFilter, Filter over the nodes, LeastAllocated score, host selection.

kubernetes/kubernetes pkg/scheduler/schedule_one.go (`findNodesThatFitPod`, `findNodesThatPassFilters`,
`numFeasibleNodesToFind`, `selectHost`) with the default profile's filter plugins that matter for kubesim's
pods, run per node in the profile's order until one rejects the node:
NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodeResourcesFit, InterPodAffinity.
(NodePorts, the volume plugins and PodTopologySpread return Skip at PreFilter for pods without host ports,
volumes or spread constraints, so upstream runs none of their Filters either.) NodeAffinity and
InterPodAffinity are skipped when their PreFilter has nothing to check.

`scheduler_filter_evaluations` counts Filter plugin calls exactly as upstream makes them (node x plugin, up
to and including the rejecting one); kubesim may compute the answers faster than one call per node (a
nodeSelector is matched through a label index, the nodes it rejects are tallied rather than visited), but
the count is the same.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import dataclass, field

from kubesim.stats import Stats

from .interpod import AffinityCheck
from .nodecache import SchedulerCache
from .nodefit import first_untolerated, taint_reason
from .nodestate import NodeState, least_allocated_score, num_feasible_nodes_to_find, unschedulable_message
from .podinfo import (
    INTER_POD_AFFINITY,
    NODE_AFFINITY,
    NODE_RESOURCES_FIT,
    NODE_UNSCHEDULABLE,
    TAINT_TOLERATION,
    PodInfo,
)

REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_AFFINITY_CONFLICT = "pod affinity terms conflict"
REASON_NOT_IN_PREFILTER = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
NO_NODES = "no nodes available to schedule pods"

FILTERS_BEFORE_NODE_AFFINITY = 3
"""NodeUnschedulable, NodeName and TaintToleration run before NodeAffinity on every node."""


@dataclass(frozen=True)
class ScheduleResult:
    node: str | None
    message: str = ""
    """The Unschedulable condition's message (or the error) when no node was chosen."""
    rejectors: frozenset[str] = frozenset()
    """UnschedulablePlugins: the plugins that rejected a node, what the queueing hints look at."""
    error: bool = False
    """An error rather than a rejection (no nodes at all): retried after backoff, reason SchedulerError."""


@dataclass
class _Outcome:
    """What the node search found: feasible nodes, failures by (plugin, reason), nodes short of resources."""

    feasible: list[NodeState] = field(default_factory=list)
    failures: Counter[tuple[str, str]] = field(default_factory=Counter)
    short: list[NodeState] = field(default_factory=list)
    examined: int = 0
    evaluations: int = 0


class NodeFinder:
    """The filtering and scoring half of a scheduling cycle, on the scheduler's cache. Keeps upstream's
    `nextStartNodeIndex` (each search starts where the previous one stopped) and the tie-break RNG."""

    def __init__(
        self, cache: SchedulerCache, stats: Stats, percentage_of_nodes_to_score: int, seed: int
    ) -> None:
        self._cache = cache
        self._stats = stats
        self._percentage = percentage_of_nodes_to_score
        self._rng = random.Random(seed)
        self.next_start = 0

    def find(self, info: PodInfo) -> ScheduleResult:
        cache = self._cache
        total = len(cache.nodes)
        if not total:
            return ScheduleResult(None, NO_NODES, error=True)
        if info.parse_error is not None:
            plugin, message = info.parse_error
            return ScheduleResult(None, unschedulable_message(total, Counter(), message), frozenset({plugin}))
        pinned = info.node_affinity.prefilter_node_names() if info.node_affinity.active else None
        if pinned is not None and not pinned:
            message = unschedulable_message(total, Counter(), REASON_AFFINITY_CONFLICT)
            return ScheduleResult(None, message, frozenset({NODE_AFFINITY}))
        check = AffinityCheck(
            cache.affinity, info.namespace, info.labels, info.affinity_terms, info.anti_terms
        )
        self._stats.scheduler_affinity_evaluations += check.prefilter_work

        order, position = cache.node_order()
        if pinned is not None:
            candidates = [name for name in sorted(pinned) if name in cache.nodes]
            outcome = self._search(info, check, candidates)
            outcome.failures[(NODE_AFFINITY, REASON_NOT_IN_PREFILTER)] += total - len(candidates)
        elif info.node_affinity.node_selector:
            outcome = self._search_selected(info, check, order, position)
        else:
            outcome = self._search(info, check, order)
        self._stats.scheduler_filter_evaluations += outcome.evaluations
        self.next_start = (self.next_start + outcome.examined) % total
        if outcome.feasible:
            return ScheduleResult(self._select(outcome.feasible, info))
        for state in outcome.short:
            for shortfall in state.requested.shortfalls(info.request, state.allocatable):
                outcome.failures[(NODE_RESOURCES_FIT, shortfall)] += 1
        reasons: Counter[str] = Counter()
        for (_, reason), count in outcome.failures.items():
            reasons[reason] += count
        rejectors = frozenset(plugin for plugin, _ in outcome.failures)
        return ScheduleResult(None, unschedulable_message(total, reasons), rejectors)

    # --- the node search -------------------------------------------------------------------------------

    def _search(self, info: PodInfo, check: AffinityCheck, names: list[str]) -> _Outcome:
        """findNodesThatPassFilters over `names`, from the rotating start, until enough feasible nodes."""
        outcome = _Outcome()
        count = len(names)
        if not count:
            return outcome
        wanted = num_feasible_nodes_to_find(count, self._percentage)
        start = self.next_start % count
        nodes = self._cache.nodes
        feasible = outcome.feasible
        failures = outcome.failures
        short = outcome.short
        request = info.request
        want_cpu, want_memory, want_gpu, want_pods = request.cpu, request.memory, request.gpu, request.pods
        tolerations = info.tolerations
        tolerates_unschedulable = info.tolerates_unschedulable
        node_affinity = info.node_affinity if info.node_affinity.active else None
        affinity_check = None if check.skip else check
        cordoned = tainted = mismatched = affinity_checked = reserved = 0
        nominations = self._cache.has_any_nominations()
        for name in itertools.chain(names[start:], names[:start]):
            if len(feasible) >= wanted:
                break
            state = nodes[name]
            if state.unschedulable and not tolerates_unschedulable:
                cordoned += 1
                continue
            if state.hard_taints:
                taint = first_untolerated(tolerations, state.hard_taints)
                if taint is not None:
                    failures[(TAINT_TOLERATION, taint_reason(taint))] += 1
                    tainted += 1
                    continue
            if node_affinity is not None and not node_affinity.matches(name, state.labels):
                mismatched += 1
                continue
            if (
                want_gpu > state.free_gpu
                or want_cpu > state.free_cpu
                or want_memory > state.free_memory
                or want_pods > state.free_pods
            ):
                # which resources are short only matters for the message when nothing fits
                short.append(state)
                continue
            if nominations and self._reserved_for_nominated(info, state, failures):
                reserved += 1
                continue
            if affinity_check is not None:
                affinity_checked += 1
                reason = affinity_check.reason(state.labels)
                if reason is not None:
                    failures[(INTER_POD_AFFINITY, reason)] += 1
                    continue
            feasible.append(state)
        if cordoned:
            failures[(NODE_UNSCHEDULABLE, REASON_UNSCHEDULABLE)] += cordoned
        if mismatched:
            failures[(NODE_AFFINITY, REASON_NODE_AFFINITY)] += mismatched
        outcome.examined = cordoned + tainted + mismatched + len(short) + reserved + affinity_checked
        if affinity_check is None:
            outcome.examined += len(feasible)
        # Filter calls per node, counted rather than incremented in the loop: every examined node runs
        # NodeUnschedulable, NodeName, TaintToleration, NodeAffinity (when active) and NodeResourcesFit,
        # less the plugins after the one that rejected it, plus InterPodAffinity where it ran.
        per_node = FILTERS_BEFORE_NODE_AFFINITY + (node_affinity is not None) + 1
        outcome.evaluations = (
            outcome.examined * per_node
            - cordoned * (per_node - 1)
            - tainted * (per_node - FILTERS_BEFORE_NODE_AFFINITY)
            - mismatched
            + affinity_checked
        )
        self._stats.scheduler_affinity_evaluations += affinity_checked * check.node_work
        return outcome

    def _reserved_for_nominated(
        self, info: PodInfo, state: NodeState, failures: Counter[tuple[str, str]]
    ) -> bool:
        """RunFilterPluginsWithNominatedPods, for NodeResourcesFit: the pod must also fit with the requests
        of the pods of equal or higher priority nominated to the node added (they are about to take it)."""
        extra = self._cache.nominated_request(state.name, info.priority, info.key)
        if extra is None:
            return False
        shortfalls = (state.requested + extra).shortfalls(info.request, state.allocatable)
        for shortfall in shortfalls:
            failures[(NODE_RESOURCES_FIT, shortfall)] += 1
        return bool(shortfalls)

    def _search_selected(
        self, info: PodInfo, check: AffinityCheck, order: list[str], position: dict[str, int]
    ) -> _Outcome:
        """The same search for a pod with a nodeSelector, without visiting the nodes the selector rejects:
        the nodes it selects are found through the label index and evaluated in search order; every other
        node the search passes costs NodeUnschedulable, NodeName, TaintToleration and NodeAffinity (fewer
        if cordoned or tainted, which only the few special nodes can be) and is tallied, not visited."""
        cache = self._cache
        count = len(order)
        wanted = num_feasible_nodes_to_find(count, self._percentage)
        start = self.next_start % count
        selected = cache.nodes_labelled(info.node_affinity.node_selector)
        rotated = sorted((position[name] - start) % count for name in selected)
        outcome = _Outcome()
        stop = count
        for offset in rotated:
            single = self._search(info, check, [order[(start + offset) % count]])
            outcome.feasible += single.feasible
            outcome.failures.update(single.failures)
            outcome.short += single.short
            outcome.evaluations += single.evaluations
            if len(outcome.feasible) >= wanted:
                stop = offset + 1
                break
        passed = sum(1 for offset in rotated if offset < stop)
        others = stop - passed
        outcome.examined = stop
        outcome.evaluations += (FILTERS_BEFORE_NODE_AFFINITY + 1) * others
        rejected_by_selector = others
        for name in cache.special - selected:
            if (position[name] - start) % count >= stop:
                continue
            state = cache.nodes[name]
            if state.unschedulable and not info.tolerates_unschedulable:
                outcome.evaluations -= FILTERS_BEFORE_NODE_AFFINITY
                outcome.failures[(NODE_UNSCHEDULABLE, REASON_UNSCHEDULABLE)] += 1
                rejected_by_selector -= 1
                continue
            taint = first_untolerated(info.tolerations, state.hard_taints)
            if taint is not None:
                outcome.evaluations -= 1
                outcome.failures[(TAINT_TOLERATION, taint_reason(taint))] += 1
                rejected_by_selector -= 1
        if rejected_by_selector:
            outcome.failures[(NODE_AFFINITY, REASON_NODE_AFFINITY)] += rejected_by_selector
        return outcome

    def _select(self, feasible: list[NodeState], info: PodInfo) -> str:
        """Highest LeastAllocated score; ties broken uniformly at random (reservoir sampling, as upstream)."""
        best_score = -1
        best = ""
        ties = 0
        draw = self._rng.random
        request = info.request
        for state in feasible:
            score = least_allocated_score(state, request)
            if score > best_score:
                best_score, best, ties = score, state.name, 1
            elif score == best_score:
                ties += 1
                if draw() * ties < 1:
                    best = state.name
        return best
