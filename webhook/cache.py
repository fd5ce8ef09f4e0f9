"""The leader directory: leader pods and nodes from informers, one live lookup on a cache miss.

Two `kubekit.informer.Informer`s keep every leader pod (`exclusive-placement.io/role=leader`, indexed by
its Job's `namespace/name`) and every node. `LeaderDirectory.leader_state(plan)` answers from them; on a
miss it makes one live lookup (in a worker thread, never on the event loop) before concluding, with its
own short timeout so two calls fit in the API server's admission deadline. Other live, bound leaders of the
same Job (a duplicate the Job controller has not removed yet) are looked at too: in another domain they
make the follower wait (`LeaderStatus.LEADERS_DISAGREE`).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from kubekit.client import Kube, KubeError
from kubekit.informer import Informer
from placement.admission import LeaderState, PodPlan, leader_state
from placement.constants import JOB_NAME_LABEL, ROLE_LABEL, ROLE_LEADER
from placement.leader import LeaderProblem, Placed, leader_problem, pick_leader, rival_leaders
from placement.objects import Obj, node_name
from webhook.metrics import Metrics

LEADER_SELECTOR = f"{ROLE_LABEL}={ROLE_LEADER}"
INFORMER_STOP_SECONDS = 5.0


class LiveApi(Protocol):
    def list_leaders(self, namespace: str, job_name: str) -> list[Obj]: ...

    def get_node(self, name: str) -> Obj | None: ...


class KubeLiveApi:
    """The live fallback after a cache miss: one list of a Job's leader pods, one GET of a node."""

    def __init__(self, kube: Kube, timeout: float) -> None:
        self._kube = kube
        self._timeout = timeout

    def list_leaders(self, namespace: str, job_name: str) -> list[Obj]:
        items, _ = self._kube.list_objects(
            "pods",
            namespace=namespace,
            label_selector=f"{LEADER_SELECTOR},{JOB_NAME_LABEL}={job_name}",
            timeout=self._timeout,
        )
        return items

    def get_node(self, name: str) -> Obj | None:
        try:
            return self._kube.get_node(name, timeout=self._timeout)
        except KubeError as err:
            if err.not_found:
                return None
            raise


class LeaderSource(Protocol):
    """What the admission handlers need: readiness and the state of a follower's leader."""

    def ready(self) -> bool: ...

    async def leader_state(self, plan: PodPlan) -> LeaderState: ...


def _usable(leader: Obj | None, plan: PodPlan) -> bool:
    """A leader that can place followers now or once it binds (a dead or foreign one cannot)."""
    return leader_problem(leader, plan.job) in (None, LeaderProblem.LEADER_NOT_BOUND)


class LeaderDirectory:
    """Leader pods and nodes from informers; one live lookup on a cache miss."""

    def __init__(self, pods: Informer, nodes: Informer, live: LiveApi, metrics: Metrics) -> None:
        self.pods = pods
        self.nodes = nodes
        self._live = live
        self._metrics = metrics

    def start(self) -> None:
        self.pods.start()
        self.nodes.start()

    def stop(self) -> None:
        self.pods.stop()
        self.nodes.stop()
        self.pods.join(INFORMER_STOP_SECONDS)
        self.nodes.join(INFORMER_STOP_SECONDS)

    def ready(self) -> bool:
        return self.pods.synced.is_set() and self.nodes.synced.is_set()

    def from_cache(self, plan: PodPlan) -> tuple[Obj, Obj, list[Placed]] | None:
        """(leader, node, rivals) when the cache knows a usable, bound leader of this Job and the nodes of it
        and of every rival; else None."""
        candidates = self.pods.store.by_index(plan.job_object_key)
        leader = pick_leader(candidates, plan.job)
        if leader is None or leader_problem(leader, plan.job) is not None:
            return None
        node = self.nodes.store.get(str(node_name(leader)))
        rivals = [
            (rival, self.nodes.store.get(str(node_name(rival))))
            for rival in rival_leaders(candidates, leader, plan.job)
        ]
        if node is None or any(rival_node is None for _rival, rival_node in rivals):
            return None
        return leader, node, rivals

    def _node_live(self, name: str) -> Obj | None:
        node = self.nodes.store.get(name)
        if node is not None:
            return node
        try:
            node = self._live.get_node(name)
        except Exception:
            self._metrics.live_lookups.labels("node", "error").inc()
            raise
        self._metrics.live_lookups.labels("node", "found" if node else "not_found").inc()
        return node

    def _live_lookup(self, plan: PodPlan) -> tuple[Obj | None, Obj | None, list[Placed]]:
        try:
            candidates = self._live.list_leaders(plan.namespace, plan.job.name)
        except Exception:
            self._metrics.live_lookups.labels("pod", "error").inc()
            raise
        leader = pick_leader(candidates, plan.job)
        found = _usable(leader, plan)
        self._metrics.live_lookups.labels("pod", "found" if found else "not_found").inc()
        bound_to = node_name(leader) if leader is not None and found else None
        if bound_to is None:
            return leader, None, []
        rivals = [
            (rival, self._node_live(str(node_name(rival))))
            for rival in rival_leaders(candidates, leader, plan.job)
        ]
        return leader, self._node_live(bound_to), rivals

    async def leader_state(self, plan: PodPlan) -> LeaderState:
        cached = self.from_cache(plan)
        if cached is not None:
            self._metrics.cache_lookups_by("hit").inc()
            return leader_state(plan, *cached)
        self._metrics.cache_lookups_by("miss").inc()
        leader, node, rivals = await asyncio.to_thread(self._live_lookup, plan)
        return leader_state(plan, leader, node, rivals)
