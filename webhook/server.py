"""Wiring: settings → cluster client, informers, TLS, handlers, app → uvicorn. The one place that builds."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI

from webhook.app import create_app
from webhook.cache import Informer, LeaderDirectory, Store, leader_index_of
from webhook.handlers import Admission
from webhook.kube import LEADER_SELECTOR, KubeLiveApi, api_client, node_list_call, pod_list_call
from webhook.limits import AdmissionLimits
from webhook.metrics import Metrics
from webhook.protocol import header_timeout_protocol
from webhook.settings import Settings
from webhook.tls import ReloadingTLS

log = logging.getLogger(__name__)


@dataclass
class Webhook:
    settings: Settings
    app: FastAPI
    directory: LeaderDirectory
    tls: ReloadingTLS | None
    metrics: Metrics

    def uvicorn_config(self, **overrides: Any) -> uvicorn.Config:
        """The server settings (the benchmark reuses them for its no-op endpoint)."""
        options: dict[str, Any] = {
            "host": self.settings.host,
            "port": self.settings.port,
            "log_config": None,
            "access_log": False,
            "http": header_timeout_protocol(self.settings.header_timeout_seconds),
            "loop": "uvloop",
            "lifespan": "on",
            "timeout_graceful_shutdown": 10,
        }
        if self.tls is not None:
            options["ssl_context_factory"] = self.tls.factory
        options.update(overrides)
        return uvicorn.Config(self.app, **options)


def build_directory(settings: Settings, metrics: Metrics, api: Any) -> LeaderDirectory:
    rt, wt = settings.request_timeout_seconds, settings.watch_timeout_seconds
    pod_store = Store(leader_index_of)
    pods = Informer(
        "pods",
        pod_list_call(api),
        pod_store,
        metrics,
        label_selector=LEADER_SELECTOR,
        request_timeout=rt,
        watch_timeout=wt,
    )
    nodes = Informer("nodes", node_list_call(api), Store(), metrics, request_timeout=rt, watch_timeout=wt)
    live = KubeLiveApi(api, settings.live_lookup_timeout_seconds)
    return LeaderDirectory(pods, nodes, live, metrics)


def build(settings: Settings, api: Any | None = None) -> Webhook:
    metrics = Metrics()
    directory = build_directory(settings, metrics, api if api is not None else api_client(settings))
    tls = (
        None
        if settings.insecure_dev or settings.cert_dir is None
        else ReloadingTLS(settings.cert_dir, metrics)
    )
    if tls is not None:
        tls.reload_if_changed()

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        directory.start()
        poller = asyncio.create_task(tls.poll(settings.cert_reload_seconds)) if tls is not None else None
        log.info(
            "webhook started",
            extra={"port": settings.port, "tls": tls is not None, "strategy": settings.default_strategy},
        )
        try:
            yield
        finally:
            if poller is not None:
                poller.cancel()
            await asyncio.to_thread(directory.stop)

    app = create_app(
        Admission(settings.default_strategy, directory),
        directory,
        metrics,
        tls_loaded=(lambda: tls.loaded) if tls is not None else (lambda: True),
        lifespan=lifespan,
        limits=AdmissionLimits(settings.max_inflight_admissions, settings.body_timeout_seconds),
    )
    return Webhook(settings, app, directory, tls, metrics)


def serve(settings: Settings) -> None:
    webhook = build(settings)
    if webhook.tls is None:
        log.warning("serving plain HTTP (--insecure-dev): never use this in a cluster")
    uvicorn.Server(webhook.uvicorn_config()).run()
