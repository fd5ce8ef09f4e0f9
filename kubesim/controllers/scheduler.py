"""The scheduler (kube-scheduler, default profile, filters only the required constraints).

One scheduling cycle per pod, each lasting 1/`scheduler_pods_per_second`: cheap filters first (node usable,
node selector via a label index, required node affinity, taints, resources), inter-pod affinity last; the
search stops after `numFeasibleNodesToFind` feasible nodes starting where the last cycle stopped
(percentageOfNodesToScore); the feasible nodes are scored LeastAllocated (cpu, memory) with a seeded random
tie-break. At the end of the cycle the pod is assumed onto the node and bound through the binding
subresource in the background (upstream's binding cycle is a goroutine, pkg/scheduler/schedule_one.go
`ScheduleOne`), so the next cycle starts while the binding request is in flight. Unschedulable pods get
PodScheduled=False/Unschedulable and wait for a cluster event or the periodic flush.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
from collections import Counter
from collections.abc import Callable

from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.interface import KubeApi
from kubesim.stats import Stats

from .event_series import SeriesEventRecorder
from .informer import Handlers, Informer
from .interpod import AffinityIndex, required_terms
from .nodefit import (
    Resources,
    first_untolerated,
    pod_requests,
    required_node_affinity_matches,
)
from .nodestate import NodeState, least_allocated_score, num_feasible_nodes_to_find, unschedulable_message
from .objects import Obj, is_deleting, is_terminal, labels_of, new_condition, object_key, with_condition
from .scheduling_queue import SchedulingQueue
from .settings import ControllerSettings

NodeCheck = Callable[["NodeState"], str | None]

log = logging.getLogger(__name__)

SCHEDULER_NAME = "default-scheduler"
REASON_SELECTOR = "node(s) didn't match Pod's node affinity/selector"
REASON_TAINT = "node(s) had untolerated taint {%s}"
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
NOTE_LENGTH_LIMIT = 1024
"""events.k8s.io validation's NoteLengthLimit: handleSchedulingFailure truncates the event's note to it."""


def truncate_note(message: str) -> str:
    """truncateMessage in pkg/scheduler/schedule_one.go."""
    if len(message) <= NOTE_LENGTH_LIMIT:
        return message
    suffix = " ..."
    return message[: NOTE_LENGTH_LIMIT - len(suffix)] + suffix


_CATCH_UP_SECONDS = 1.0
"""A backlog may run this far behind its cycle schedule and catch up (the event loop cannot sleep finely)."""


class Scheduler:
    def __init__(
        self,
        *,
        api: KubeApi,
        settings: ControllerSettings,
        stats: Stats,
        clock: Clock,
        pods: Informer,
        nodes: Informer,
        namespaces: Informer,
        recorder: SeriesEventRecorder | None = None,
    ) -> None:
        self._api = api
        self._recorder = recorder or SeriesEventRecorder(api, SCHEDULER_NAME, enabled=False, clock=clock)
        self._settings = settings
        self._stats = stats
        self._clock = clock
        self._pods = pods
        self._nodes_informer = nodes
        self._namespaces = namespaces
        self.queue = SchedulingQueue(
            clock,
            settings.scheduler_initial_backoff_seconds,
            settings.scheduler_max_backoff_seconds,
            settings.scheduler_unschedulable_flush_seconds,
        )
        self.nodes: dict[str, NodeState] = {}
        self._node_order: list[str] = []
        self._node_order_stale = False
        self._label_index: dict[tuple[str, str], set[str]] = {}
        self._assigned: dict[str, tuple[str, Resources]] = {}
        self._binding: set[str] = set()
        """Assumed pods whose binding request is in flight (upstream skips their update events)."""
        self._affinity = AffinityIndex()
        self._with_pod_affinity: set[str] = set()
        self._next_start = 0
        self._rng = random.Random(settings.seed)
        pods.add_handlers(Handlers(self._pod_added, self._pod_updated, self._pod_deleted))
        nodes.add_handlers(
            Handlers(self._node_changed, lambda _o, n: self._node_changed(n), self._node_deleted)
        )
        namespaces.add_handlers(
            Handlers(
                self._namespace_changed, lambda _o, n: self._namespace_changed(n), self._namespace_deleted
            )
        )

    # --- cache maintenance (informer handlers) ---------------------------------------------------------

    def _pod_added(self, pod: Obj) -> None:
        key = object_key(pod)
        spec = pod.get("spec") or {}
        if spec.get("nodeName"):
            if is_terminal(pod):
                self._release(key)
            else:
                self._assign(key, pod, str(spec["nodeName"]))
            self.queue.forget(key)
            return
        if self._wants(pod) and key not in self._binding:
            if required_terms_present(pod, "podAffinity"):
                self._with_pod_affinity.add(key)
            self.queue.add(key, int(spec.get("priority") or 0))

    def _pod_updated(self, old: Obj, pod: Obj) -> None:
        key = object_key(pod)
        was_bound = bool((old.get("spec") or {}).get("nodeName"))
        if (pod.get("spec") or {}).get("nodeName"):
            released_now = is_terminal(pod) and not is_terminal(old)
            self._pod_added(pod)
            if released_now:
                self.queue.move()
            elif not was_bound:
                self.queue.move(lambda k: k in self._with_pod_affinity)
            return
        if not self._wants(pod):
            self.queue.forget(key)
            return
        if old.get("spec") != pod.get("spec") or labels_of(old) != labels_of(pod) or key not in self.queue:
            self._pod_added(pod)

    def _pod_deleted(self, pod: Obj) -> None:
        key = object_key(pod)
        self.queue.forget(key)
        self._with_pod_affinity.discard(key)
        if key in self._assigned:
            self._release(key)
            self.queue.move()

    @staticmethod
    def _wants(pod: Obj) -> bool:
        spec = pod.get("spec") or {}
        return (
            not spec.get("nodeName")
            and not spec.get("schedulingGates")
            and (spec.get("schedulerName") or SCHEDULER_NAME) == SCHEDULER_NAME
            and not is_deleting(pod)
            and not is_terminal(pod)
        )

    def _node_changed(self, node: Obj) -> None:
        name = str(node["metadata"]["name"])
        state = self.nodes.get(name)
        if state is None:
            state = NodeState(name, {}, node, Resources())
            self.nodes[name] = state
            self._node_order_stale = True
        else:
            self._unindex_node(state)
        state.refresh(node)
        for item in state.labels.items():
            self._label_index.setdefault(item, set()).add(name)
        self._affinity.set_node(name, state.labels)
        self.queue.move()

    def _node_deleted(self, node: Obj) -> None:
        name = str(node["metadata"]["name"])
        state = self.nodes.pop(name, None)
        if state is None:
            return
        self._unindex_node(state)
        self._node_order_stale = True
        for key in list(state.pods):
            self._assigned.pop(key, None)
        self._affinity.remove_node(name)

    def _unindex_node(self, state: NodeState) -> None:
        for item in state.labels.items():
            names = self._label_index.get(item)
            if names is not None:
                names.discard(state.name)
                if not names:
                    del self._label_index[item]

    def _namespace_changed(self, namespace: Obj) -> None:
        self._affinity.namespace_labels[str(namespace["metadata"]["name"])] = dict(labels_of(namespace))
        self.queue.move(lambda k: k in self._with_pod_affinity)

    def _namespace_deleted(self, namespace: Obj) -> None:
        self._affinity.namespace_labels.pop(str(namespace["metadata"]["name"]), None)

    def _assign(self, key: str, pod: Obj, node_name: str) -> None:
        current = self._assigned.get(key)
        if current is not None and current[0] == node_name:
            return
        if current is not None:
            self._release(key)
        try:
            request = pod_requests(pod)
            anti_terms = required_terms(pod, "podAntiAffinity")
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
        self._affinity.add_pod(key, node_name, namespace, labels_of(pod), anti_terms)
        self._with_pod_affinity.discard(key)

    def _release(self, key: str) -> None:
        current = self._assigned.pop(key, None)
        if current is None:
            return
        node_name, request = current
        state = self.nodes.get(node_name)
        if state is not None:
            state.requested = state.requested - request
            state.account()
            state.pods.discard(key)
        self._affinity.remove_pod(key)

    # --- the scheduling loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        await asyncio.gather(
            self._pods.synced.wait(), self._nodes_informer.synced.wait(), self._namespaces.synced.wait()
        )
        interval = (
            1.0 / self._settings.scheduler_pods_per_second if self._settings.scheduler_pods_per_second else 0
        )
        cycle_end = self._clock.now()
        cycles = 0
        async with asyncio.TaskGroup() as bindings:
            while True:
                idle = not self.queue.sizes()[0]
                key = await self.queue.pop()
                cycles += 1
                if cycles % 64 == 0:
                    await asyncio.sleep(0)
                pod = self._pods.get(key)
                if key in self._binding:
                    continue
                if pod is None or not self._wants(pod):
                    self.queue.forget(key)
                    continue
                deadline = None
                if interval:
                    now = self._clock.now()
                    # a pod that waited in the queue starts when the previous cycle ended
                    start = now if idle else max(cycle_end, now - _CATCH_UP_SECONDS)
                    cycle_end = deadline = start + interval
                try:
                    node_name = await self.schedule_one(key, pod, deadline)
                except Exception:
                    log.exception("scheduling %s crashed", key)
                    self.queue.failed(key, unschedulable=False)
                    continue
                if node_name is not None:
                    bindings.create_task(self.bind(key, pod, node_name))

    async def schedule_one(self, key: str, pod: Obj, cycle_end: float | None = None) -> str | None:
        """One scheduling cycle, over at simulated time `cycle_end`: returns the node the pod is now assumed
        on (the caller binds it), or None when it was unschedulable or went away during the cycle."""
        self._stats.scheduler_attempts += 1
        try:
            node_name, message = self.find_node(pod)
        except ValueError as error:
            node_name, message = None, f"0/{len(self.nodes)} nodes are available: {error}."
        if cycle_end is not None and cycle_end > self._clock.now():
            await self._clock.sleep_until(cycle_end)
        current = self._pods.get(key)
        if current is None or not self._wants(current):
            self.queue.forget(key)
            return None
        if node_name is None:
            self._stats.scheduler_unschedulable += 1
            self.queue.failed(key, unschedulable=True)
            # handleSchedulingFailure: the event (about the pod as queued), then the condition
            self._recorder.record(
                pod, "Warning", "FailedScheduling", truncate_note(message), action="Scheduling"
            )
            await self._mark_unschedulable(current, message)
            return None
        self._assign(key, current, node_name)
        self._binding.add(key)
        return node_name

    async def bind(self, key: str, pod: Obj, node_name: str) -> bool:
        """The binding cycle of an assumed pod: POST pods/binding (its API round trip included); on failure
        the assumption is forgotten and the pod retried, as upstream's handleBindingCycleError."""
        meta = pod["metadata"]
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": meta.get("namespace"), "uid": meta.get("uid")},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        try:
            await self._api.create(
                "pods", binding, namespace=meta.get("namespace"), subresource="binding", client="scheduler"
            )
        except Exception as error:
            self._forget_assumed(key)
            if isinstance(error, ApiError) and error.status in (404, 409):
                self.queue.forget(key)
            else:
                log.info("binding %s to %s failed: %s", key, node_name, error)
                self.queue.failed(key, unschedulable=False)
            return False
        finally:
            self._binding.discard(key)
        self.queue.forget(key)
        self.queue.move(lambda k: k in self._with_pod_affinity)
        self._recorder.record(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {meta.get('namespace')}/{meta['name']} to {node_name}",
            action="Binding",
        )
        return True

    def _forget_assumed(self, key: str) -> None:
        """Undo an assumption the informer has not confirmed (a confirmed binding is another writer's)."""
        cached = self._pods.get(key)
        if cached is None or not (cached.get("spec") or {}).get("nodeName"):
            self._release(key)

    def find_node(self, pod: Obj) -> tuple[str | None, str]:
        """Filter then score; (node, "") or (None, the Unschedulable message). Pure on the cache."""
        total = len(self.nodes)
        if not total:
            return None, "no nodes available to schedule pods"
        spec = pod.get("spec") or {}
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        labels = meta.get("labels") or {}
        request = pod_requests(pod)
        reasons: Counter[str] = Counter()

        if self._node_order_stale:
            self._node_order = sorted(self.nodes)
            self._node_order_stale = False
        candidates = self._node_order
        selector = spec.get("nodeSelector") or {}
        if selector:
            narrowed: set[str] | None = None
            for item in selector.items():
                names = self._label_index.get((str(item[0]), str(item[1])), set())
                narrowed = set(names) if narrowed is None else narrowed & names
            candidates = sorted(narrowed or ())
            if total > len(candidates):
                reasons[REASON_SELECTOR] += total - len(candidates)
        has_node_affinity = bool(
            ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
        )
        affinity_check = self._affinity_filter(pod, namespace, labels)

        wanted = num_feasible_nodes_to_find(
            len(candidates), self._settings.scheduler_percentage_of_nodes_to_score
        )
        tolerations = spec.get("tolerations") or []
        nodes = self.nodes
        short_of_resources: list[NodeState] = []
        feasible: list[NodeState] = []
        start = self._next_start % len(candidates) if candidates else 0
        examined = 0
        evaluations = 0
        want_cpu, want_memory, want_gpu, want_pods = request.cpu, request.memory, request.gpu, request.pods
        for name in itertools.chain(candidates[start:], candidates[:start]):
            if len(feasible) >= wanted:
                break
            state = nodes[name]
            examined += 1
            # NodeUnschedulable, NodeAffinity, TaintToleration, NodeResourcesFit, InterPodAffinity, in order
            evaluations += 1
            reason = state.blocked
            if reason is None and has_node_affinity:
                evaluations += 1
                if not required_node_affinity_matches(pod, state.obj):
                    reason = REASON_SELECTOR
            if reason is None:
                evaluations += 1
                if state.hard_taints:
                    taint = first_untolerated(tolerations, state.hard_taints)
                    if taint is not None:
                        reason = REASON_TAINT % f"{taint.get('key')}: {taint.get('value', '')}"
            if reason is None:
                evaluations += 1
                if (
                    want_gpu > state.free_gpu
                    or want_cpu > state.free_cpu
                    or want_memory > state.free_memory
                    or want_pods > state.free_pods
                ):
                    # which resource is short only matters for the message when nothing fits
                    short_of_resources.append(state)
                    continue
            if reason is None and affinity_check is not None:
                evaluations += 1
                reason = affinity_check(state)
            if reason is None:
                feasible.append(state)
            else:
                reasons[reason] += 1
        self._stats.scheduler_filter_evaluations += evaluations
        if candidates:
            self._next_start = (start + examined) % len(candidates)
        if not feasible:
            for state in short_of_resources:
                reasons[state.requested.shortfalls(request, state.allocatable)[0]] += 1
            return None, unschedulable_message(total, reasons)
        return self._select(feasible, request), ""

    def _select(self, feasible: list[NodeState], request: Resources) -> str:
        """Highest LeastAllocated score; ties broken uniformly at random (reservoir sampling, as upstream)."""
        best_score = -1
        best = ""
        ties = 0
        draw = self._rng.random
        for state in feasible:
            score = least_allocated_score(state, request)
            if score > best_score:
                best_score, best, ties = score, state.name, 1
            elif score == best_score:
                ties += 1
                if draw() * ties < 1:
                    best = state.name
        return best

    def _affinity_filter(self, pod: Obj, namespace: str, labels: dict[str, str]) -> NodeCheck | None:
        """A per-node inter-pod affinity check for this pod, or None when nothing can constrain it."""
        affinity_terms = required_terms(pod, "podAffinity")
        anti_terms = required_terms(pod, "podAntiAffinity")
        forbidden, evaluated = self._affinity.forbidden_by_existing(namespace, labels)
        self._stats.scheduler_affinity_evaluations += evaluated
        if not affinity_terms and not anti_terms and not forbidden:
            return None
        index = self._affinity
        first_of_group = (
            bool(affinity_terms)
            and not any(index.any_match(t) for t in affinity_terms)
            and all(t.matches_pod(namespace, labels, index.namespace_labels) for t in affinity_terms)
        )
        stats = self._stats
        # A node's answer depends only on its values of these keys: answer once per distinct combination
        # (upstream evaluates every term on every node; the counter reports that work).
        keys = tuple(sorted({*forbidden, *(t.topology_key for t in anti_terms + affinity_terms)}))
        terms_per_node = len(anti_terms) + len(affinity_terms) + (1 if forbidden else 0)
        answers: dict[tuple[str | None, ...], str | None] = {}

        def evaluate(node_labels: dict[str, str]) -> str | None:
            for topology_key, domains in forbidden.items():
                if node_labels.get(topology_key) in domains:
                    return REASON_EXISTING_ANTI_AFFINITY
            for term in anti_terms:
                value = node_labels.get(term.topology_key)
                if value is not None and index.domain_has_match(term, value):
                    return REASON_ANTI_AFFINITY
            pods_exist = True
            for term in affinity_terms:
                value = node_labels.get(term.topology_key)
                if value is None:
                    return REASON_AFFINITY
                if not index.domain_has_match(term, value):
                    pods_exist = False
            if not pods_exist and not first_of_group:
                return REASON_AFFINITY
            return None

        def check(state: NodeState) -> str | None:
            stats.scheduler_affinity_evaluations += terms_per_node
            node_labels = state.labels
            signature = tuple(node_labels.get(k) for k in keys)
            if signature not in answers:
                answers[signature] = evaluate(node_labels)
            return answers[signature]

        return check

    async def _mark_unschedulable(self, pod: Obj, message: str) -> None:
        current = [c for c in (pod.get("status") or {}).get("conditions") or []]
        previous = next((c for c in current if c.get("type") == "PodScheduled"), None)
        if previous and previous.get("reason") == "Unschedulable" and previous.get("message") == message:
            return
        condition = new_condition("PodScheduled", "False", "Unschedulable", message, probe=True)
        meta = pod["metadata"]
        try:
            updated = await self._api.patch(
                "pods",
                meta["name"],
                {"status": {"conditions": with_condition(current, condition)}},
                namespace=meta.get("namespace"),
                subresource="status",
                client="scheduler",
            )
        except ApiError as error:
            log.debug("pod %s: recording Unschedulable failed: %s", object_key(pod), error.message)
            return
        self._pods.assume(updated)


def required_terms_present(pod: Obj, kind: str) -> bool:
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    return bool(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
