"""One expensive result per test session, whichever pytest-xdist worker asks for it first.

The kube tier's benchmark contracts each read one report of a real benchmark run (minutes long). A
module-scoped fixture runs once per worker that runs one of the module's tests: twice in the clean-clone
CI of 2026-12-06, where pytest 9.2 made pytest-xdist's `--dist loadgroup` ignore the module's
`xdist_group` (pytest is pinned to 8.4 since: tests/packaging/test_xdist_groups.py). With the groups
honoured one worker runs the module; this keeps the benchmark to one run under any other distribution
(`pytest -n 2` without `--dist loadgroup`): the first worker to ask runs it while holding a lock in the
directory every worker's base temp shares; the others wait and read its result. Without xdist the fixture
runs it as before.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

XDIST_RUN_ID = "PYTEST_XDIST_TESTRUNUID"
"""Set by pytest-xdist to one value for every worker of a session."""


def once_per_session(
    tmp_path_factory: pytest.TempPathFactory, name: str, produce: Callable[[Path], dict[str, Any]]
) -> dict[str, Any]:
    """`produce(out_dir)` run once in this session (`name` tells runs apart), its JSON-able result."""
    run_id = os.environ.get(XDIST_RUN_ID)
    if run_id is None:
        return produce(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent / f"{name}-{run_id}"
    shared.mkdir(exist_ok=True)
    result = shared / "result.json"
    with (shared / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not result.is_file():
            out = shared / "out"
            out.mkdir(exist_ok=True)
            result.write_text(json.dumps(produce(out)))
        loaded: dict[str, Any] = json.loads(result.read_text())
        return loaded
