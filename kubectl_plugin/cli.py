"""The command line of `kubectl exclusive-placement`, installed as `kubectl-exclusive_placement` (which
kubectl finds on PATH). Exit status: 0 done, 1 the cluster could not be read (one line says why), 2 a usage
error.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from kubectl_plugin.cluster import Cluster, Connection, ReadError, current_namespace
from kubectl_plugin.explain import explain_job, explain_jobset, explain_pod
from kubectl_plugin.render import render_json, render_table
from kubekit.client import ClusterConfigError
from placement.objects import owner_job_key
from placement.status import Snapshot, placement_status

PROG = "kubectl exclusive-placement"
READ_ERROR = 1
USAGE_ERROR = 2
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


def status(
    cluster: Cluster, args: argparse.Namespace, namespace: str | None, echo: Callable[[str], None]
) -> int:
    scope = "in any namespace" if namespace is None else f"in namespace {namespace}"

    def render(snapshot: Snapshot, *, compact: bool = False) -> str:
        domains, waiting = placement_status(snapshot, namespace)
        if args.output == "json":
            return render_json(domains, waiting, compact=compact)
        return render_table(
            domains, waiting, scope=scope, all_namespaces=namespace is None, wide=args.output == "wide"
        )

    snapshot = cluster.snapshot(namespace)
    shown = render(snapshot, compact=args.watch)
    echo(shown)
    if not args.watch:
        return 0

    def on_change(fresh: Snapshot) -> None:
        nonlocal shown
        text = render(fresh, compact=True)
        if text != shown:
            shown = text
            echo(text if args.output == "json" else f"\n{text}")

    cluster.follow(namespace, on_change, threading.Event())
    return 0


def explain(cluster: Cluster, kind: str, name: str, namespace: str, echo: Callable[[str], None]) -> int:
    obj = cluster.get(kind, namespace, name)
    if obj is None:
        print(f'error: {kind} "{name}" not found in namespace {namespace}', file=sys.stderr)
        return READ_ERROR
    events = cluster.events(namespace)
    if kind == "jobset":
        echo(
            explain_jobset(cluster.snapshot(namespace, cluster.jobs_of_jobset(namespace, name)), obj, events)
        )
    elif kind == "job":
        echo(
            explain_job(cluster.snapshot(namespace, [obj]), obj, events, cluster.pods_of_job(namespace, name))
        )
    else:
        owner = owner_job_key(obj)
        job = cluster.get("job", namespace, owner.split("/", 1)[1]) if owner else None
        echo(explain_pod(cluster.snapshot(namespace, [job] if job else []), obj, job, events))
    return 0


def echo(text: str) -> None:
    print(text, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
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
    connection = Connection(
        getattr(args, "kubeconfig", None),
        getattr(args, "context", None),
        getattr(args, "request_timeout", 10.0),
    )
    try:
        cluster = Cluster.connect(connection)
    except ClusterConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return READ_ERROR
    namespace = getattr(args, "namespace", None) or current_namespace(connection)
    try:
        if target is not None:
            return explain(cluster, *target, namespace, echo)
        return status(cluster, args, None if args.all_namespaces else namespace, echo)
    except ReadError as error:
        print(f"error: {error}", file=sys.stderr)
        return READ_ERROR
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        # The reader went away (`| head`): say nothing more, as the docs of `signal` advise.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return READ_ERROR
    finally:
        cluster.close()
