"""kubesim's controllers: Job controller, scheduler, kubelets and JobSet controller, each on its own client.

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

from .client import ComponentClient, TokenBucket
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
    """Everything kube-controller-manager, kube-scheduler, the kubelets and JobSet would run.

    Each process keeps its own informers (a write one process `assume`s is seen by the others only
    through their watch, `watch_delivery_seconds` later), and each component talks through its own
    `ComponentClient`: client-go's token bucket at upstream's default qps/burst plus the request latency.
    """

    def __init__(
        self,
        api: KubeApi,
        settings: ControllerSettings,
        stats: Stats,
        *,
        admission: WebhookServing | None = None,
        clock: Clock | None = None,
    ) -> None:
        """`clock`: simulated time (default: `settings.time_scale` on the wall clock; tests pass a virtual
        one, `kubesim.clock.Clock.virtual`)."""
        self.settings = settings
        self.clock = clock if clock is not None else Clock(settings.time_scale)
        self._informers: list[Informer] = []
        # kube-controller-manager's shared informers (the kubelets read them too, see docs)
        self.pods = self._informer(api, "pods", stats)
        self.jobs = self._informer(api, "jobs", stats)
        self.nodes = self._informer(api, "nodes", stats)
        scheduler_pods = self._informer(api, "pods", stats)
        scheduler_nodes = self._informer(api, "nodes", stats)
        self.namespaces = self._informer(api, "namespaces", stats)
        self.jobsets = self._informer(api, "jobsets", stats)
        jobset_jobs = self._informer(api, "jobs", stats)

        job_client = self._client(
            api, "job-controller", stats, settings.job_controller_api_qps, settings.job_controller_api_burst
        )
        scheduler_client = self._client(
            api, "scheduler", stats, settings.scheduler_api_qps, settings.scheduler_api_burst
        )
        # kube-scheduler records Events through a second clientset built from the same config
        scheduler_events_client = self._client(
            api, "scheduler-events", stats, settings.scheduler_api_qps, settings.scheduler_api_burst
        )
        jobset_client = self._client(
            api, "jobset-controller", stats, settings.jobset_api_qps, settings.jobset_api_burst
        )
        # the kubelets' per-node budgets (kubeAPIQPS 50 / kubeAPIBurst 100 each) are never reached here
        kubelet_client = self._client(api, "kubelet", stats, 0.0, 0)
        self.clients = {
            c.name: c for c in (job_client, scheduler_client, scheduler_events_client, jobset_client)
        }
        record = settings.record_events
        # Event APIs as upstream: kube-controller-manager, JobSet (v0.8-v0.11) and the kubelets use the
        # legacy core/v1 recorder; kube-scheduler uses events.k8s.io/v1 with EventSeries.
        self._recorders = {
            "job-controller": EventRecorder(job_client, "job-controller", record, clock=self.clock),
            "jobset-controller": EventRecorder(
                jobset_client, "jobset", record, client="jobset-controller", clock=self.clock
            ),
        }
        self.scheduler_events = SeriesEventRecorder(
            scheduler_events_client, "default-scheduler", record, client="scheduler", clock=self.clock
        )
        self.kubelet_events = NodeEventRecorders(kubelet_client, record, clock=self.clock)
        self.job_controller = JobController(
            api=job_client,
            settings=settings,
            clock=self.clock,
            jobs=self.jobs,
            pods=self.pods,
            recorder=self._recorders["job-controller"],
        )
        self.scheduler = Scheduler(
            api=scheduler_client,
            settings=settings,
            stats=stats,
            clock=self.clock,
            pods=scheduler_pods,
            nodes=scheduler_nodes,
            namespaces=self.namespaces,
            recorder=self.scheduler_events,
        )
        self.kubelet = Kubelet(
            api=kubelet_client,
            settings=settings,
            stats=stats,
            clock=self.clock,
            pods=self.pods,
            nodes=self.nodes,
            events=self.kubelet_events,
        )
        self.jobset_controller = JobSetController(
            api=jobset_client,
            settings=settings,
            clock=self.clock,
            jobsets=self.jobsets,
            jobs=jobset_jobs,
            recorder=self._recorders["jobset-controller"],
        )
        self.jobset_placement: JobSetExclusivePlacement | None = None
        if settings.jobset_webhooks:
            if admission is None:
                raise ValueError(
                    "jobset_webhooks needs the API server's admission chain (admission=api.admission); "
                    "set jobset_webhooks=False to run without JobSet's pod webhooks"
                )
            # the JobSet manager's own pod and node caches, and its client (shared with its controller)
            self.jobset_placement = JobSetExclusivePlacement(
                api=jobset_client,
                clock=self.clock,
                stats=stats,
                admission=admission,
                pods=Informer(
                    api, "pods", stats, clock=self.clock, delivery_seconds=settings.watch_delivery_seconds
                ),
                nodes=Informer(
                    api, "nodes", stats, clock=self.clock, delivery_seconds=settings.watch_delivery_seconds
                ),
            )
        self._started = asyncio.Event()

    def _informer(self, api: KubeApi, resource: str, stats: Stats) -> Informer:
        informer = Informer(
            api, resource, stats, clock=self.clock, delivery_seconds=self.settings.watch_delivery_seconds
        )
        self._informers.append(informer)
        return informer

    def _client(self, api: KubeApi, name: str, stats: Stats, qps: float, burst: int) -> ComponentClient:
        return ComponentClient(
            api,
            name,
            clock=self.clock,
            stats=stats,
            bucket=TokenBucket(qps, burst, self.clock) if qps > 0 else None,
            latency=self.settings.api_request_latency_seconds,
        )

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
            for informer in self._informers:
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
