"""Stopping one component of the kwokctl cluster (etcd, kube-apiserver, ...), as an outage.

kwokctl's binary runtime forks each component with its own session and records its pid in
`<cluster dir>/pids/<component>.pid`. A component is stopped by signalling that pid, as a crash or an
operator would; devstack's guard (devstack.controlplane.guard) then starts it again with `kwokctl start
cluster`, with the arguments kwokctl recorded at creation, as a kubelet restarts a static pod.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from devstack.interrupts import pause

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller")
"""As kwokctl names them, and their pid files."""
START_TIMEOUT_SECONDS = 180.0


class ComponentError(RuntimeError):
    """A component could not be stopped or started; the message says which and why."""


def pid_file(cluster_dir: Path, component: str) -> Path:
    if component not in COMPONENTS:
        raise ComponentError(f"unknown component {component!r}; valid: {', '.join(COMPONENTS)}")
    return cluster_dir / "pids" / f"{component}.pid"


def component_pid(cluster_dir: Path, component: str) -> int:
    path = pid_file(cluster_dir, component)
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError) as err:
        raise ComponentError(f"no pid of {component} in {path}: {err}") from None


def is_running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (an exited component no one has reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_restarted(
    cluster_dir: Path, component: str, old_pid: int, *, timeout: float = START_TIMEOUT_SECONDS
) -> int:
    """The component's new pid, once the guard has started it again."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(ComponentError):
            pid = component_pid(cluster_dir, component)
            if pid != old_pid and is_running(pid):
                return pid
        if time.monotonic() > deadline:
            raise ComponentError(f"{component} not started again within {timeout:.0f}s of its stop")
        pause(0.1)


def stop_component(
    cluster_dir: Path, component: str, *, sig: signal.Signals = signal.SIGKILL, timeout: float = 30.0
) -> int:
    """Signal the component (SIGKILL: a crash; SIGTERM: a graceful stop) and wait until it is gone: exited
    and reaped (kwokctl takes a zombie's pid for a running component and would not start it again).

    Returns the pid that was stopped."""
    pid = component_pid(cluster_dir, component)
    if not is_running(pid):
        raise ComponentError(f"{component} (pid {pid}) is not running")
    os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            state = "exited but not reaped" if not is_running(pid) else "still running"
            raise ComponentError(f"{component} (pid {pid}) {state} {timeout:.0f}s after {sig.name}")
        pause(0.05)
    return pid
