"""The resizer: five controllers over the informers' caches, as controller-runtime's manager runs them.

| controller | keys | reconciler |
|---|---|---|
| `resize` | pending Jobs | `resizer.resize.ResizeReconciler` |
| `followers` | Jobs with unbound gated or pinned followers | `resizer.followers.FollowerReconciler` |
| `all_or_nothing` | one, `GANG_KEY` | `resizer.gangs.GangReconciler` |
| `retire` | finished Jobs labelled `pin-followers` | `resizer.retire.RetireReconciler` |
| `rewind` | suspended Jobs labelled `resize: done` | `resizer.rewind.RewindReconciler` |

Each has its own work queue and workers. What they share: the caches (`resizer.caches`), the gang index
(`resizer.gang_index`), the bind times (`resizer.bind_times`), the API (`resizer.api`), the metrics and the
`Recorder` of what they did (`resizer.recorder`). `resizer.handlers` turns informer events into keys.

Level-triggered: the work for a key is derived from the current caches every time, so enqueueing a key
too often is harmless and enqueueing everything after a (re-)list or a leadership change is always safe.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kubekit.client import Kube
from kubekit.controller import Controller, Leadership
from kubekit.workqueue import WorkQueue
from resizer.api import Api, rfc3339_now
from resizer.bind_times import BindTimes
from resizer.caches import Caches
from resizer.context import Context
from resizer.followers import FollowerReconciler
from resizer.gang_index import GangIndex
from resizer.gangs import DEFAULT_GANG_TIMEOUT, GANG_KEY, GangReconciler
from resizer.metrics import Metrics
from resizer.recorder import Discard, Recorder
from resizer.resize import ResizeReconciler
from resizer.retire import RetireReconciler
from resizer.rewind import RewindReconciler


class Resizer:
    def __init__(
        self,
        kube: Kube,
        caches: Caches,
        metrics: Metrics,
        leadership: Leadership,
        *,
        dry_run: bool = False,
        recorder: Recorder | None = None,
        new_queue: Callable[[], WorkQueue] = WorkQueue,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], str] = rfc3339_now,
        epoch: Callable[[], float] = time.time,
        gang_timeout: float = DEFAULT_GANG_TIMEOUT,
        pin_followers: bool = True,
    ) -> None:
        """`pin_followers`: resized Jobs get the `pin-followers` label (the follower policy's params, on the
        policy path of pod admission); the `retire` controller removes it from finished Jobs either way."""
        self.caches = caches
        self.metrics = metrics
        self.gang_index = GangIndex(caches.leaders, caches.gang_jobs)
        self.bind_times = BindTimes(clock)
        context = Context(
            Api(kube, metrics, leadership),
            caches,
            self.gang_index,
            self.bind_times,
            metrics,
            recorder if recorder is not None else Discard(),
            dry_run,
        )
        self.resize = Controller(
            "resize", ResizeReconciler(context, pin_followers=pin_followers), new_queue(), metrics, leadership
        )
        self.followers = Controller(
            "followers", FollowerReconciler(context, wall_clock=wall_clock), new_queue(), metrics, leadership
        )
        self.all_or_nothing = Controller(
            "all-or-nothing",
            GangReconciler(context, timeout=gang_timeout, epoch=epoch, wall_clock=wall_clock),
            new_queue(),
            metrics,
            leadership,
        )
        self.retire = Controller("retire", RetireReconciler(context), new_queue(), metrics, leadership)
        self.rewind = Controller("rewind", RewindReconciler(context), new_queue(), metrics, leadership)
        metrics.queue_depth.set_function(lambda: sum(len(controller) for controller in self.controllers))

    @property
    def controllers(
        self,
    ) -> tuple[
        Controller[ResizeReconciler],
        Controller[FollowerReconciler],
        Controller[GangReconciler],
        Controller[RetireReconciler],
        Controller[RewindReconciler],
    ]:
        return (self.resize, self.followers, self.all_or_nothing, self.retire, self.rewind)

    # --- what to look at again -------------------------------------------------------------------------

    def enqueue_job(self, key: str) -> None:
        """This Job's leader changed: each controller that holds work of the Job looks again."""
        if self.caches.jobs.get(key) is not None:
            self.resize.enqueue(key)
        if self.caches.followers.by_index(key):
            self.followers.enqueue(key)

    def enqueue_gangs(self, *, changed: bool = False) -> None:
        """Look at the all-or-nothing queue again: when a gang `changed` (also its last leader gone, so
        that what was noted about it is forgotten), else when there is one (a leader or a node changed)."""
        if changed or self.gang_index:
            self.all_or_nothing.enqueue(GANG_KEY)

    def enqueue_all(self) -> None:
        """Everything that may still need work: pending Jobs, Jobs with unbound followers, the gang queue,
        finished Jobs to retire, suspended Jobs to rewind."""
        for job_key in self.caches.jobs.keys():  # noqa: SIM118 (a Store, not a dict)
            self.resize.enqueue(job_key)
        for job_key in self.caches.finished_pinning.keys():  # noqa: SIM118 (a Store, not a dict)
            self.retire.enqueue(job_key)
        for job_key in self.caches.suspended_resized.keys():  # noqa: SIM118 (a Store, not a dict)
            self.rewind.enqueue(job_key)
        for job_key in self.caches.followers.index_values():
            self.followers.enqueue(job_key)
        self.enqueue_gangs()

    def footprint(self) -> dict[str, int]:
        """Entries of every structure that grows with Jobs (tests pin that Jobs gone leave none)."""
        caches = self.caches
        return {
            "pending_jobs": len(caches.jobs),
            "leaders": len(caches.leaders),
            "leader_index": len(caches.leaders.index_values()),
            "followers": len(caches.followers),
            "gang_jobs": len(caches.gang_jobs),
            "holders": len(caches.holders),
            "finished_pinning": len(caches.finished_pinning),
            "suspended_resized": len(caches.suspended_resized),
            "follower_index": len(caches.followers.index_values()),
            "bind_times": len(self.bind_times),
            **self.gang_index.footprint(),
            **self.resize.reconciler.footprint(),
            **self.followers.reconciler.footprint(),
            **self.all_or_nothing.reconciler.footprint(),
            **self.retire.reconciler.footprint(),
            **self.rewind.reconciler.footprint(),
            **{
                f"{controller.name}_queue_{part}": count
                for controller in self.controllers
                for part, count in controller.queue.footprint().items()
            },
        }

    # --- workers ---------------------------------------------------------------------------------------

    def start_workers(self, count: int) -> None:
        """`count` workers each for the resize and the followers; one for the single all-or-nothing key, one
        each for the retire and the rewind (one patch per finished or suspended Job)."""
        self.resize.start(count)
        self.followers.start(count)
        self.all_or_nothing.start(1)
        self.retire.start(1)
        self.rewind.start(1)

    @property
    def workers_started(self) -> bool:
        return any(controller.started for controller in self.controllers)

    def workers_alive(self) -> bool:
        return all(controller.alive() for controller in self.controllers)

    def stop_workers(self, timeout: float = 5.0) -> None:
        """Let running reconciles finish, waiting `timeout` seconds in total (not per worker)."""
        deadline = time.monotonic() + timeout
        for controller in self.controllers:
            controller.shut_down()
        for controller in self.controllers:
            controller.join(deadline)
