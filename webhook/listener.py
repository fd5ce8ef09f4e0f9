"""Accepting connections: counted and capped before any TLS work, the TLS handshake bounded in time.

uvicorn hands the listening socket to `loop.create_server(ssl=...)`, which starts a TLS handshake on every
accepted connection with asyncio's default 60 s handshake timeout and no bound on how many connections
are open: 4,000 connections that never sent a byte held 200 MiB for a minute. `Listener` accepts itself:

- a connection beyond `ConnectionLimits.total` open connections, or beyond `per_client` from one client
  address, is closed at once, before TLS (no SSL object, no handshake);
- the others get their TLS handshake with `ssl_handshake_timeout` (`loop.connect_accepted_socket`), so a
  connection that never starts or finishes it is closed after that;
- each open connection counts until its protocol reports it closed (`GuardedHttpProtocol.on_closed`) or
  its handshake fails.

`GuardedServer` is uvicorn's `Server` with this listener in place of `create_server`; everything else
(lifespan, graceful shutdown, keep-alive) is uvicorn's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
import ssl
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import uvicorn

from webhook.metrics import Metrics
from webhook.protocol import GuardedHttpProtocol, HeaderLimits

log = logging.getLogger(__name__)

DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 256
"""Well above what one API server replica opens to one webhook replica (one connection per admission in
flight, reused), so that a quarter of the connections stay free for other clients."""
DEFAULT_TLS_HANDSHAKE_TIMEOUT_SECONDS = 10.0
STARTUP_FAILURE = 3
"""uvicorn's exit code when the server cannot start."""
SPARE_FILE_DESCRIPTORS = 64
"""Besides client connections: the listening socket, the API server connections, certificate files."""


@dataclass(frozen=True)
class ServerLimits:
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_connections_per_client: int = DEFAULT_MAX_CONNECTIONS_PER_CLIENT
    tls_handshake_timeout: float = DEFAULT_TLS_HANDSHAKE_TIMEOUT_SECONDS
    headers: HeaderLimits = field(default_factory=HeaderLimits)


class ConnectionLimits:
    """Open connections in total and per client address, on the event loop (no lock needed)."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total = total
        self.per_client = per_client
        self.by_client: Counter[str] = Counter()
        self.open = 0

    def refusal(self, client: str) -> str | None:
        """Why a new connection from `client` is refused (a metric label), None when it may open."""
        if self.open >= self.total:
            return "max-connections"
        if self.by_client[client] >= self.per_client:
            return "max-connections-per-client"
        return None

    def opened(self, client: str) -> Callable[[], None]:
        """Counts the connection; returns its release, which counts only once however often it is called."""
        self.open += 1
        self.by_client[client] += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self.open -= 1
            self.by_client[client] -= 1
            if not self.by_client[client]:
                del self.by_client[client]

        return release


ProtocolFactory = Callable[[Callable[[], None]], asyncio.Protocol]
"""Makes the protocol of one connection, given the release of its count."""


class Listener:
    """The accept loop on one listening socket (as uvicorn's `servers` entries: `close`, `wait_closed`)."""

    def __init__(
        self,
        sock: socket.socket,
        make_protocol: ProtocolFactory,
        tls: ssl.SSLContext | None,
        limits: ServerLimits,
        metrics: Metrics,
    ) -> None:
        self.sockets = [sock]
        self._make_protocol = make_protocol
        self._tls = tls
        self._limits = limits
        self._metrics = metrics
        self.connections = ConnectionLimits(limits.max_connections, limits.max_connections_per_client)
        metrics.connections_open.set_function(lambda: self.connections.open)
        self._handshakes: set[asyncio.Task[None]] = set()
        self._accepting: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.sockets[0].setblocking(False)
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop())

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        listening = self.sockets[0]
        while True:
            try:
                connection, address = await loop.sock_accept(listening)
            except OSError as err:  # e.g. EMFILE: the process is out of file descriptors
                log.warning("accept failed: %s", err)
                await asyncio.sleep(0.1)
                continue
            client = str(address[0]) if isinstance(address, tuple) else str(address)
            refusal = self.connections.refusal(client)
            if refusal is not None:
                self._metrics.connections_closed.labels(refusal).inc()
                connection.close()
                continue
            release = self.connections.opened(client)
            task = loop.create_task(self._serve(connection, release))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _serve(self, connection: socket.socket, release: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(
                lambda: self._make_protocol(release),
                connection,
                ssl=self._tls,
                ssl_handshake_timeout=self._limits.tls_handshake_timeout if self._tls is not None else None,
            )
        except (OSError, ssl.SSLError, TimeoutError) as err:  # ConnectionError is an OSError
            reason = "tls-handshake-timeout" if "taking longer" in str(err) else "tls-handshake-failed"
            self._metrics.connections_closed.labels(reason).inc()
            log.debug("TLS handshake failed: %s", err)
            connection.close()
            release()

    def close(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
        for task in list(self._handshakes):
            task.cancel()
        self.sockets[0].close()

    async def wait_closed(self) -> None:
        tasks = [task for task in (self._accepting, *self._handshakes) if task is not None]
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)


def raise_file_limit(connections: int) -> None:
    """Lets the process open `connections` client connections: raises the soft RLIMIT_NOFILE towards the
    hard one (as the Go runtime does at start); warns when even that is too low."""
    needed = connections + SPARE_FILE_DESCRIPTORS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        soft = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning(
            "the file descriptor limit %d is below --max-connections %d plus %d: raise the hard limit",
            soft,
            connections,
            SPARE_FILE_DESCRIPTORS,
        )


def bind(host: str, port: int, backlog: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    return sock


class GuardedServer(uvicorn.Server):
    """uvicorn's server, accepting through a `Listener` (TLS from `tls`, not from the uvicorn config)."""

    def __init__(
        self, config: uvicorn.Config, tls: ssl.SSLContext | None, limits: ServerLimits, metrics: Metrics
    ) -> None:
        super().__init__(config)
        self._tls = tls
        self._limits = limits
        self._metrics = metrics

    def _protocol(self, release: Callable[[], None]) -> asyncio.Protocol:
        config = self.config
        if not config.loaded:
            config.load()
        return GuardedHttpProtocol(
            config=config,
            server_state=self.server_state,
            app_state=self.lifespan.state,
            headers=self._limits.headers,
            metrics=self._metrics,
            on_closed=release,
        )

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await self.lifespan.startup()
        if self.lifespan.should_exit:
            sys.exit(STARTUP_FAILURE)
        try:
            sock = bind(self.config.host, self.config.port, self.config.backlog)
        except OSError as err:
            log.error("cannot listen on %s:%s: %s", self.config.host, self.config.port, err)
            await self.lifespan.shutdown()
            sys.exit(STARTUP_FAILURE)
        raise_file_limit(self._limits.max_connections)
        listener = Listener(sock, self._protocol, self._tls, self._limits, self._metrics)
        listener.start()
        self.servers = [listener]  # type: ignore[list-item]
        host, port = sock.getsockname()[:2]
        log.info("listening on %s://%s:%s", "https" if self._tls is not None else "http", host, port)
        self.started = True
