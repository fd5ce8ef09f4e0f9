"""The real kubectl binaries of this machine, run against a kubesim kubeconfig (for the kubectl tests)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from kubesim.testing import KubesimServer

KUBECTL_DIR = Path("/usr/lib/google-cloud-sdk/bin")
KUBECTL = shutil.which("kubectl.1.33") or next(
    (str(p) for p in [KUBECTL_DIR / "kubectl.1.33"] if p.exists()), None
)


def versioned_kubectl(version: str) -> str | None:
    """The path of `kubectl.<version>` (e.g. "1.27"), or None when this machine does not have it."""
    found = shutil.which(f"kubectl.{version}")
    if found:
        return found
    path = KUBECTL_DIR / f"kubectl.{version}"
    return str(path) if path.exists() else None


def run_kubectl(
    sim: KubesimServer, *args: str, stdin: str | None = None, timeout: float = 30, binary: str | None = None
) -> subprocess.CompletedProcess[str]:
    executable = binary or KUBECTL
    assert executable is not None
    return subprocess.run(
        [executable, "--kubeconfig", str(sim.kubeconfig_path), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def kubectl(
    sim: KubesimServer, *args: str, stdin: str | None = None, timeout: float = 30, binary: str | None = None
) -> str:
    """stdout of a kubectl command that must succeed."""
    result = run_kubectl(sim, *args, stdin=stdin, timeout=timeout, binary=binary)
    assert result.returncode == 0, result.stderr
    return result.stdout
