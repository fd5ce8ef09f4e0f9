"""placement/ is the pure core: importing it must not pull in HTTP servers or the kubernetes client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FORBIDDEN = (
    "fastapi",
    "starlette",
    "uvicorn",
    "httpx",
    "kubernetes",
    "urllib3",
    "requests",
    "webhook",
    "resizer",
)
ROOT = Path(__file__).resolve().parents[2]


def test_placement_imports_nothing_forbidden() -> None:
    modules = sorted(p.stem for p in (ROOT / "placement").glob("*.py") if p.stem != "__init__")
    assert {"admission", "affinity", "constants", "objects", "patch", "strategy"} <= set(modules)
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module('placement.' + m)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    offenders = [m for m in loaded if m.split(".")[0] in FORBIDDEN]
    assert offenders == []
