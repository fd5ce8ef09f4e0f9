"""Wiring: settings → cluster client, informers, TLS, handlers, app → uvicorn. The one place that builds."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI

from kubekit.client import Kube, Resource, Timeouts, build_api_client
from kubekit.informer import Handler, Informer, Store
from kubekit.projection import FieldProjection
from placement.cached_fields import LEADER_POD_FIELDS, NODE_FIELDS, FieldSpec
from placement.objects import Obj, owner_job_key
from webhook.app import create_app
from webhook.cache import LEADER_SELECTOR, KubeLiveApi, LeaderDirectory
from webhook.handlers import Admission
from webhook.jobsets import JobSetDirectory, KubeJobSetApi
from webhook.kueue_queues import KubeKueueQueueApi, KueueQueues
from webhook.limits import AdmissionLimits
from webhook.listener import GuardedServer, ServerLimits
from webhook.metrics import Metrics
from webhook.node_labels import NodeLabelKeys
from webhook.protocol import HeaderLimits
from webhook.settings import WebhookSettings
from webhook.tls import ReloadingTLS

log = logging.getLogger(__name__)


@dataclass
class Webhook:
    settings: WebhookSettings
    app: FastAPI
    directory: LeaderDirectory
    jobsets: JobSetDirectory
    node_labels: NodeLabelKeys
    tls: ReloadingTLS | None
    metrics: Metrics

    def server(self, **overrides: Any) -> GuardedServer:
        """The HTTP server: uvicorn behind the listener of `webhook.listener` (the benchmark reuses it)."""
        options: dict[str, Any] = {
            "host": self.settings.host,
            "port": self.settings.port,
            "log_config": None,
            "access_log": False,
            "loop": "uvloop",
            "lifespan": "on",
            "timeout_keep_alive": KEEP_ALIVE_SECONDS,
            "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_SECONDS,
        }
        options.update(overrides)
        return GuardedServer(
            uvicorn.Config(self.app, **options),
            self.tls.context if self.tls is not None else None,
            server_limits(self.settings),
            self.metrics,
        )


GRACEFUL_SHUTDOWN_SECONDS = 10
"""After SIGTERM the server stops accepting, closes idle connections and answers the requests in flight for at
most this long, then stops its informers. The chart's terminationGracePeriodSeconds must exceed its preStop
sleep plus this (`ep.webhook.gracefulShutdownSeconds`, checked at render)."""

KEEP_ALIVE_SECONDS = 120
"""An idle keep-alive connection is closed after this: longer than kube-apiserver's own idle-connection
timeout (90 s, client-go's transport default), so the API server closes idle connections first. With
uvicorn's default of 5 s the webhook closed connections the API server was reusing, and a pod admission sent
on one just then failed with EOF (seen under load in the kube tier). Idle connections stay bounded by the
listener's per-client and total limits."""


def server_limits(settings: WebhookSettings) -> ServerLimits:
    return ServerLimits(
        max_connections=settings.max_connections,
        max_connections_per_client=settings.max_connections_per_client,
        tls_handshake_timeout=settings.tls_handshake_timeout_seconds,
        headers=HeaderLimits(settings.header_timeout_seconds, settings.max_header_bytes),
    )


def kube_for(settings: WebhookSettings) -> Kube:
    api_client = build_api_client(
        settings.kubeconfig, settings.server, user_agent="exclusive-placement-webhook"
    )
    timeouts = Timeouts(
        read=settings.request_timeout_seconds, watch_server_seconds=settings.watch_timeout_seconds
    )
    return Kube(api_client, timeouts)


def build_directory(
    settings: WebhookSettings, metrics: Metrics, kube: Kube, node_labels: NodeLabelKeys | None = None
) -> LeaderDirectory:
    """The leader directory's informers; `node_labels`, when given, follows the node informer's events."""

    def informer(
        resource: Resource,
        store: Store,
        label_selector: str | None,
        fields: FieldSpec,
        *,
        metadata_only: bool = False,
        handler: Handler | None = None,
        project: Callable[[Obj], Obj] | None = None,
    ) -> Informer:
        metrics.cache_objects.labels(resource).set_function(store.__len__)
        return Informer(
            kube,
            resource,
            name=resource,
            namespace=None,
            label_selector=label_selector,
            store=store,
            project=project or FieldProjection(fields),
            metadata_only=metadata_only,
            handler=handler,
            on_restart=lambda name, reason: metrics.watch_restarts.labels(name, reason).inc(),
        )

    # Only what the rules read is cached (placement.cached_fields): at 15,000 nodes a whole Node each
    # would cost more than the rest of the process.
    pods = informer("pods", Store(index=owner_job_key), LEADER_SELECTOR, LEADER_POD_FIELDS)
    # A node is read for its labels, whether it is cordoned and its allocatable (the capacity warnings):
    # whole Nodes are listed and watched; the allocatable is parsed on arrival (`NodeLabelKeys.project`)
    # and the cache keeps the labels and the cordon only.
    project = node_labels.project if node_labels is not None else None
    nodes = informer("nodes", Store(), None, NODE_FIELDS, handler=node_labels, project=project)
    return LeaderDirectory(pods, nodes, KubeLiveApi(kube, settings.live_lookup_timeout_seconds), metrics)


def build(settings: WebhookSettings) -> Webhook:
    metrics = Metrics()
    kube = kube_for(settings)
    node_labels = NodeLabelKeys()
    directory = build_directory(settings, metrics, kube, node_labels)
    jobsets = JobSetDirectory(KubeJobSetApi(kube, settings.live_lookup_timeout_seconds), metrics)
    kueue_queues = KueueQueues(
        KubeKueueQueueApi(kube, settings.live_lookup_timeout_seconds),
        metrics,
        budget=2 * settings.live_lookup_timeout_seconds,
    )
    tls = (
        None
        if settings.insecure_dev or settings.cert_dir is None
        else ReloadingTLS(settings.cert_dir, metrics, settings.client_ca_file)
    )
    if tls is not None:
        tls.reload_if_changed()

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        directory.start()
        poller = asyncio.create_task(tls.poll(settings.cert_reload_seconds)) if tls is not None else None
        log.info(
            "webhook started",
            extra={
                "port": settings.port,
                "tls": tls is not None,
                "strategy": settings.default_strategy,
                "jobset_takeover": settings.jobset_takeover,
                "all_or_nothing": settings.all_or_nothing,
                "follower_shards": settings.follower_shards,
            },
        )
        try:
            yield
        finally:
            if poller is not None:
                poller.cancel()
            await asyncio.to_thread(directory.stop)

    app = create_app(
        Admission(
            settings.default_strategy,
            directory,
            jobsets,
            take_over_jobset=settings.jobset_takeover,
            all_or_nothing=settings.all_or_nothing,
            follower_shards=settings.follower_shards,
            node_labels=node_labels,
            job_controllers=frozenset(settings.job_controller_usernames),
            kueue_queues=kueue_queues,
        ),
        directory,
        metrics,
        tls_loaded=(lambda: tls.loaded) if tls is not None else (lambda: True),
        lifespan=lifespan,
        limits=AdmissionLimits(
            max_inflight=settings.max_inflight_admissions,
            body_timeout=settings.body_timeout_seconds,
            memory_bytes=settings.admission_memory_mib * 1024 * 1024,
        ),
        require_client_certificate=settings.client_ca_file is not None,
    )
    return Webhook(settings, app, directory, jobsets, node_labels, tls, metrics)


def serve(settings: WebhookSettings) -> None:
    webhook = build(settings)
    if webhook.tls is None:
        log.warning("serving plain HTTP (--insecure-dev): never use this in a cluster")
    webhook.server().run()
