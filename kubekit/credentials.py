"""How a client that is given a server proves who it is: the CA that signed the server, and a client
certificate or a bearer token.

One shape for the two kinds of client the tools run: `kubekit.generic.GenericClient` (the official client's
`Configuration`) and the benchmarks' own httpx clients (`ssl_context`). A kubeconfig is read by the
official loader, the one both binaries use (`kubekit.client.cluster_configuration`).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from kubekit.client import ClusterConfigError, cluster_configuration

BEARER = "Bearer "
AUTH_SETTING = "BearerToken"
"""Where the official client's `Configuration` keeps the bearer token (its `BearerToken` auth setting)."""


@dataclass(frozen=True)
class Credentials:
    """How to reach an API server over TLS: the CA that signed it, and a client certificate or a token."""

    ca_file: Path
    client_cert: tuple[Path, Path] | None = None
    token: str | None = None

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        if self.client_cert is not None:
            context.load_cert_chain(str(self.client_cert[0]), str(self.client_cert[1]))
        return context


def configuration(server: str, credentials: Credentials | None = None) -> client.Configuration:
    """The official client's configuration for `server`: plain, without credentials (a test's in-memory
    fake over HTTP), or with the CA and the client certificate or token of `credentials`."""
    configured = client.Configuration()
    configured.host = server.rstrip("/")
    if credentials is not None:
        configured.ssl_ca_cert = str(credentials.ca_file)
        if credentials.client_cert is not None:
            configured.cert_file, configured.key_file = (str(p) for p in credentials.client_cert)
        if credentials.token:
            configured.api_key = {AUTH_SETTING: f"{BEARER}{credentials.token}"}
    return configured


def kubeconfig_credentials(path: Path) -> tuple[str, Credentials]:
    """The server and credentials of a kubeconfig's current context."""
    configured = cluster_configuration(path, None)
    if not configured.ssl_ca_cert:
        raise ClusterConfigError(f"kubeconfig {path}: no certificate authority for its server")
    client_cert = None
    if configured.cert_file and configured.key_file:
        client_cert = (Path(configured.cert_file), Path(configured.key_file))
    authorization = str((configured.api_key or {}).get(AUTH_SETTING) or "")
    token = authorization.removeprefix(BEARER) if authorization.startswith(BEARER) else None
    return configured.host, Credentials(Path(configured.ssl_ca_cert), client_cert, token)
