"""One stack per workdir: the lock names the running stack, and dies with it however it ends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from devstack.workdir import LOCK_FILE, WorkdirClaim, WorkdirInUse
from tests.support.waiting import eventually


def test_a_second_claim_is_refused_naming_the_first_until_it_is_released(tmp_path: Path) -> None:
    first = WorkdirClaim(tmp_path / "w")
    first.acquire()
    first.describe("the devstack of pid 42 (https://127.0.0.1:1)")
    second = WorkdirClaim(tmp_path / "w")
    with pytest.raises(WorkdirInUse) as refused:
        second.acquire()
    assert str(refused.value) == (
        f"the workdir {tmp_path / 'w'} is in use by the devstack of pid 42 (https://127.0.0.1:1): "
        "stop that one (Ctrl-C where it runs), or give this one a workdir of its own (--workdir DIR)"
    )
    first.release()
    second.acquire()
    second.release()


HOLDER = """
import sys, time
from pathlib import Path
from devstack.workdir import WorkdirClaim
WorkdirClaim(Path(sys.argv[1])).acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_the_lock_goes_with_a_killed_holder(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "w")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(WorkdirInUse, match=f"in use by devstack \\(pid {holder.pid}\\)"):
            WorkdirClaim(tmp_path / "w").acquire()
    finally:
        holder.kill()
        holder.wait(30)
    claim = WorkdirClaim(tmp_path / "w")
    eventually(lambda: _acquired(claim), "the lock free once its holder is gone")
    assert (tmp_path / "w" / LOCK_FILE).read_text().startswith("devstack (pid ")
    claim.release()


def _acquired(claim: WorkdirClaim) -> bool:
    try:
        claim.acquire()
    except WorkdirInUse:
        return False
    return True
