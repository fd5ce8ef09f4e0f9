"""Ctrl-C / SIGTERM while devstack serves or starts: always acted on, where safe; a stop never hangs.

Two ways `devstack run` outlived a SIGINT. (1) Started from a background job of a non-interactive shell
(`make test &`), it inherited SIGINT ignored and Python left it so: the run test then timed out 60 s after
its SIGINT (also covered end to end in test_devstack_demo.py). (2) Python's default KeyboardInterrupt,
raised right after `Popen._internal_poll` took the child's waitpid lock (devstack polls its children every
second while serving), skips the release: every later wait on that child blocks forever, so the stop hangs.
The tests deliver SIGINT at exactly that moment (a profile hook on the lock's `acquire` returning).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from devstack import processes
from devstack.demo import follow_forever
from devstack.interrupts import handle_stop_signals, pause
from devstack.processes import ManagedProcess, stop_all
from devstack.readiness import wait_for_log_line
from kubekit.generic import GenericClient

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def child(tmp_path: Path) -> Iterator[ManagedProcess]:
    proc = ManagedProcess(
        "sleeper",
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"],
        tmp_path / "s.log",
    )
    proc.start()
    wait_for_log_line(proc, re.compile("up"), timeout=30)
    yield proc
    lock = wait_lock(proc)
    if lock.locked():
        lock.release()
    proc.kill()


def wait_lock(proc: ManagedProcess) -> Any:
    """The lock `subprocess.Popen` holds while it calls waitpid for this child."""
    return proc._proc._waitpid_lock  # type: ignore[union-attr]


def sigint_once_the_wait_lock_is_taken(lock: Any) -> Callable[[FrameType, str, Any], None]:
    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if (
            event == "c_return"
            and frame.f_code.co_name == "_internal_poll"
            and getattr(arg, "__self__", None) is lock
        ):
            sys.setprofile(None)
            os.kill(os.getpid(), signal.SIGINT)

    return hook


class OneChild:
    """What `follow_forever` needs of a Stack: its child, and its client of a cluster with nothing in it
    (the fake API server), which it looks at every second."""

    def __init__(self, proc: ManagedProcess, client: GenericClient):
        self.proc = proc
        self.client = client

    def check_alive(self) -> None:
        self.proc.check_alive()


@pytest.fixture
def python_default_sigint() -> Iterator[None]:
    """Python's own Ctrl-C handling, however pytest was started (a background job inherits SIGINT ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("python_default_sigint")
def test_pythons_default_ctrl_c_at_that_moment_leaves_the_wait_lock_held(child: ManagedProcess) -> None:
    lock = wait_lock(child)
    sys.setprofile(sigint_once_the_wait_lock_is_taken(lock))
    try:
        with pytest.raises(KeyboardInterrupt):
            child.check_alive()
    finally:
        sys.setprofile(None)
    assert lock.locked()  # the cause: from here on a wait() without a timeout on this child never returns


def test_devstack_acts_on_ctrl_c_at_its_next_pause_not_inside_popen(
    child: ManagedProcess, cluster: GenericClient
) -> None:
    lock = wait_lock(child)
    with handle_stop_signals():
        sys.setprofile(sigint_once_the_wait_lock_is_taken(lock))
        try:
            with pytest.raises(KeyboardInterrupt) as raised:
                follow_forever(
                    OneChild(child, cluster),  # type: ignore[arg-type]
                    echo=print,
                    start=time.monotonic(),
                    stall_seconds=30,
                    last="",
                )
        finally:
            sys.setprofile(None)
    assert not lock.locked()
    assert raised.traceback[-1].path == Path(pause.__code__.co_filename)
    started = time.monotonic()
    assert stop_all([child], timeout=5) == {"sleeper": -15}
    assert time.monotonic() - started < 5


def test_a_stop_ends_even_when_a_childs_wait_lock_was_left_held(
    child: ManagedProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(processes, "REAP_SECONDS", 0.5, raising=False)
    lock = wait_lock(child)
    lock.acquire()  # what the interrupt above leaves behind
    stopped = threading.Event()

    def stop() -> None:
        stop_all([child], timeout=0.5)
        stopped.set()

    threading.Thread(target=stop, daemon=True).start()
    try:
        assert stopped.wait(10), "stop_all still waiting 10 s later"
    finally:
        lock.release()
    assert process_state(child.pid) in ("Z", "gone")  # SIGKILLed; reaped by whoever waits next


def process_state(pid: int | None) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


STOP_WITH_SIGINT_IGNORED_AND_BLOCKED = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)          # as a background job of a non-interactive shell
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
from devstack.interrupts import handle_stop_signals, pause
with handle_stop_signals():
    os.kill(os.getpid(), signal.SIGINT)
    try:
        pause(30)
    except KeyboardInterrupt:
        sys.exit(42)
sys.exit(1)
"""


def test_ctrl_c_stops_devstack_even_if_its_parent_left_sigint_ignored_and_blocked() -> None:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", STOP_WITH_SIGINT_IGNORED_AND_BLOCKED], cwd=REPO, timeout=60, check=False
    )
    assert result.returncode == 42
    assert time.monotonic() - started < 30


def test_sigterm_is_a_stop_request_too_and_handlers_are_restored() -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with handle_stop_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            pause(30)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_request_made_outside_a_pause_is_raised_by_the_next_pause() -> None:
    with handle_stop_signals():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        os.kill(os.getpid(), signal.SIGINT)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # delivered here: recorded, not raised
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            pause(30)
        assert time.monotonic() - started < 5
