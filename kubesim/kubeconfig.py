"""The kubeconfig kubesim writes: usable unchanged by kubectl, the official Python client and Helm."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml

CONTEXT = "kubesim"


def render_kubeconfig(server: str, ca_pem: bytes | None = None, namespace: str = "default") -> str:
    cluster: dict[str, str] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        # kubesim does not authenticate; a token keeps clients that insist on credentials happy.
        "users": [{"name": CONTEXT, "user": {"token": "kubesim"}}],
        "contexts": [
            {"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace}}
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def write_kubeconfig(path: Path, server: str, ca_pem: bytes | None = None) -> Path:
    """Write atomically with mode 0600 (kubectl and Helm warn about group/world-readable kubeconfigs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(render_kubeconfig(server, ca_pem))
    tmp.replace(path)
    return path.resolve()
