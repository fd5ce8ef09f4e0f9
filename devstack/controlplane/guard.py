"""`python -m devstack.controlplane.guard`: one kwokctl cluster, tied to the life of this process.

kwokctl's binary runtime starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok as
background processes and returns; they would outlive whoever asked for them. devstack therefore runs this
guard as one of its managed processes: it creates the cluster, prints one line when it is ready, and on
SIGTERM (devstack stopping, or dying: its children get SIGTERM then) deletes the cluster, which stops every
process of it. A cluster left behind by a guard that was SIGKILLed is deleted by the next guard of the same
work directory before it creates its own.

    python -m devstack.controlplane.guard --kwokctl BIN --kwok-workdir DIR --name NAME -- CREATE-FLAGS...
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

READY_LINE = "control plane ready"
DELETE_TIMEOUT_SECONDS = 60.0


def _kwokctl(
    binary: str, kwok_workdir: Path, name: str, args: Sequence[str]
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KWOK_WORKDIR": str(kwok_workdir)}
    return subprocess.run(
        [binary, "--name", name, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=DELETE_TIMEOUT_SECONDS if args[:1] == ["delete"] else None,
    )


def delete_cluster(binary: str, kwok_workdir: Path, name: str) -> None:
    if not (kwok_workdir / "clusters" / name).exists():
        return
    result = _kwokctl(binary, kwok_workdir, name, ["delete", "cluster"])
    if result.returncode != 0:
        print(
            f"kwokctl delete cluster {name} failed: {result.stderr.strip()[-2000:]}",
            file=sys.stderr,
            flush=True,
        )


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

    delete_cluster(args.kwokctl, args.kwok_workdir, args.name)  # one a SIGKILLed guard left behind
    created = _kwokctl(args.kwokctl, args.kwok_workdir, args.name, ["create", "cluster", *create_flags])
    sys.stdout.write(created.stdout)
    sys.stdout.write(created.stderr)
    if created.returncode != 0:
        print(f"kwokctl create cluster failed with exit code {created.returncode}", flush=True)
        delete_cluster(args.kwokctl, args.kwok_workdir, args.name)
        return 1
    print(f"{READY_LINE} name={args.name}", flush=True)
    try:
        stop.wait()
    finally:
        delete_cluster(args.kwokctl, args.kwok_workdir, args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
