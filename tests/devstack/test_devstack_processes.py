"""Process groups that never outlive the stack, and readiness waits that fail fast with the log tail."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from devstack.ports import free_port, port_is_free
from devstack.processes import ManagedProcess, ProcessError, stop_all
from devstack.readiness import NotReadyError, wait_for_log_line, wait_http_ok
from tests.support.waiting import eventually


def python(tmp_path: Path, name: str, code: str) -> ManagedProcess:
    return ManagedProcess(name, [sys.executable, "-c", code], tmp_path / f"{name}.log")


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


IGNORES_SIGTERM_WITH_A_CHILD = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
child = subprocess.Popen([sys.executable, "-c", grandchild])
print("child", child.pid, flush=True)
time.sleep(600)
"""


def test_stop_kills_a_group_that_ignores_sigterm_including_grandchildren(tmp_path: Path) -> None:
    proc = python(tmp_path, "stubborn", IGNORES_SIGTERM_WITH_A_CHILD)
    proc.start()
    child = int(wait_for_log_line(proc, re.compile(r"child (\d+)"), timeout=30)[1])
    codes = stop_all([proc], timeout=0.5)
    assert codes == {"stubborn": -9}
    eventually(lambda: not pid_alive(child), f"the grandchild {child} gone", 5)


def test_stop_is_graceful_first(tmp_path: Path) -> None:
    proc = python(tmp_path, "polite", "import time; print('up', flush=True); time.sleep(600)")
    proc.start()
    wait_for_log_line(proc, re.compile("up"), timeout=30)
    assert proc.stop(timeout=10) == -15
    assert not proc.running
    assert proc.stop() == -15  # idempotent


def test_a_crashed_component_raises_with_its_log_tail(tmp_path: Path) -> None:
    proc = python(tmp_path, "crasher", "import sys; print('bad flag --nope', flush=True); sys.exit(3)")
    proc.start()
    with pytest.raises(ProcessError, match=r"crasher exited with code 3(.|\n)*bad flag --nope"):
        wait_for_log_line(proc, re.compile("never printed"), timeout=30)


def test_waiting_for_a_line_times_out_with_the_log(tmp_path: Path) -> None:
    proc = python(tmp_path, "quiet", "import time; print('booting', flush=True); time.sleep(600)")
    proc.start()
    try:
        with pytest.raises(NotReadyError, match=r"quiet printed no line matching 'ready'(.|\n)*booting"):
            wait_for_log_line(proc, re.compile("ready"), timeout=0.5)
    finally:
        proc.stop()


def test_waiting_for_http_fails_fast_when_the_process_dies(tmp_path: Path) -> None:
    proc = python(tmp_path, "gone", "import sys; sys.exit(1)")
    proc.start()
    with pytest.raises(ProcessError, match="gone exited with code 1"):
        wait_http_ok(proc, f"http://127.0.0.1:{free_port()}/readyz", timeout=30)


def test_a_started_process_cannot_be_started_twice(tmp_path: Path) -> None:
    proc = python(tmp_path, "once", "import time; time.sleep(600)")
    proc.start()
    try:
        with pytest.raises(ProcessError, match="already running"):
            proc.start()
    finally:
        proc.stop()


def test_free_port_is_free() -> None:
    assert port_is_free(free_port())


def test_a_reused_log_file_does_not_satisfy_the_wait_with_an_earlier_runs_line(tmp_path: Path) -> None:
    (tmp_path / "again.log").write_text("listening on port 1111\n")
    proc = python(
        tmp_path, "again", "import time; time.sleep(0.3); print('listening on port 2222', flush=True)"
    )
    proc.start()
    match = wait_for_log_line(proc, re.compile(r"listening on port (\d+)"), timeout=30)
    assert match[1] == "2222"
    proc.stop()
    assert "1111" not in proc.log_tail()
    assert (tmp_path / "again.log").read_text().splitlines() == [
        "listening on port 1111",
        "listening on port 2222",
    ]
