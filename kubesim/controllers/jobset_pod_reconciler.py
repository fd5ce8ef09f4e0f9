"""JobSet's pod reconciler (kubernetes-sigs/jobset `pkg/controllers/pod_controller.go`, PodReconciler).

Watches pods through the JobSet manager's cache; its event filter passes only scheduled leader pods
(completion index 0) of exclusive-placement JobSets that are not being deleted, so only a leader's add or
update triggers a reconcile — a follower's own events never do. Reconcile (one worker, controller-runtime's
per-item backoff of 5 ms doubling to 1000 s on error):

1. the leader from the cache (gone: nothing to do); its job-key label and controller owner are required;
2. every pod of the cache's `podJobKey` index for that job-key whose controller owner is the leader's Job;
3. the leader's domain: its node's topology label from the cache (a missing node gives "", a node
   without the label is an error);
4. when any follower's nodeSelector misses or differs from that domain (with the domain unknown: an
   error, retried), every follower of the Job — not only the mismatched ones; leaders never, so with
   several leaders each is reconciled on its own and none is deleted — gets the pod condition
   DisruptionTarget=True (reason ExclusivePlacementViolation) through the status subresource when it
   does not have it yet, then is deleted (propagation Background), up to 50 at once. A failed status
   write skips that pod's delete; any failure fails the reconcile, which is retried.

Requests go out as the JobSet manager's client (`jobset-controller`), on its budget.
"""

from __future__ import annotations

import asyncio
import logging

from kubesim.clock import Clock
from kubesim.errors import ApiError
from kubesim.interface import KubeApi
from placement.constants import JOBSET_JOB_KEY_LABEL

from .informer import Handlers, Informer
from .jobset_constants import JOBSET_MANAGER_CLIENT, MAX_PARALLELISM
from .jobset_placement import (
    PlacementError,
    exclusive_topology,
    in_namespace,
    index_pod_job,
    is_leader_pod,
    leader_pod_topology,
    placements_valid,
    reconciles,
    with_violation_condition,
)
from .objects import Obj, controller_uid, labels_of, object_key
from .workqueue import WorkQueue

log = logging.getLogger(__name__)

POD_JOB_INDEX = "podJobKey"
"""The reconciler's field index: exclusive-placement pods by job-key label."""
_RETRY_BASE_SECONDS = 0.005
_RETRY_MAX_SECONDS = 1000.0
"""controller-runtime's default per-item rate limiter: 5 ms doubling to 1000 s."""


class JobSetPodReconciler:
    def __init__(self, *, api: KubeApi, clock: Clock, pods: Informer, nodes: Informer) -> None:
        self._api = api
        self._pods = pods
        self._nodes = nodes
        self.queue = WorkQueue(clock, _RETRY_BASE_SECONDS, _RETRY_MAX_SECONDS)
        pods.add_index(POD_JOB_INDEX, lambda pod: in_namespace(index_pod_job(pod), pod))
        pods.add_handlers(
            Handlers(
                on_add=self._filtered,
                on_update=lambda _old, pod: self._filtered(pod),
                on_delete=self._filtered,
            )
        )

    def _filtered(self, pod: Obj) -> None:
        if reconciles(pod):
            self.queue.add(object_key(pod))

    async def run(self) -> None:
        await asyncio.gather(self._pods.synced.wait(), self._nodes.synced.wait())
        while True:
            key = await self.queue.get()
            try:
                await self.reconcile(key)
                self.queue.forget(key)
            except (ApiError, PlacementError) as error:
                log.info("jobset pod reconciler %s: %s", key, getattr(error, "message", error))
                self.queue.add_rate_limited(key)
            except Exception:
                log.exception("jobset pod reconciler %s: crashed", key)
                self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)

    async def reconcile(self, key: str) -> None:
        leader = self._pods.get(key)
        if leader is None:
            return
        name = leader["metadata"]["name"]
        job_key = labels_of(leader).get(JOBSET_JOB_KEY_LABEL)
        if job_key is None:
            raise PlacementError(f'job key label not found on leader pod: "{name}"')
        owner = controller_uid(leader)
        if owner is None:
            raise PlacementError(f'leader pod "{name}" has no controller owner')
        pods = self.pods_for_job(str(leader["metadata"].get("namespace") or ""), str(job_key), owner)
        topology_key = exclusive_topology(leader) or ""
        node = self._nodes.get(str(leader["spec"]["nodeName"]))
        if not placements_valid(leader_pod_topology(node, topology_key), pods, topology_key):
            log.info("jobset pod reconciler: deleting follower pods of leader %s", key)
            await self.delete_followers(pods)

    def pods_for_job(self, namespace: str, job_key: str, owner_uid: str) -> list[Obj]:
        """listPodsForJob: the cache's pods with this job-key whose controller is the leader's Job."""
        candidates = self._pods.by_index(POD_JOB_INDEX, f"{namespace}/{job_key}")
        return [pod for pod in candidates if controller_uid(pod) == owner_uid]

    async def delete_followers(self, pods: list[Obj]) -> None:
        """deleteFollowerPods: mark then delete every non-leader pod of `pods`; the first error raised."""
        slots = asyncio.Semaphore(MAX_PARALLELISM)

        async def delete(pod: Obj) -> None:
            async with slots:
                await self._delete_follower(pod)

        followers = [pod for pod in pods if not is_leader_pod(pod)]
        results = await asyncio.gather(*(delete(pod) for pod in followers), return_exceptions=True)
        errors = [result for result in results if isinstance(result, BaseException)]
        if errors:
            raise errors[0]

    async def _delete_follower(self, pod: Obj) -> None:
        meta = pod["metadata"]
        marked = with_violation_condition(pod, Clock.wall_time())
        if marked is not None:
            await self._api.update(
                "pods",
                marked,
                namespace=meta.get("namespace"),
                subresource="status",
                client=JOBSET_MANAGER_CLIENT,
            )
        try:
            await self._api.delete(
                "pods", meta["name"], namespace=meta.get("namespace"), client=JOBSET_MANAGER_CLIENT
            )
        except ApiError as error:
            if error.status != 404:
                raise
