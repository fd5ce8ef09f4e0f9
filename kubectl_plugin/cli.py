"""The command line of `kubectl exclusive-placement`, installed as `kubectl-exclusive_placement` (which
kubectl finds on PATH). Exit status: 0 done, 1 the cluster could not be read (one line says why), 2 a usage
error, 130 interrupted (Ctrl-C, as kubectl).

Ctrl-C ends it at any moment, with no traceback: the first thing `main` does is to make SIGINT end the
process at once (`os._exit(130)`). The plugin only reads, so there is nothing to undo, and an exception
raised wherever the signal lands (inside a lock of a watch thread, in the middle of an import) is never
raised at all. This module imports only the standard library, so the handler is in place before the
Kubernetes client is imported (`kubectl_plugin.commands`, which takes most of the start-up).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

PROG = "kubectl exclusive-placement"
KINDS = {
    "job": "job",
    "jobs": "job",
    "job.batch": "job",
    "jobset": "jobset",
    "jobsets": "jobset",
    "jobset.jobset.x-k8s.io": "jobset",
    "pod": "pod",
    "pods": "pod",
    "po": "pod",
}


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    # SUPPRESS: an option given before the subcommand is not reset by the subcommand's own default.
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument(
        "--kubeconfig", type=Path, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)"
    )
    common.add_argument("--context", help="kubeconfig context (default: its current context)")
    common.add_argument("-n", "--namespace", help="namespace (default: the context's, else default)")
    common.add_argument(
        "--request-timeout", type=positive_seconds, metavar="SECONDS", help="timeout of each API call (10)"
    )
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Where exclusive placement stands: domains and their holders, Jobs and what they wait "
        "for. Read-only (get, list, watch). docs/kubectl-plugin.md",
        parents=[common],
    )
    commands = parser.add_subparsers(dest="command", required=True)
    status = commands.add_parser(
        "status",
        parents=[common],
        help="every topology domain with its holders; every exclusive Job not yet placed, with why",
        description="Every domain of the topology keys exclusive Jobs use, with the Jobs holding it, and "
        "every exclusive Job not yet placed with what it waits for (reason and message).",
    )
    status.add_argument("-A", "--all-namespaces", action="store_true", help="Jobs of every namespace")
    status.add_argument("-o", "--output", choices=["wide", "json"], help="wide: more columns; json: stable")
    status.add_argument("-w", "--watch", action="store_true", help="print again whenever it changes")
    explain = commands.add_parser(
        "explain",
        parents=[common],
        help="one Job, JobSet or pod: its steps towards being placed, what it waits for, what unblocks it",
        description="Where a Job, JobSet or pod stands on its way to being placed, what it waits for next "
        "and what would unblock it.",
    )
    explain.add_argument("target", metavar="(job|jobset|pod)/NAME", help="also accepted: TYPE NAME")
    explain.add_argument("name", nargs="?", help=argparse.SUPPRESS)
    return parser


def parse_target(target: str, name: str | None) -> tuple[str, str]:
    """("job", "x") from `job/x` or `job x`; ValueError naming the accepted forms."""
    kind, _, rest = target.partition("/")
    given = " ".join(filter(None, (target, name)))
    if kind.lower() not in KINDS or bool(rest) == bool(name):
        raise ValueError(f"expected (job|jobset|pod)/NAME or TYPE NAME, got {given!r}")
    return KINDS[kind.lower()], rest or str(name)


INTERRUPTED = 128 + signal.SIGINT


def _leave(_signum: int, _frame: FrameType | None) -> None:
    os._exit(INTERRUPTED)


@contextmanager
def leaving_on_interrupt() -> Iterator[None]:
    """SIGINT ends the process with 130 while inside (main thread only; the previous handler after)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def main(argv: Sequence[str] | None = None) -> int:
    with leaving_on_interrupt():
        parser = build_parser()
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
        logging.basicConfig(level=logging.WARNING, format=f"{PROG}: %(message)s")
        if args.command == "status" and args.all_namespaces and getattr(args, "namespace", None):
            parser.error("give a namespace (-n) or --all-namespaces (-A), not both")
        target: tuple[str, str] | None = None
        if args.command == "explain":
            try:
                target = parse_target(args.target, args.name)
            except ValueError as error:
                parser.error(str(error))
        from kubectl_plugin.commands import run  # the Kubernetes client: after the handler is in place

        return run(args, target)
