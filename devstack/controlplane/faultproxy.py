"""A TCP fault proxy (toxiproxy, built by `make kube`) between this project's processes and kube-apiserver.

With `KubeClusterOptions(fault_proxy=True)` the webhook's and the resizer's kubeconfigs name the proxy's
listener instead of kube-apiserver's port. The proxy forwards bytes, so TLS goes through it end to end: the
processes still verify kube-apiserver's serving certificate (its SAN is the address 127.0.0.1, whatever the
port) and authenticate with their ServiceAccount tokens. Everything else (kube-controller-manager, the
scheduler, kwok, JobSet, the admin client) talks to kube-apiserver directly.

Faults are toxiproxy's "toxics", added and removed over its HTTP API (`/proxies/<name>/toxics`). A toxic
acts on the connections open when it is added as well as on new ones, so watches already streaming are
slowed, stalled or reset too:
- `latency` (`latency`, `jitter` in ms): every chunk of data delayed;
- `timeout` (`timeout` in ms): no data passes, and each connection is closed after `timeout` (0: never);
- `reset_peer` (`timeout` in ms): each connection is reset with a TCP RST after `timeout`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from devstack.commands import LOCAL_HOST
from devstack.ports import free_port
from devstack.processes import ManagedProcess, ProcessError
from devstack.readiness import wait_http_ok

log = logging.getLogger(__name__)

BINARY = "toxiproxy"
APISERVER_PROXY = "kube-apiserver"
DOWNSTREAM = "downstream"
"""Toxics on the data from kube-apiserver to the client (answers and watch events)."""
UPSTREAM = "upstream"
"""Toxics on the data from the client to kube-apiserver (requests)."""


class FaultProxyError(RuntimeError):
    """toxiproxy refused a request: the message is its answer."""


@dataclass(frozen=True)
class Toxic:
    name: str
    kind: str
    attributes: dict[str, int]
    stream: str = DOWNSTREAM

    def body(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.kind,
            "stream": self.stream,
            "toxicity": 1.0,
            "attributes": self.attributes,
        }


class FaultProxy:
    """The toxiproxy server process and its HTTP API; one proxy, `kube-apiserver`, in front of the API."""

    def __init__(self, binary: Path, *, log_dir: Path, startup_timeout: float) -> None:
        self.api_port = free_port()
        self.listen_port = 0
        self.startup_timeout = startup_timeout
        self.process = ManagedProcess(
            "fault-proxy",
            [str(binary), "-host", LOCAL_HOST, "-port", str(self.api_port)],
            log_dir / "fault-proxy.log",
        )
        self._http = httpx.Client(base_url=f"http://{LOCAL_HOST}:{self.api_port}", timeout=10.0)

    @property
    def api_url(self) -> str:
        return f"http://{LOCAL_HOST}:{self.api_port}"

    @property
    def server(self) -> str:
        """The URL a client uses to reach kube-apiserver through the proxy."""
        if not self.listen_port:
            raise ProcessError("the fault proxy is not started")
        return f"https://{LOCAL_HOST}:{self.listen_port}"

    def start(self, upstream: str) -> str:
        """Start toxiproxy and a proxy to `upstream` (`host:port` of kube-apiserver); returns `server`."""
        self.process.start()
        wait_http_ok(self.process, f"{self.api_url}/version", self.startup_timeout)
        self.listen_port = free_port()
        self._call(
            "POST",
            "/proxies",
            json={
                "name": APISERVER_PROXY,
                "listen": f"{LOCAL_HOST}:{self.listen_port}",
                "upstream": upstream,
                "enabled": True,
            },
        )
        log.info("fault proxy %s -> %s (API %s)", self.server, upstream, self.api_url)
        return self.server

    def add(self, toxic: Toxic) -> None:
        self._call("POST", f"/proxies/{APISERVER_PROXY}/toxics", json=toxic.body())

    def remove(self, name: str) -> None:
        self._call("DELETE", f"/proxies/{APISERVER_PROXY}/toxics/{name}")

    def toxics(self) -> list[str]:
        """The names of the toxics in place."""
        listed = self._call("GET", f"/proxies/{APISERVER_PROXY}/toxics")
        return sorted(str(toxic["name"]) for toxic in listed or [])

    def set_enabled(self, enabled: bool) -> None:
        """Disabled, the proxy closes every open connection and refuses new ones."""
        self._call("POST", f"/proxies/{APISERVER_PROXY}", json={"enabled": enabled})

    def heal(self) -> None:
        """Remove every toxic (toxiproxy's `/reset`: also re-enables a disabled proxy)."""
        self._call("POST", "/reset")

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise FaultProxyError(
                f"toxiproxy {method} {path}: HTTP {response.status_code} {response.text.strip()[:300]}"
            )
        return response.json() if response.content else None
