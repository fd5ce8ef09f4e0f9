"""The scheduler (kube-scheduler, default profile, the required constraints).

One scheduling cycle per pod, each lasting 1/`scheduler_pods_per_second`: the pod's PreFilter/Filter/Score
run in `filtering.py` on the cache of `nodecache.py`. At the end of the cycle the pod is assumed onto the
chosen node and bound through the binding subresource in the background (upstream's binding cycle is a
goroutine, pkg/scheduler/schedule_one.go `ScheduleOne`), so the next cycle starts while the binding request
is in flight; a successful binding is recorded as a `Scheduled` event. Unschedulable pods get a
`FailedScheduling` event and PodScheduled=False/Unschedulable, and wait in the scheduling queue's
unschedulable pool until a cluster event the queueing hints of the plugins that rejected them say may help
(`queueing_hints.py`), or the periodic flush. Informer callbacks turn into upstream's cluster events as
pkg/scheduler/eventhandlers.go does: an assigned pod's add, update and delete (a pod turning terminal counts
as deleted: upstream's pod informer lists only non-terminal pods), a node's add and update.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable

from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.interface import KubeApi
from kubesim.stats import Stats

from .cluster_events import ClusterEvent, node_added, node_updated, pod_added, pod_deleted, pod_updated
from .event_series import SeriesEventRecorder
from .filtering import NodeFinder, ScheduleResult
from .informer import Handlers, Informer
from .nodecache import SchedulerCache
from .nodefit import pod_requests
from .objects import Obj, is_deleting, is_terminal, labels_of, new_condition, object_key, with_condition
from .podinfo import SCHEDULING_GATES, PodInfo
from .preemption import PREEMPTION_BY_SCHEDULER, Candidate, Outcome, Preemption, Victim, pod_priority
from .queueing_hints import affinity_terms_match, interesting, worth_requeuing
from .scheduling_queue import SchedulingQueue
from .settings import ControllerSettings

log = logging.getLogger(__name__)

SCHEDULER_NAME = "default-scheduler"
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
_MAX_LOOP_HOLD_SECONDS = 0.005
"""Unlimited scheduling (`--scheduler-pods-per-second 0`) lets other tasks run at least this often."""


def _loop_clock() -> float:
    """Real CPU-bound time spent in back-to-back cycles (a module function: tests replace it)."""
    return time.perf_counter()


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
        self.cache = SchedulerCache()
        self.nodes = self.cache.nodes
        self.queue = SchedulingQueue(
            clock,
            settings.scheduler_initial_backoff_seconds,
            settings.scheduler_max_backoff_seconds,
            settings.scheduler_unschedulable_flush_seconds,
            self._worth_requeuing,
        )
        self._finder = NodeFinder(
            self.cache, stats, settings.scheduler_percentage_of_nodes_to_score, settings.seed
        )
        self._preemption = Preemption(self.cache, pods.get, random.Random(settings.seed + 1))
        self._infos: dict[str, tuple[Obj, PodInfo]] = {}
        self._binding: set[str] = set()
        """Assumed pods whose binding request is in flight (upstream skips their update events)."""
        pods.add_handlers(Handlers(self._pod_added, self._pod_updated, self._pod_deleted))
        nodes.add_handlers(Handlers(self._node_added, self._node_updated, self._node_deleted))
        namespaces.add_handlers(
            Handlers(
                self._namespace_changed, lambda _o, n: self._namespace_changed(n), self._namespace_deleted
            )
        )

    # --- cache and queue maintenance (informer handlers) -------------------------------------------------

    def _pod_added(self, pod: Obj) -> None:
        key = object_key(pod)
        node_name = (pod.get("spec") or {}).get("nodeName")
        self._track_nomination(key, pod)
        if node_name:
            self.queue.forget(key)
            if is_terminal(pod):
                if self.cache.release(key):
                    self._cluster_event(pod_deleted(pod))
                return
            self.cache.assign(key, pod, str(node_name))
            self._assigned_pod_event(pod_added(pod), pod)
            return
        if self._responsible(pod) and key not in self._binding:
            self.queue.add(key, _priority(pod), _gate(pod))

    def _pod_updated(self, old: Obj, pod: Obj) -> None:
        key = object_key(pod)
        self._track_nomination(key, pod)
        if (pod.get("spec") or {}).get("nodeName"):
            if not (old.get("spec") or {}).get("nodeName") or is_terminal(pod):
                self._pod_added(pod)
                return
            if labels_of(old) != labels_of(pod) or old.get("spec") != pod.get("spec"):
                self.cache.release(key)
                self.cache.assign(key, pod, str(pod["spec"]["nodeName"]))
            for event in pod_updated(old, pod):
                self._assigned_pod_event(event, pod)
            return
        if not self._responsible(pod):
            self.queue.forget(key)
            return
        if key not in self._binding:
            self.queue.update(key, pod_updated(old, pod), _priority(pod), _gate(pod))

    def _pod_deleted(self, pod: Obj) -> None:
        key = object_key(pod)
        self.cache.set_nomination(key, None)
        self.queue.forget(key)
        self._infos.pop(key, None)
        if self.cache.release(key):
            self._cluster_event(pod_deleted(pod))

    def _track_nomination(self, key: str, pod: Obj) -> None:
        """The nominator from the informer (nominator.go `AddNominatedPod`/`DeleteNominatedPodIfExists`): a
        pending pod with status.nominatedNodeName holds that node for itself; bound, terminal or no longer
        nominated, it does not."""
        nominated = (pod.get("status") or {}).get("nominatedNodeName")
        if nominated and self._responsible(pod):
            self._nominate(key, pod, str(nominated))
        else:
            self.cache.set_nomination(key, None)

    def _nominate(self, key: str, pod: Obj, node: str | None) -> None:
        try:
            request = pod_requests(pod)
        except ValueError:
            request = None
        self.cache.set_nomination(key, node, _priority(pod), request)

    @staticmethod
    def _responsible(pod: Obj) -> bool:
        """A pending pod this scheduler handles (gated or not)."""
        spec = pod.get("spec") or {}
        return (
            not spec.get("nodeName")
            and (spec.get("schedulerName") or SCHEDULER_NAME) == SCHEDULER_NAME
            and not is_deleting(pod)
            and not is_terminal(pod)
        )

    @classmethod
    def _wants(cls, pod: Obj) -> bool:
        """A pending pod to schedule now: responsible for it and no scheduling gate left."""
        return cls._responsible(pod) and _gate(pod) is None

    def _node_added(self, node: Obj) -> None:
        self.cache.set_node(node)
        self._cluster_event(node_added(node))

    def _node_updated(self, old: Obj, node: Obj) -> None:
        self.cache.set_node(node)
        for event in node_updated(old, node):
            self._cluster_event(event)

    def _node_deleted(self, node: Obj) -> None:
        self.cache.remove_node(str(node["metadata"]["name"]))

    def _namespace_changed(self, namespace: Obj) -> None:
        self.cache.affinity.namespace_labels[str(namespace["metadata"]["name"])] = dict(labels_of(namespace))

    def _namespace_deleted(self, namespace: Obj) -> None:
        self.cache.affinity.namespace_labels.pop(str(namespace["metadata"]["name"]), None)

    # --- cluster events and queueing hints ---------------------------------------------------------------

    def _cluster_event(self, event: ClusterEvent, candidate: Callable[[str], bool] | None = None) -> None:
        """MoveAllToActiveOrBackoffQueue: events no plugin registered for are dropped at once."""
        if interesting(event):
            self.queue.on_event(event, candidate)

    def _assigned_pod_event(self, event: ClusterEvent, pod: Obj) -> None:
        """AssignedPodAdded / AssignedPodUpdated: offered only to the waiting pods one of whose required
        affinity terms matches the pod (getUnschedulablePodsWithCrossTopologyTerm)."""
        namespaces = self.cache.affinity.namespace_labels

        def candidate(key: str) -> bool:
            info = self._info(key)
            return info is not None and affinity_terms_match(info, pod, namespaces)

        self._cluster_event(event, candidate)

    def _worth_requeuing(self, key: str, rejectors: frozenset[str], event: ClusterEvent) -> bool:
        info = self._info(key)
        if info is None:
            return True
        return worth_requeuing(info, rejectors, event, self.cache.affinity.namespace_labels)

    def _info(self, key: str) -> PodInfo | None:
        pod = self._pods.get(key)
        return None if pod is None else self._info_of(key, pod)

    def _info_of(self, key: str, pod: Obj) -> PodInfo:
        """The parsed pod, kept while the informer holds the same version."""
        cached = self._infos.get(key)
        if cached is not None and cached[0] is pod:
            return cached[1]
        info = PodInfo.of(pod)
        self._infos[key] = (pod, info)
        return info

    # --- the scheduling loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        await asyncio.gather(
            self._pods.synced.wait(), self._nodes_informer.synced.wait(), self._namespaces.synced.wait()
        )
        interval = (
            1.0 / self._settings.scheduler_pods_per_second if self._settings.scheduler_pods_per_second else 0
        )
        cycle_end = self._clock.now()
        yielded = _loop_clock()
        async with asyncio.TaskGroup() as bindings:
            while True:
                idle = not self.queue.sizes()[0]
                key = await self.queue.pop()
                if _loop_clock() - yielded >= _MAX_LOOP_HOLD_SECONDS:
                    # Cycles back to back (no rate limit) share the API server's event loop: bounded by time,
                    # not by count, since one cycle costs ~10 ms at 15,000 nodes.
                    await asyncio.sleep(0)
                    yielded = _loop_clock()
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
                    self.queue.failed(key)
                    continue
                if node_name is not None:
                    bindings.create_task(self.bind(key, pod, node_name))

    async def schedule_one(self, key: str, pod: Obj, cycle_end: float | None = None) -> str | None:
        """One scheduling cycle, over at simulated time `cycle_end`: returns the node the pod is now assumed
        on (the caller binds it), or None when it was unschedulable or went away during the cycle."""
        self._stats.scheduler_attempts += 1
        info = self._info_of(key, pod)
        result = self._finder.find(info)
        if cycle_end is not None and cycle_end > self._clock.now():
            await self._clock.sleep_until(cycle_end)
        current = self._pods.get(key)
        if current is None or not self._wants(current):
            self.queue.forget(key)
            return None
        node_name = result.node
        if node_name is None:
            outcome = None if result.error else await self._post_filter(key, current)
            await self._handle_failure(key, pod, current, result, outcome)
            return None
        parsed = (info.request, info.anti_terms) if current is pod else None
        self.cache.assign(key, current, node_name, parsed)
        self._binding.add(key)
        return node_name

    async def _post_filter(self, key: str, pod: Obj) -> Outcome:
        """RunPostFilterPlugins: DefaultPreemption (`preemption.py`); on success the victims are preempted
        before the cycle ends (prepareCandidate, synchronous as upstream without async preemption)."""
        outcome = self._preemption.preempt(self._info_of(key, pod), pod)
        if outcome.candidate is not None:
            self._stats.scheduler_preemptions += 1
            await self._prepare_candidate(pod, outcome.candidate)
        return outcome

    async def _prepare_candidate(self, preemptor: Obj, candidate: Candidate) -> None:
        """prepareCandidate: preempt each victim not already being deleted, then clear the nominations of
        lower-priority pods on the node (they may no longer fit there)."""
        for victim in candidate.victims:
            if not is_deleting(victim.pod):
                await self._preempt_pod(preemptor, victim, candidate.node)
        priority = pod_priority(preemptor)
        for other in list(self._pods.store.values()):
            status = other.get("status") or {}
            if (
                status.get("nominatedNodeName") == candidate.node
                and pod_priority(other) < priority
                and not (other.get("spec") or {}).get("nodeName")
            ):
                await self._patch_status(other, {"nominatedNodeName": None})

    async def _preempt_pod(self, preemptor: Obj, victim: Victim, node_name: str) -> None:
        """Evaluator.PreemptPod: the DisruptionTarget condition (reason PreemptionByScheduler), then a
        graceful delete (the pod's own grace period), then the `Preempted` event on the victim."""
        pod = victim.pod
        scheduler_name = (preemptor.get("spec") or {}).get("schedulerName") or SCHEDULER_NAME
        condition = new_condition(
            "DisruptionTarget",
            "True",
            PREEMPTION_BY_SCHEDULER,
            f"{scheduler_name}: preempting to accommodate a higher priority pod",
        )
        conditions = (pod.get("status") or {}).get("conditions") or []
        meta = pod["metadata"]
        try:
            await self._api.patch(
                "pods",
                meta["name"],
                {"status": {"conditions": with_condition(list(conditions), condition)}},
                namespace=meta.get("namespace"),
                subresource="status",
                client="scheduler",
            )
            await self._api.delete("pods", meta["name"], namespace=meta.get("namespace"), client="scheduler")
        except ApiError as error:
            if error.status != 404:
                log.info("preempting %s failed: %s", victim.key, error.message)
            return
        self._stats.scheduler_preemption_victims += 1
        uid = (preemptor.get("metadata") or {}).get("uid")
        self._recorder.record(
            pod,
            "Normal",
            "Preempted",
            f"Preempted by pod {uid} on node {node_name}",
            action="Preempting",
            related=preemptor,
        )

    async def _handle_failure(
        self, key: str, pod: Obj, current: Obj, result: ScheduleResult, outcome: Outcome | None = None
    ) -> None:
        """handleSchedulingFailure: back to the queue (rejected by plugins, or an error to retry after
        backoff), then the event (about the pod as queued), then the PodScheduled condition, with the
        PostFilter's message appended and its nomination (FitError.Error, updatePod)."""
        if result.error:
            self.queue.failed(key)
        else:
            self._stats.scheduler_unschedulable += 1
            self.queue.failed(key, result.rejectors)
        message = result.message
        if outcome is not None and outcome.message:
            message = f"{message} {outcome.message}"
        self._recorder.record(pod, "Warning", "FailedScheduling", truncate_note(message), action="Scheduling")
        reason = "SchedulerError" if result.error else "Unschedulable"
        nominate = None if outcome is None else outcome.nominate
        if nominate is not None:
            # handleSchedulingFailure adds the nomination in memory before the status write lands
            self._nominate(key, current, nominate or None)
        await self._mark_unschedulable(current, message, reason, nominate)

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
            self._forget_assumed(key, pod, node_name)
            if isinstance(error, ApiError) and error.status in (404, 409):
                self.queue.forget(key)
            else:
                log.info("binding %s to %s failed: %s", key, node_name, error)
                self.queue.failed(key)
            return False
        finally:
            self._binding.discard(key)
        self.queue.forget(key)
        self._recorder.record(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {meta.get('namespace')}/{meta['name']} to {node_name}",
            action="Binding",
        )
        return True

    def _forget_assumed(self, key: str, pod: Obj, node_name: str) -> None:
        """handleBindingCycleError: undo an assumption the informer has not confirmed (a confirmed binding
        is another writer's); forgetting an assumed pod is an assigned pod's deletion for the queue."""
        cached = self._pods.get(key)
        if cached is not None and (cached.get("spec") or {}).get("nodeName"):
            return
        if self.cache.release(key):
            assumed = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node_name}}
            self._cluster_event(pod_deleted(assumed))

    def run_filters(self, pod: Obj) -> ScheduleResult:
        """PreFilter, Filter and Score on the cache: the chosen node, or why none (pure on the cache)."""
        return self._finder.find(self._info_of(object_key(pod), pod))

    def find_node(self, pod: Obj) -> tuple[str | None, str]:
        """(node, "") or (None, the Unschedulable message)."""
        result = self.run_filters(pod)
        return result.node, result.message

    async def _mark_unschedulable(
        self, pod: Obj, message: str, reason: str = "Unschedulable", nominate: str | None = None
    ) -> None:
        """updatePod: the PodScheduled condition and, when PostFilter said so, status.nominatedNodeName
        ("" clears it); nothing is sent when neither changes."""
        status = pod.get("status") or {}
        current = [c for c in status.get("conditions") or []]
        previous = next((c for c in current if c.get("type") == "PodScheduled"), None)
        nomination_changes = nominate is not None and (status.get("nominatedNodeName") or "") != nominate
        if (
            previous
            and previous.get("reason") == reason
            and previous.get("message") == message
            and not nomination_changes
        ):
            return
        condition = new_condition("PodScheduled", "False", reason, message, probe=True)
        change: Obj = {"conditions": with_condition(current, condition)}
        if nomination_changes:
            change["nominatedNodeName"] = nominate or None
        await self._patch_status(pod, change)

    async def _patch_status(self, pod: Obj, change: Obj) -> None:
        meta = pod["metadata"]
        try:
            updated = await self._api.patch(
                "pods",
                meta["name"],
                {"status": change},
                namespace=meta.get("namespace"),
                subresource="status",
                client="scheduler",
            )
        except ApiError as error:
            log.debug("pod %s: status patch failed: %s", object_key(pod), error.message)
            return
        self._pods.assume(updated)


def _priority(pod: Obj) -> int:
    return int((pod.get("spec") or {}).get("priority") or 0)


def _gate(pod: Obj) -> str | None:
    """The PreEnqueue plugin holding the pod back (SchedulingGates while `spec.schedulingGates` is set)."""
    return SCHEDULING_GATES if (pod.get("spec") or {}).get("schedulingGates") else None
