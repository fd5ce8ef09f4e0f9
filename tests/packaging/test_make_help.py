"""`make help` read through a pipe: no colour codes, and every description apart from its target's name."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_help_piped_has_no_colour_codes_and_no_name_runs_into_its_description() -> None:
    result = subprocess.run(
        ["make", "--no-print-directory", "help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    lines = result.stdout.splitlines()
    assert "\033" not in result.stdout
    targets = re.findall(r"^([a-zA-Z_-]+):.*?## ", (REPO / "Makefile").read_text(), flags=re.MULTILINE)
    assert [line.split()[0] for line in lines] == targets
    assert all(re.match(r"^  [a-zA-Z_-]+ {2,}\S", line) for line in lines), lines
    assert len({line.index(line.split()[1], len(line.split()[0]) + 2) for line in lines}) == 1  # one column
