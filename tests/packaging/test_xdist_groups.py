"""`make test` runs `--dist loadgroup` and relies on it: every kube-tier module shares one cluster on one
worker through its `xdist_group`, and a group split across workers starts that cluster (and runs the
module's benchmark) once per worker. pytest-xdist 3.8 under pytest 9.2 ignored the groups without a word
(pytest-dev/pytest-xdist#1386); this runs the pinned pytest and xdist on two groups and asserts where each
test ran."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

GROUPED_MODULE = """
import os
import pathlib
import pytest

pytestmark = pytest.mark.xdist_group("{group}")

@pytest.mark.parametrize("index", range(4))
def test_records_its_worker(index):
    ran = pathlib.Path(os.environ["RAN_DIR"]) / f"{group}-{{index}}"
    ran.write_text(os.environ["PYTEST_XDIST_WORKER"])
"""
UNGROUPED_MODULE = """
import pytest

@pytest.mark.parametrize("index", range(8))
def test_free(index):
    pass
"""


def run_grouped_session(tmp_path: Path) -> dict[str, set[str]]:
    for group in ("alpha", "beta"):
        (tmp_path / f"test_{group}.py").write_text(GROUPED_MODULE.format(group=group))
    (tmp_path / "test_free.py").write_text(UNGROUPED_MODULE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    ran_dir = tmp_path / "ran"
    ran_dir.mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-q",
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "RAN_DIR": str(ran_dir)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    workers: dict[str, set[str]] = defaultdict(set)
    ran = sorted(ran_dir.iterdir())
    assert len(ran) == 8, done.stdout
    for record in ran:
        workers[record.name.split("-")[0]].add(record.read_text())
    return workers


def test_each_xdist_group_runs_on_one_worker(tmp_path: Path) -> None:
    workers = run_grouped_session(tmp_path)
    assert workers.keys() == {"alpha", "beta"}
    assert all(len(ran_on) == 1 for ran_on in workers.values()), dict(workers)
