"""Admission handlers: an AdmissionRequest in, an AdmissionReview out.

They call the pure placement core and, for followers, the leader source (cache first, live on a miss);
for an exclusive JobSet child Job, the JobSet source (its startup order and all-or-nothing annotation, read
once per JobSet); for topology warnings, the label keys the nodes carry; for a queued exclusive workload's
CREATE, Kueue's queue it names (`webhook.kueue_queues`). JobSets are validated on CREATE and UPDATE
(`placement.jobset_validation`).
Out-of-scope requests (another kind, another operation, non-exclusive objects) return early: allowed,
no patch. No HTTP here: the routes in `webhook.app` read and write the wire.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol

from placement.admission import (
    DEFAULT_JOB_CONTROLLER_USERNAMES,
    Creator,
    LeaderState,
    PodPlan,
    Skip,
    Verdict,
    admit_pod,
    jobset_to_read,
    mutate_job,
    mutation_needs_leader,
    plan_pod,
    validate_pod,
    validation_needs_leader,
)
from placement.capacity import (
    NodeRoom,
    job_capacity_known,
    jobset_capacity_known,
    with_capacity_warning,
)
from placement.constants import DEFAULT_FOLLOWER_SHARDS, JOBSET_KIND, Strategy
from placement.jobset_validation import validate_jobset
from placement.kueue_tas import KueueQueue, job_queue_to_read, jobset_queue_to_read
from placement.objects import Obj, topology_key_of_job
from placement.topology import with_topology_warning
from webhook.cache import LeaderSource
from webhook.jobsets import JobSetSource
from webhook.kueue_queues import KueueQueueSource
from webhook.review import AdmissionRequest, AdmissionReview, BadReview, from_verdict

log = logging.getLogger(__name__)


class NodeLabelSource(Protocol):
    def label_keys(self) -> frozenset[str]: ...

    def rooms(self) -> Sequence[NodeRoom]: ...


class NoKueueQueues:
    """No queue read: Kueue's Topology Aware Scheduling is checked from the workload's annotations only."""

    async def read(self, namespace: str, name: str, defaulted: bool = False) -> KueueQueue:
        return None


class NoNodeLabels:
    """No node known: no topology or capacity warning."""

    def label_keys(self) -> frozenset[str]:
        return frozenset()

    def rooms(self) -> Sequence[NodeRoom]:
        return ()


@dataclass(frozen=True)
class Handled:
    review: AdmissionReview
    verdict: Verdict


def _context(request: AdmissionRequest) -> dict[str, str]:
    obj = request.get("object") or {}
    meta = obj.get("metadata") or {}
    return {
        "uid": request["uid"],
        "namespace": request.get("namespace", ""),
        "object": request.get("name") or meta.get("name") or meta.get("generateName", ""),
        "operation": request["operation"],
    }


def _log_verdict(request: AdmissionRequest, verdict: Verdict, job: str) -> None:
    context = {**_context(request), "reason": verdict.reason}
    if job:
        context["job"] = job
    if not verdict.allowed:
        log.info("denied: %s", verdict.message, extra=context)
    elif verdict.patch:
        log.info("patched with %d operations", len(verdict.patch), extra=context)
    else:
        log.debug("allowed", extra=context)


def _in_scope(request: AdmissionRequest, kind: str, operations: tuple[str, ...] = ("CREATE",)) -> Obj | None:
    """The object of a CREATE (or another of `operations`) of `kind`; None when the request is out of
    scope."""
    if request["kind"]["kind"] != kind or request["operation"] not in operations:
        return None
    obj = request.get("object")
    if obj is None:
        raise BadReview(f"request.object is missing on a {request['operation']} of a {kind}")
    return obj


def _lookup_failed(plan: PodPlan, err: Exception) -> Verdict:
    return Verdict(
        allowed=False,
        reason="lookup-error",
        message=f"could not look up the leader pod of Job {plan.job_object_key}: {err} "
        "(transient: the Job controller retries the pod)",
    )


class Admission:
    def __init__(
        self,
        default_strategy: Strategy,
        leaders: LeaderSource,
        jobsets: JobSetSource,
        *,
        take_over_jobset: bool = True,
        all_or_nothing: bool = False,
        follower_shards: int = DEFAULT_FOLLOWER_SHARDS,
        node_labels: NodeLabelSource | None = None,
        job_controllers: frozenset[str] = DEFAULT_JOB_CONTROLLER_USERNAMES,
        kueue_queues: KueueQueueSource | None = None,
    ) -> None:
        self.default_strategy = default_strategy
        self.leaders = leaders
        self.jobsets = jobsets
        self.take_over_jobset = take_over_jobset
        self.all_or_nothing = all_or_nothing
        self.follower_shards = follower_shards
        self.node_labels = node_labels or NoNodeLabels()
        self.job_controllers = job_controllers
        self.kueue_queues = kueue_queues or NoKueueQueues()

    def _creator(self, request: AdmissionRequest) -> Creator | None:
        username = request.get("userInfo", {}).get("username")
        return Creator(username, self.job_controllers) if username else None

    def _done(self, request: AdmissionRequest, verdict: Verdict, *, mutating: bool, job: str = "") -> Handled:
        if log.isEnabledFor(logging.INFO if not verdict.allowed or verdict.patch else logging.DEBUG):
            _log_verdict(request, verdict, job)
        return Handled(from_verdict(request["uid"], verdict, mutating=mutating), verdict)

    async def _pod(
        self,
        request: AdmissionRequest,
        needs_leader: Callable[[Obj, PodPlan], bool],
        decide: Callable[[Obj, PodPlan, LeaderState | None], Verdict],
        *,
        mutating: bool,
    ) -> Handled:
        pod = _in_scope(request, "Pod")
        if pod is None:
            return self._done(request, Verdict(allowed=True, reason="out-of-scope"), mutating=mutating)
        plan = plan_pod(pod, request.get("namespace", ""), self.default_strategy, self._creator(request))
        if isinstance(plan, Skip):
            return self._done(request, plan.verdict, mutating=mutating)
        state: LeaderState | None = None
        if needs_leader(pod, plan):
            try:
                state = await self.leaders.leader_state(plan)
            except Exception as err:
                log.warning("leader lookup failed: %s", err, extra=_context(request))
                return self._done(
                    request,
                    _lookup_failed(plan, err),
                    mutating=mutating,
                    job=plan.job_object_key,
                )
        return self._done(request, decide(pod, plan, state), mutating=mutating, job=plan.job_object_key)

    async def mutate_pods(self, request: AdmissionRequest) -> Handled:
        """Mutation and validation (`admit_pod`): the leader is looked up as the mutation needs it, which
        is everything the validation of its result needs too."""
        return await self._pod(
            request, lambda _pod, plan: mutation_needs_leader(plan), admit_pod, mutating=True
        )

    async def validate_pods(self, request: AdmissionRequest) -> Handled:
        return await self._pod(request, validation_needs_leader, validate_pod, mutating=False)

    async def mutate_jobs(self, request: AdmissionRequest) -> Handled:
        job = _in_scope(request, "Job")
        if job is None:
            return self._done(request, Verdict(allowed=True, reason="out-of-scope"), mutating=True)
        namespace = request.get("namespace", "")
        job_name = f"{namespace}/{(job.get('metadata') or {}).get('name', '')}"
        jobset = jobset_to_read(job, self.default_strategy)
        owner = None
        if jobset is not None:
            owner = await self.jobsets.startup(replace(jobset, namespace=jobset.namespace or namespace))
        queue = job_queue_to_read(job) if topology_key_of_job(job) is not None else None
        kueue_queue = await self.kueue_queues.read(namespace, *queue) if queue else None
        verdict = mutate_job(
            job,
            self.default_strategy,
            namespace=namespace,
            owner=owner,
            take_over_jobset=self.take_over_jobset,
            all_or_nothing=self.all_or_nothing,
            follower_shards=self.follower_shards,
            kueue_queue=kueue_queue,
        )
        verdict = with_topology_warning(verdict, job, self.node_labels.label_keys())
        if topology_key_of_job(job) is not None:
            rooms = self.node_labels.rooms()
            verdict = await _walking_nodes(
                job_capacity_known(job, rooms), partial(with_capacity_warning, verdict, job, rooms)
            )
        return self._done(request, verdict, mutating=True, job=job_name)

    async def validate_jobsets(self, request: AdmissionRequest) -> Handled:
        """CREATE and UPDATE of a JobSet (`placement.jobset_validation`)."""
        jobset = _in_scope(request, JOBSET_KIND, ("CREATE", "UPDATE"))
        if jobset is None:
            return self._done(request, Verdict(allowed=True, reason="out-of-scope"), mutating=False)
        creating = request["operation"] == "CREATE"
        queue = jobset_queue_to_read(jobset) if creating else None
        kueue_queue = await self.kueue_queues.read(request.get("namespace", ""), queue) if queue else None
        rooms = self.node_labels.rooms()
        verdict = await _walking_nodes(
            jobset_capacity_known(jobset, rooms),
            partial(
                validate_jobset,
                jobset,
                default_all_or_nothing=self.all_or_nothing,
                node_label_keys=self.node_labels.label_keys(),
                nodes=rooms,
                old=None if creating else request.get("oldObject"),
                kueue_queue=kueue_queue,
            ),
        )
        return self._done(request, verdict, mutating=False)


async def _walking_nodes(known: bool, decide: Callable[[], Verdict]) -> Verdict:
    """`decide()`, whose capacity warnings read the nodes' rooms: in a worker thread unless it only looks up
    what this look at the nodes answered before (`known`). The first look at 15,000 nodes after they
    changed takes a few 100 ms; a lookup takes microseconds, less than the hop to a thread and back."""
    if known:
        return decide()
    return await asyncio.to_thread(decide)
