"""This machine's kubectl 1.33 (the Cloud SDK's), for the tests that run kubectl as a user would; None
without it (those tests say so when they skip)."""

from __future__ import annotations

import shutil
from pathlib import Path

KUBECTL_DIR = Path("/usr/lib/google-cloud-sdk/bin")
KUBECTL = shutil.which("kubectl.1.33") or next(
    (str(p) for p in [KUBECTL_DIR / "kubectl.1.33"] if p.exists()), None
)
