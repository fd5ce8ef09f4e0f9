"""The exclusive-placement half of the JobSet manager: its pod and node caches, its pod webhooks and its pod
reconciler (kubernetes-sigs/jobset `main.go`: SetupPodIndexes, PodReconciler, webhooks.Setup).

The caches are the manager's own informers, separate from kube-controller-manager's (kubesim's other
controllers): a pod reaches them only through their own watch, never through another controller's
`assume`. The webhooks are registered with the API server's admission chain while `run` runs, and
unregistered when it ends, like a webhook server that goes away with its Deployment.
"""

from __future__ import annotations

from collections.abc import Callable

from kubesim.clock import Clock
from kubesim.interface import KubeApi, WebhookServing
from kubesim.stats import Stats

from .informer import Informer
from .jobset_pod_reconciler import JobSetPodReconciler
from .jobset_webhooks import JobSetPodWebhooks, pod_webhook_configurations


class JobSetExclusivePlacement:
    def __init__(
        self,
        *,
        api: KubeApi,
        clock: Clock,
        stats: Stats,
        admission: WebhookServing,
        pods: Informer,
        nodes: Informer,
    ) -> None:
        """`pods` and `nodes` are the manager's own informers; the caller runs them (see `informers`)."""
        self._admission = admission
        self.pods = pods
        self.nodes = nodes
        self.webhooks = JobSetPodWebhooks(pods=self.pods, nodes=self.nodes, stats=stats)
        self.reconciler = JobSetPodReconciler(api=api, clock=clock, pods=self.pods, nodes=self.nodes)

    @property
    def informers(self) -> tuple[Informer, ...]:
        return (self.pods, self.nodes)

    async def run(self) -> None:
        """Serve the webhooks and reconcile until cancelled (the informers run beside, as `Controllers.run`
        runs every informer)."""
        handlers = self.webhooks.handlers()
        unregister: list[Callable[[], None]] = [
            self._admission.serve_in_process(configuration, handlers, mutating=mutating)
            for configuration, mutating in pod_webhook_configurations()
        ]
        try:
            await self.reconciler.run()
        finally:
            for remove in unregister:
                remove()
