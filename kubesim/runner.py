"""Wiring: API server + generated nodes + controllers + HTTP(S) server on ONE asyncio event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from kubesim.apiserver.faults import FaultInjector, parse_faults
from kubesim.apiserver.http import NodeFaults, create_app
from kubesim.apiserver.server import ApiServer
from kubesim.controllers import Controllers, ControllerSettings
from kubesim.kubeconfig import write_kubeconfig
from kubesim.stats import Stats

log = logging.getLogger(__name__)

DEFAULT_KUBECONFIG = Path(".kubesim/kubeconfig")


@dataclass
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 6443
    """0 picks a free port."""
    nodes: int = 64
    pools: int = 8
    gpus_per_node: int = 8
    time_scale: float = 1.0
    """Real seconds per simulated second for every controller delay (0.01 = 100x faster)."""
    kubeconfig: Path = DEFAULT_KUBECONFIG
    tls: bool = False
    faults: str | None = None
    """Fault spec for external HTTP requests, see kubesim.apiserver.faults."""
    seed: int | None = None
    controllers: bool = True
    controller_overrides: dict[str, Any] = field(default_factory=dict)
    """Extra `ControllerSettings` fields (scheduler throughput, kubelet delays, pod run time, ...)."""
    watch_history: int = 10_000
    """Events kept per resource for watches; a watch from an older resourceVersion gets 410 Gone."""
    bookmark_interval: float = 5.0

    def validate(self) -> None:
        """Raise ValueError naming the bad option (the CLI prints it and exits 2)."""
        if self.nodes < 1:
            raise ValueError(f"--nodes must be at least 1, got {self.nodes}")
        if not 1 <= self.pools <= self.nodes:
            raise ValueError(f"--pools must be between 1 and --nodes ({self.nodes}), got {self.pools}")
        if self.gpus_per_node < 0:
            raise ValueError(f"--gpus-per-node must not be negative, got {self.gpus_per_node}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--port must be within 0..65535, got {self.port}")
        if self.watch_history < 1:
            raise ValueError(f"--watch-history must be at least 1, got {self.watch_history}")
        parse_faults(self.faults)
        ControllerSettings(time_scale=self.time_scale, seed=self.seed or 0, **self.controller_overrides)


@dataclass
class Running:
    """What a started kubesim exposes to its caller (the CLI prints it, tests read it)."""

    url: str
    port: int
    kubeconfig: Path
    api: ApiServer
    stats: Stats
    server: uvicorn.Server
    ca_pem: bytes | None = None


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: without it, a response written as headers + body waits for the
    # client's delayed ACK (~40 ms per request).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _tls_files(host: str, workdir: Path) -> tuple[dict[str, str], bytes]:
    """A fresh CA and serving certificate: uvicorn's ssl settings and the CA PEM for the kubeconfig."""
    from certs.generate import create_ca, create_serving_cert

    ca = create_ca("kubesim-ca")
    ips = [host] if host.replace(".", "").isdigit() or ":" in host else []
    serving = create_serving_cert(
        ca, ["localhost", "kubernetes", "kubernetes.default.svc"], ips or ["127.0.0.1"]
    )
    cert_file, key_file = workdir / "apiserver.crt", workdir / "apiserver.key"
    cert_file.write_bytes(serving.cert_pem)
    key_file.write_bytes(serving.key_pem)
    key_file.chmod(0o600)
    return {"ssl_certfile": str(cert_file), "ssl_keyfile": str(key_file)}, ca.cert_pem


async def _bootstrap_nodes(api: ApiServer, options: ServeOptions) -> None:
    from kubesim.cluster import make_nodes

    for node in make_nodes(
        options.nodes, options.pools, gpus_per_node=options.gpus_per_node, seed=options.seed or 0
    ):
        await api.create("nodes", node, client="bootstrap", copy=False)


def _controllers(api: ApiServer, options: ServeOptions, stats: Stats) -> Controllers | None:
    if not options.controllers:
        return None
    settings = ControllerSettings(
        time_scale=options.time_scale, seed=options.seed or 0, **options.controller_overrides
    )
    return Controllers(api, settings, stats, admission=api.admission)


def _node_faults(controllers: Controllers) -> NodeFaults:
    async def act(action: str, selector: str) -> dict[str, int]:
        if action == "fail":
            return await controllers.fail_nodes(selector)
        return await controllers.recover_nodes(selector)

    return act


async def serve(
    options: ServeOptions,
    *,
    on_ready: Callable[[Running], None] | None = None,
) -> None:
    """Run until SIGTERM/SIGINT (or `Running.server.should_exit`), then shut everything down cleanly."""
    options.validate()
    faults = parse_faults(options.faults)
    stats = Stats()
    api = ApiServer(stats, history_size=options.watch_history, seed=options.seed)
    await _bootstrap_nodes(api, options)
    sock = _bind(options.host, options.port)
    port = sock.getsockname()[1]
    host_for_url = f"[{options.host}]" if ":" in options.host else options.host
    with tempfile.TemporaryDirectory(prefix="kubesim-tls-") as workdir:
        tls_settings: dict[str, str] = {}
        ca_pem: bytes | None = None
        if options.tls:
            tls_settings, ca_pem = _tls_files(options.host, Path(workdir))
        scheme = "https" if options.tls else "http"
        url = f"{scheme}://{host_for_url}:{port}"
        controllers = _controllers(api, options, stats)
        app = create_app(
            api,
            faults=FaultInjector(faults, stats, options.seed) if faults.active else None,
            bookmark_interval=options.bookmark_interval,
            server_address=f"{host_for_url}:{port}",
            node_faults=_node_faults(controllers) if controllers is not None else None,
            seed=options.seed,
        )
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            http="httptools",
            ws="none",
            lifespan="off",
            timeout_graceful_shutdown=1,
            **tls_settings,  # type: ignore[arg-type]
        )
        server = uvicorn.Server(config)
        kubeconfig = write_kubeconfig(options.kubeconfig, url, ca_pem)
        stats.reset()
        controller_task = (
            asyncio.get_running_loop().create_task(controllers.run()) if controllers is not None else None
        )
        running = Running(url, port, kubeconfig, api, stats, server, ca_pem)
        started = asyncio.Event()

        async def announce() -> None:
            while not server.started:  # noqa: ASYNC110 - uvicorn offers no startup event
                await asyncio.sleep(0.01)
            started.set()
            if on_ready is not None:
                on_ready(running)

        announcer = asyncio.get_running_loop().create_task(announce())
        try:
            await server.serve(sockets=[sock])
        finally:
            announcer.cancel()
            if controller_task is not None:
                controller_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await controller_task
            await api.aclose()
            sock.close()
