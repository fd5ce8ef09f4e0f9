"""Informer events into work keys: the handlers only enqueue, and forget what was noted about an object
that left its cache. They run on the informers' threads and are quick."""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from kubekit.controller import Controller, Reconciler
from kubekit.keys import object_key
from placement.objects import Obj, is_leader, node_name, owner_job_key
from resizer.manager import Resizer


class ForgettingReconciler(Reconciler, Protocol):
    def forget(self, key: str) -> None: ...


F = TypeVar("F", bound=ForgettingReconciler)


class JobKeysHandler(Generic[F]):
    """The Jobs of one controller's own cache (pending Jobs for `resize`, finished pinning Jobs for
    `retire`, whose first list finds the ones that finished while no resizer ran): every change is a
    reason to look again, and a Job gone is forgotten."""

    def __init__(self, controller: Controller[F]) -> None:
        self.controller = controller

    def on_upsert(self, old: Obj | None, new: Obj) -> None:
        self.controller.enqueue(object_key(new))

    def on_delete(self, old: Obj) -> None:
        self.controller.reconciler.forget(object_key(old))

    def on_relist(self, objects: list[Obj]) -> None:
        for job in objects:
            self.controller.enqueue(object_key(job))


class LeaderHandler:
    """Leader pods: a bind lets the Job grow or its followers go; a gang's leaders decide its Jobs' growth
    and the all-or-nothing queue."""

    def __init__(self, resizer: Resizer) -> None:
        self.resizer = resizer

    def on_upsert(self, old: Obj | None, new: Obj) -> None:
        job_key = owner_job_key(new)
        if job_key is None:
            return
        gang_changed = self._track(new, present=True)
        if is_leader(new) and node_name(new) and (old is None or not node_name(old)):
            self.resizer.bind_times.bound(job_key)
        self.resizer.enqueue_job(job_key)
        self.resizer.enqueue_gangs(changed=gang_changed)

    def on_delete(self, old: Obj) -> None:
        job_key = owner_job_key(old)
        if job_key is not None and is_leader(old):
            self.resizer.bind_times.forget(job_key)
        self.resizer.enqueue_gangs(changed=self._track(old, present=False))

    def on_relist(self, objects: list[Obj]) -> None:
        for pod in objects:
            self.on_upsert(None, pod)

    def _track(self, pod: Obj, present: bool) -> bool:
        """Keep the gang index; a gang leader's change looks at every Job of its JobSet again (they grow
        once every leader is bound). True when `pod` is in a gang."""
        gang = self.resizer.gang_index.track(pod, present)
        if gang is None:
            return False
        for job_key in self.resizer.gang_index.job_keys(gang):
            self.resizer.enqueue_job(job_key)
        return True


class GangJobHandler:
    """Admitted all-or-nothing Jobs: their leaders count in the queue only while the Job is cached, so a
    Job that appears (or goes) looks at its leaders, its JobSet's Jobs and the queue again."""

    def __init__(self, resizer: Resizer) -> None:
        self.resizer = resizer

    def on_upsert(self, old: Obj | None, new: Obj) -> None:
        self._changed(new)

    def on_delete(self, old: Obj) -> None:
        self._changed(old)

    def on_relist(self, objects: list[Obj]) -> None:
        for job in objects:
            self._changed(job)

    def _changed(self, job: Obj) -> None:
        key = object_key(job)
        gangs = {
            gang
            for pod in self.resizer.caches.leaders.by_index(key)
            if (gang := self.resizer.gang_index.track(pod, present=True)) is not None
        }
        for gang in gangs:
            for job_key in self.resizer.gang_index.job_keys(gang):
                self.resizer.enqueue_job(job_key)
        self.resizer.enqueue_job(key)
        self.resizer.enqueue_gangs(changed=bool(gangs))


class FollowerHandler:
    """Unbound gated or pinned followers, including gated ones created after their leader bound (the race
    the webhook can lose) and pinned ones whose leader was re-created elsewhere."""

    def __init__(self, resizer: Resizer) -> None:
        self.resizer = resizer

    def on_upsert(self, old: Obj | None, new: Obj) -> None:
        self.resizer.followers.enqueue(owner_job_key(new))

    def on_delete(self, old: Obj) -> None:
        self.resizer.followers.reconciler.forget(object_key(old))

    def on_relist(self, objects: list[Obj]) -> None:
        for pod in objects:
            self.resizer.followers.enqueue(owner_job_key(pod))
