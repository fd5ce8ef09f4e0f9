"""`python -m devstack.controlplane.guard`: one kwokctl cluster, tied to the life of this process.

kwokctl's binary runtime starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok as
background processes and returns; they would outlive whoever asked for them. devstack therefore runs this
guard as one of its managed processes: it creates the cluster, prints one line when it is ready, and on
SIGTERM (devstack stopping, or dying: its children get SIGTERM then) deletes the cluster, which stops every
process of it. A cluster left behind by a guard that was SIGKILLed is deleted by the next guard of the same
work directory before it creates its own.

Meanwhile it does for the components what a kubelet does for a control plane's static pods: every second it
looks at their pids (kwokctl's `pids/` directory) and, when one has exited, runs `kwokctl start cluster`,
which starts every stopped component again. kube-controller-manager exits when kube-apiserver is not
healthy within its start-up wait (a loaded machine) or when it loses its leader Lease; a fault that kills
etcd or kube-apiserver relies on this too. The guard is the components' subreaper (they are orphaned when
kwokctl returns), so an exited one is reaped at once: kwokctl would take a zombie's pid for a running
component.

    python -m devstack.controlplane.guard --kwokctl BIN --kwok-workdir DIR --name NAME -- CREATE-FLAGS...
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

READY_LINE = "control plane ready"
RESTARTED_LINE = "control plane component restarted"
DELETE_TIMEOUT_SECONDS = 60.0
START_TIMEOUT_SECONDS = 180.0
SUPERVISE_SECONDS = 1.0
REAP_SECONDS = 0.2
COMPONENT_LOG_LINES = 15
_PR_SET_CHILD_SUBREAPER = 36


def kwokctl(
    binary: str, kwok_workdir: Path, name: str, args: Sequence[str], *, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """`kwokctl --name NAME ARGS...` on the clusters of `kwok_workdir`, its output captured."""
    env = {**os.environ, "KWOK_WORKDIR": str(kwok_workdir)}
    return subprocess.run(
        [binary, "--name", name, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def delete_cluster(binary: str, kwok_workdir: Path, name: str) -> None:
    if not (kwok_workdir / "clusters" / name).exists():
        return
    result = kwokctl(binary, kwok_workdir, name, ["delete", "cluster"], timeout=DELETE_TIMEOUT_SECONDS)
    if result.returncode != 0:
        print(
            f"kwokctl delete cluster {name} failed: {result.stderr.strip()[-2000:]}",
            file=sys.stderr,
            flush=True,
        )


def become_subreaper() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1)


def reap_exited() -> None:
    """Collect every exited child (the orphaned components among them) without waiting."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def reap_components(cluster_dir: Path, stop: threading.Event) -> None:
    """Until `stop`: reap any exited component at once, even while `kwokctl start cluster` runs (only the
    recorded component pids, never kwokctl's own, which its `subprocess.run` waits for)."""
    while not stop.wait(REAP_SECONDS):
        for pid_file in (cluster_dir / "pids").glob("*.pid"):
            with contextlib.suppress(OSError, ValueError):
                os.waitpid(int(pid_file.read_text().strip()), os.WNOHANG)


def stopped_components(cluster_dir: Path) -> list[str]:
    """The components whose recorded pid is gone (or a zombie)."""
    stopped = []
    for pid_file in sorted((cluster_dir / "pids").glob("*.pid")):
        try:
            stat = Path(f"/proc/{int(pid_file.read_text().strip())}/stat").read_text()
        except (OSError, ValueError):
            stopped.append(pid_file.stem)
            continue
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            stopped.append(pid_file.stem)
    return stopped


def supervise(binary: str, kwok_workdir: Path, name: str, stop: threading.Event) -> None:
    """Until `stop`: start again, with `kwokctl start cluster`, any component that exited."""
    cluster_dir = kwok_workdir / "clusters" / name
    threading.Thread(target=reap_components, args=(cluster_dir, stop), name="reaper", daemon=True).start()
    while not stop.wait(SUPERVISE_SECONDS):
        reap_exited()
        stopped = stopped_components(cluster_dir)
        if not stopped or stop.is_set():
            continue
        try:
            result = kwokctl(binary, kwok_workdir, name, ["start", "cluster"], timeout=START_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            print(f"kwokctl start cluster ({', '.join(stopped)}) timed out", file=sys.stderr, flush=True)
            continue
        outcome = "" if result.returncode == 0 else f" (kwokctl failed: {result.stderr.strip()[-500:]})"
        print(f"{RESTARTED_LINE}: {', '.join(stopped)}{outcome}", flush=True)


def print_component_logs(cluster_dir: Path, lines: int = COMPONENT_LOG_LINES) -> None:
    """The last `lines` of every component's log (kwokctl's `logs/` directory): why it did not come up."""
    for log_file in sorted((cluster_dir / "logs").glob("*.log")):
        with contextlib.suppress(OSError):
            tail = log_file.read_text(errors="replace").splitlines()[-lines:]
            print(f"--- last {len(tail)} lines of {log_file.name}", *tail, sep="\n", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack.controlplane.guard", description=__doc__)
    parser.add_argument("--kwokctl", required=True)
    parser.add_argument("--kwok-workdir", type=Path, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("create_flags", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    create_flags = [flag for flag in args.create_flags if flag != "--"]

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda _signum, _frame: stop.set())

    become_subreaper()
    delete_cluster(args.kwokctl, args.kwok_workdir, args.name)  # one a SIGKILLed guard left behind
    created = kwokctl(args.kwokctl, args.kwok_workdir, args.name, ["create", "cluster", *create_flags])
    sys.stdout.write(created.stdout)
    sys.stdout.write(created.stderr)
    if created.returncode != 0:
        print(f"kwokctl create cluster failed with exit code {created.returncode}", flush=True)
        print_component_logs(args.kwok_workdir / "clusters" / args.name)
        delete_cluster(args.kwokctl, args.kwok_workdir, args.name)
        return 1
    print(f"{READY_LINE} name={args.name}", flush=True)
    try:
        supervise(args.kwokctl, args.kwok_workdir, args.name, stop)
    finally:
        delete_cluster(args.kwokctl, args.kwok_workdir, args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
