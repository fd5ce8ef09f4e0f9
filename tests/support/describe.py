"""`kubectl describe`'s Events table, read as rows (both e2e tiers check what it shows)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

COLUMNS = re.compile(r"\s{2,}")


@dataclass(frozen=True)
class DescribedEvent:
    type: str
    reason: str
    age: str
    source: str
    """The From column: the legacy source's component, else the reporting controller."""
    message: str


def described_events(
    kubectl: str, kubeconfig: Path, kind: str, name: str, namespace: str
) -> list[DescribedEvent]:
    """The rows under `Events:` of `kubectl describe KIND NAME` (none when it says `<none>`)."""
    result = subprocess.run(
        [kubectl, "--kubeconfig", str(kubeconfig), "describe", kind, name, "-n", namespace],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    _, found, table = result.stdout.partition("\nEvents:")
    assert found, f"no Events section in:\n{result.stdout}"
    rows = [line.strip() for line in table.splitlines()[3:] if line.strip()]
    return [DescribedEvent(*COLUMNS.split(row, maxsplit=4)) for row in rows]
