"""Commands run as an operator types them: kubectl and the kubectl plugin's console script, with KUBECONFIG
set and the venv's scripts first on PATH (where kubectl finds its plugins)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

PLUGIN = Path(sys.executable).parent / "kubectl-exclusive_placement"
"""`make venv` installs the project's console scripts next to the venv's python."""


def run(argv: list[str], kubeconfig: Path, *, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert PLUGIN.is_file(), f"{PLUGIN} is missing: `make venv` installs the project's console scripts"
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": f"{PLUGIN.parent}:{os.environ['PATH']}"}
    return subprocess.run(argv, input=stdin, env=env, capture_output=True, text=True, timeout=60, check=False)


def status_json(kubeconfig: Path) -> dict[str, Any]:
    """`kubectl-exclusive_placement status -A -o json`, which must succeed."""
    result = run([str(PLUGIN), "status", "-A", "-o", "json"], kubeconfig)
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document
