"""Child processes that never outlive the stack: own process group, logs to a file, group-wide stop."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import time
from pathlib import Path

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
REAP_SECONDS = 5.0
"""How long a SIGKILLed child may take to be reaped before the stop goes on without it."""


def _die_with_parent() -> None:
    """Runs in the child before exec: a new session (Ctrl-C in the terminal reaches only devstack, which
    then stops the children in order) and SIGTERM if devstack itself dies without cleaning up."""
    os.setsid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class ProcessError(RuntimeError):
    """A component failed to start or exited unexpectedly; the message carries the tail of its log."""


class ManagedProcess:
    """One component: started in its own process group, stdout+stderr appended to `log_path`."""

    def __init__(self, name: str, argv: list[str], log_path: Path, env: dict[str, str] | None = None):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self._env = env
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    def start(self) -> None:
        if self.running:
            raise ProcessError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(self._env or {})}
        with self.log_path.open("ab") as out:
            self._log_offset = out.tell()  # the log is appended to: earlier runs' lines are not this run's
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - only setsid + prctl, both async-signal-safe
            )
        log.info("started %s (pid %s): %s", self.name, self._proc.pid, " ".join(self.argv))

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def signal(self, sig: signal.Signals) -> None:
        """Send `sig` to the whole process group (the component and anything it spawned)."""
        if self._proc is None or self._proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL the group and reap it: a crash, as the fault tests want it.

        The wait is bounded: a stop must end even if the child cannot be reaped (Popen's waitpid lock left
        held by an exception raised inside Popen, say); the kernel reaps it once devstack exits."""
        self.signal(signal.SIGKILL)
        if self._proc is None:
            return
        try:
            self._proc.wait(REAP_SECONDS)
        except subprocess.TimeoutExpired:
            log.error(
                "%s (pid %s) not reaped %.0fs after SIGKILL; giving up on it",
                self.name,
                self.pid,
                REAP_SECONDS,
            )

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM the group, wait up to `timeout` seconds, then SIGKILL. Returns the exit code."""
        if self._proc is None:
            return None
        if self._proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                if timeout > 0:
                    log.warning("%s ignored SIGTERM for %.0fs; killing it", self.name, timeout)
                self.kill()
        # Children of the component that ignored SIGTERM still share the group: make sure none survive.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        return self._proc.returncode

    def log_since_start(self) -> str:
        """What this run of the process wrote (the log file may hold earlier runs before it)."""
        try:
            with self.log_path.open("rb") as log_file:
                log_file.seek(self._log_offset)
                return log_file.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_since_start()
        return "\n".join(text.splitlines()[-lines:]) if text else "(nothing logged)"

    def check_alive(self) -> None:
        """Raise `ProcessError` with the log tail if the component has exited."""
        code = self.returncode
        if self._proc is not None and code is not None:
            raise ProcessError(
                f"{self.name} exited with code {code}; last lines of {self.log_path}:\n{self.log_tail()}"
            )


def stop_all(processes: list[ManagedProcess], timeout: float = 10.0) -> dict[str, int | None]:
    """SIGTERM every group at once, give them `timeout` seconds together, then SIGKILL the rest.

    All at once rather than one by one: a client blocked in a watch on the API server returns as soon as
    the API server goes away, instead of each process spending its own grace period."""
    for process in processes:
        process.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(p.running for p in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    return {process.name: process.stop(timeout=0) for process in processes}
