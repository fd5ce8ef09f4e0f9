"""Start kubesim from tests: in-process (`KubesimServer`, a background thread with its own event loop) or as
a subprocess (`KubesimProcess`, the real `python -m kubesim serve`). Both pick a free port, write their own
kubeconfig in a private temp directory, and clean everything up on exit.

    with KubesimServer(nodes=8, pools=2, time_scale=0.01) as sim:
        kubernetes.config.load_kube_config(str(sim.kubeconfig_path))
        ...
        assert sim.stats()["pods"]["bound"] == 3
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Self, TypeVar

import uvloop

from kubesim.apiserver.server import ApiServer
from kubesim.runner import Running, ServeOptions, serve

T = TypeVar("T")
REPO_ROOT = Path(__file__).resolve().parent.parent
_LISTENING = re.compile(r"kubesim listening on (?P<url>\S+) kubeconfig=(?P<kubeconfig>.+)$")


class _Endpoint:
    """What both variants share: url, kubeconfig and the /debug endpoints."""

    url: str
    kubeconfig_path: Path
    ca_pem: bytes | None = None

    def _request(self, method: str, path: str) -> Any:
        context = None
        if self.ca_pem is not None:
            context = ssl.create_default_context(cadata=self.ca_pem.decode())
        request = urllib.request.Request(self.url + path, method=method)  # noqa: S310 - own server
        with urllib.request.urlopen(request, timeout=10, context=context) as reply:  # noqa: S310 - own server
            return json.loads(reply.read())

    def stats(self) -> dict[str, Any]:
        """`GET /debug/stats`."""
        result: dict[str, Any] = self._request("GET", "/debug/stats")
        return result

    def reset_stats(self) -> None:
        self._request("POST", "/debug/reset-stats")

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


class KubesimServer(_Endpoint):
    """kubesim in a background thread of this process (fast to start; `call()` reaches the ApiServer)."""

    def __init__(
        self,
        *,
        nodes: int = 8,
        pools: int = 2,
        gpus_per_node: int = 8,
        time_scale: float = 0.01,
        faults: str | None = None,
        seed: int | None = 0,
        controllers: bool = True,
        tls: bool = False,
        controller_overrides: dict[str, Any] | None = None,
        jobset_webhooks: bool = True,
        watch_history: int = 10_000,
        bookmark_interval: float = 5.0,
        kubeconfig_path: Path | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self._tmpdir: str | None = None
        if kubeconfig_path is None:
            self._tmpdir = tempfile.mkdtemp(prefix="kubesim-")
            kubeconfig_path = Path(self._tmpdir) / "kubeconfig"
        self.options = ServeOptions(
            port=0,
            nodes=nodes,
            pools=pools,
            gpus_per_node=gpus_per_node,
            time_scale=time_scale,
            kubeconfig=kubeconfig_path,
            tls=tls,
            faults=faults,
            seed=seed,
            controllers=controllers,
            controller_overrides={"jobset_webhooks": jobset_webhooks, **(controller_overrides or {})},
            watch_history=watch_history,
            bookmark_interval=bookmark_interval,
        )
        self.kubeconfig_path = kubeconfig_path
        self.startup_timeout = startup_timeout
        self._ready = threading.Event()
        self._running: Running | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        loop = uvloop.new_event_loop()  # the same loop implementation as `python -m kubesim serve`
        self._loop = loop

        def ready(running: Running) -> None:
            self._running = running
            self._ready.set()

        try:
            loop.run_until_complete(serve(self.options, on_ready=ready))
        except BaseException as exc:
            self._error = exc
        finally:
            self._ready.set()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name="kubesim", daemon=True)
        self._thread.start()
        if not self._ready.wait(self.startup_timeout):
            raise TimeoutError(f"kubesim did not start within {self.startup_timeout} s")
        if self._running is None:
            raise RuntimeError(f"kubesim failed to start: {self._error!r}") from self._error
        self.url = self._running.url
        self.ca_pem = self._running.ca_pem
        return self

    def stop(self) -> None:
        if self._running is not None and self._loop is not None and not self._loop.is_closed():
            server = self._running.server
            self._loop.call_soon_threadsafe(setattr, server, "should_exit", True)
        if self._thread is not None:
            self._thread.join(30)
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def api(self) -> ApiServer:
        """The in-process API server. Only touch it through `call()` (it lives on the server's loop)."""
        if self._running is None:
            raise RuntimeError("kubesim is not running")
        return self._running.api

    def call(self, fn: Callable[[ApiServer], Awaitable[T]], timeout: float = 30.0) -> T:
        """Run `fn(api)` on the server's event loop and return its result, e.g.
        `sim.call(lambda api: api.get("pods", "p", namespace="default"))`."""
        if self._loop is None:
            raise RuntimeError("kubesim is not running")

        async def run() -> T:
            return await fn(self.api)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)


class KubesimProcess(_Endpoint):
    """The real `python -m kubesim serve` in a subprocess (SIGTERM on exit, then SIGKILL if it hangs)."""

    def __init__(
        self,
        *,
        nodes: int = 8,
        pools: int = 2,
        time_scale: float = 0.01,
        faults: str | None = None,
        seed: int | None = 0,
        controllers: bool = True,
        tls: bool = False,
        jobset_webhooks: bool = True,
        extra_args: list[str] | None = None,
        kubeconfig_path: Path | None = None,
        startup_timeout: float = 60.0,
        log_path: Path | None = None,
    ) -> None:
        self._tmpdir = tempfile.mkdtemp(prefix="kubesim-proc-")
        self.kubeconfig_path = kubeconfig_path or Path(self._tmpdir) / "kubeconfig"
        self.log_path = log_path or Path(self._tmpdir) / "kubesim.log"
        args = [sys.executable, "-m", "kubesim", "serve", "--port", "0", "--log-level", "WARNING"]
        args += ["--nodes", str(nodes), "--pools", str(pools), "--time-scale", str(time_scale)]
        args += ["--kubeconfig", str(self.kubeconfig_path)]
        if faults:
            args += ["--faults", faults]
        if seed is not None:
            args += ["--seed", str(seed)]
        if not controllers:
            args.append("--no-controllers")
        if tls:
            args.append("--tls")
        if not jobset_webhooks:
            args += ["--jobset-webhooks", "false"]
        self.args = args + list(extra_args or [])
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> Self:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        log = self.log_path.open("w")
        self.process = subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=log, text=True, cwd=REPO_ROOT, env=env
        )
        log.close()
        deadline = time.monotonic() + self.startup_timeout
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            match = _LISTENING.search(line.strip())
            if match:
                self.url = match["url"]
                self.kubeconfig_path = Path(match["kubeconfig"])
                if self.url.startswith("https"):
                    self.ca_pem = _ca_from_kubeconfig(self.kubeconfig_path)
                return self
        self.stop()
        raise RuntimeError(f"kubesim did not start: {self.log_path.read_text()[-2000:]}")

    def stop(self) -> int | None:
        code = None
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(15)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(5)
            code = self.process.returncode
            if self.process.stdout is not None:
                self.process.stdout.close()
        shutil.rmtree(self._tmpdir, ignore_errors=True)
        return code

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _ca_from_kubeconfig(path: Path) -> bytes:
    import base64

    import yaml

    config = yaml.safe_load(path.read_text())
    return base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
