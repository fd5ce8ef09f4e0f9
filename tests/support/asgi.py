"""Test tools of the webhook, shared by its tests and the load benchmark.

`AsgiClient` calls the app in-process over ASGI (no socket), `ServerThread` serves it over a real socket.
The fake API server they talk to is `tests.support.fake_api.FakeKubeApi`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI


class AsgiClient:
    """Synchronous requests into an ASGI app in this process: httpx's ASGITransport on a private event loop.

    Used as a context manager it also runs the app's lifespan (the webhook's informers start on enter and
    stop on exit), as uvicorn would.
    """

    def __init__(self, app: FastAPI, base_url: str = "http://webhook") -> None:
        self._app = app
        self._loop = asyncio.new_event_loop()
        self._client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)
        self._lifespan: AbstractAsyncContextManager[Any] | None = None

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self._loop.run_until_complete(self._client.request(method, path, **kwargs))

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", path, **kwargs)

    def close(self) -> None:
        if self._lifespan is not None:
            self._loop.run_until_complete(self._lifespan.__aexit__(None, None, None))
            self._lifespan = None
        self._loop.run_until_complete(self._client.aclose())
        self._loop.run_until_complete(self._loop.shutdown_default_executor())
        self._loop.close()

    def __enter__(self) -> AsgiClient:
        lifespan = self._app.router.lifespan_context(self._app)
        self._loop.run_until_complete(lifespan.__aenter__())
        self._lifespan = lifespan
        return self

    def __exit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()


class ServerThread:
    """Runs a uvicorn server of an app in a thread (the webhook's own is `Webhook.server()`, behind its
    listener); `port` is the bound one.

    uvicorn installs no signal handlers outside the main thread; `stop()` asks it to exit and joins.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)

    @property
    def port(self) -> int:
        port: int = self.server.servers[0].sockets[0].getsockname()[1]
        return port

    def start(self, timeout: float = 15.0) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.stop()
