"""kubesim's controllers: Job controller, scheduler, kubelets and JobSet controller on shared informers.

They talk to the API server only through `kubesim.interface.KubeApi`, like kube-controller-manager talks
to kube-apiserver, so every pod they create goes through admission (webhooks included).

    controllers = Controllers(api, ControllerSettings(time_scale=0.01), stats, admission=api.admission)
    task = asyncio.create_task(controllers.run())
    await controllers.fail_nodes("cloud.google.com/gke-nodepool=pool-03")   # fault injection

`admission` is where JobSet's pod webhooks are served (the API server's admission chain); it is required
while `settings.jobset_webhooks` is on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection

from kubesim.clock import Clock
from kubesim.interface import KubeApi, WebhookServing
from kubesim.stats import Stats

from .event_series import SeriesEventRecorder
from .events import EventRecorder
from .informer import Informer
from .job import JobController
from .jobset import JobSetController
from .jobset_manager import JobSetExclusivePlacement
from .kubelet import Kubelet
from .kubelet_events import NodeEventRecorders
from .scheduler import Scheduler
from .settings import ControllerSettings

__all__ = ["COMPONENTS", "ControllerSettings", "Controllers", "run_controllers"]

COMPONENTS: tuple[str, ...] = ("job-controller", "scheduler", "kubelet", "jobset-controller")

log = logging.getLogger(__name__)


class Controllers:
    """Everything kube-controller-manager, kube-scheduler, the kubelets and JobSet would run."""

    def __init__(
        self,
        api: KubeApi,
        settings: ControllerSettings,
        stats: Stats,
        *,
        admission: WebhookServing | None = None,
    ) -> None:
        self.settings = settings
        self.clock = Clock(settings.time_scale)
        self.pods = Informer(api, "pods", stats)
        self.nodes = Informer(api, "nodes", stats)
        self.namespaces = Informer(api, "namespaces", stats)
        self.jobs = Informer(api, "jobs", stats)
        self.jobsets = Informer(api, "jobsets", stats)
        record = settings.record_events
        # Event APIs as upstream: kube-controller-manager, JobSet (v0.8-v0.11) and the kubelets use the
        # legacy core/v1 recorder; kube-scheduler uses events.k8s.io/v1 with EventSeries.
        self._recorders = {
            "job-controller": EventRecorder(api, "job-controller", record, clock=self.clock),
            "jobset-controller": EventRecorder(
                api, "jobset", record, client="jobset-controller", clock=self.clock
            ),
        }
        self.scheduler_events = SeriesEventRecorder(
            api, "default-scheduler", record, client="scheduler", clock=self.clock
        )
        self.kubelet_events = NodeEventRecorders(api, record, clock=self.clock)
        self.job_controller = JobController(
            api=api,
            settings=settings,
            clock=self.clock,
            jobs=self.jobs,
            pods=self.pods,
            recorder=self._recorders["job-controller"],
        )
        self.scheduler = Scheduler(
            api=api,
            settings=settings,
            stats=stats,
            clock=self.clock,
            pods=self.pods,
            nodes=self.nodes,
            namespaces=self.namespaces,
            recorder=self.scheduler_events,
        )
        self.kubelet = Kubelet(
            api=api,
            settings=settings,
            stats=stats,
            clock=self.clock,
            pods=self.pods,
            nodes=self.nodes,
            events=self.kubelet_events,
        )
        self.jobset_controller = JobSetController(
            api=api,
            settings=settings,
            clock=self.clock,
            jobsets=self.jobsets,
            jobs=self.jobs,
            recorder=self._recorders["jobset-controller"],
        )
        self.jobset_placement: JobSetExclusivePlacement | None = None
        if settings.jobset_webhooks:
            if admission is None:
                raise ValueError(
                    "jobset_webhooks needs the API server's admission chain (admission=api.admission); "
                    "set jobset_webhooks=False to run without JobSet's pod webhooks"
                )
            self.jobset_placement = JobSetExclusivePlacement(
                api=api, clock=self.clock, stats=stats, admission=admission
            )
        self._informers: list[Informer] = [self.namespaces, self.nodes, self.pods, self.jobs, self.jobsets]
        self._started = asyncio.Event()

    async def run(self, components: Collection[str] = COMPONENTS) -> None:
        """Run until cancelled; `components` picks a subset of COMPONENTS (tests drive the rest by hand)."""
        unknown = set(components) - set(COMPONENTS)
        if unknown:
            raise ValueError(f"unknown controller components {sorted(unknown)}; choose from {COMPONENTS}")
        log.info("controllers starting: %s (time scale %s)", ", ".join(components), self.settings.time_scale)
        runners = {
            "job-controller": self.job_controller.run,
            "scheduler": self.scheduler.run,
            "kubelet": self.kubelet.run,
            "jobset-controller": self.jobset_controller.run,
        }
        placement = self.jobset_placement if "jobset-controller" in components else None
        if placement is not None:
            self._informers += placement.informers
        self._started.set()
        async with asyncio.TaskGroup() as group:
            for informer in (self.namespaces, self.nodes, self.pods, self.jobs, self.jobsets):
                group.create_task(informer.run())
            for recorder in self._recorders.values():
                group.create_task(recorder.run())
            group.create_task(self.scheduler_events.run())
            group.create_task(self.kubelet_events.run())
            for name in components:
                group.create_task(runners[name]())
            if placement is not None:  # the JobSet manager's webhooks, pod reconciler and their caches
                group.create_task(placement.run())

    async def wait_synced(self) -> None:
        """Until `run` has started and every informer it runs has completed its first list."""
        await self._started.wait()
        await asyncio.gather(*(i.synced.wait() for i in self._informers))

    async def fail_nodes(self, label_selector: str) -> dict[str, int]:
        """Nodes matching `label_selector` go NotReady (unreachable taints) and their pods fail."""
        return await self.kubelet.fail_nodes(label_selector)

    async def recover_nodes(self, label_selector: str) -> dict[str, int]:
        return await self.kubelet.recover_nodes(label_selector)


async def run_controllers(
    api: KubeApi,
    settings: ControllerSettings,
    stats: Stats,
    controllers: Controllers | None = None,
    *,
    admission: WebhookServing | None = None,
) -> None:
    """Run all controllers until cancelled; pass `controllers` to keep a handle (e.g. for fail_nodes)."""
    await (controllers or Controllers(api, settings, stats, admission=admission)).run()
