"""What `kubectl exclusive-placement` does once its command line is parsed (`kubectl_plugin.cli`): connect,
read, print. Imported by `cli.main` after it has made Ctrl-C end the process."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Callable

from kubectl_plugin.cluster import Cluster, Connection, ReadError, current_namespace
from kubectl_plugin.explain import explain_job, explain_jobset, explain_pod
from kubectl_plugin.render import render_json, render_table
from kubekit.client import ClusterConfigError
from placement.constants import JOBSET_NAME_LABEL
from placement.objects import Obj, labels_of, metadata, owner_job_key
from placement.status import Snapshot, placement_status

READ_ERROR = 1


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
        snapshot = cluster.snapshot(namespace, _with_siblings(cluster, namespace, obj))
        echo(explain_job(snapshot, obj, events, cluster.pods_of_job(namespace, name)))
    else:
        owner = owner_job_key(obj)
        job = cluster.get("job", namespace, owner.split("/", 1)[1]) if owner else None
        jobs = _with_siblings(cluster, namespace, job) if job else []
        echo(explain_pod(cluster.snapshot(namespace, jobs), obj, job, events))
    return 0


def echo(text: str) -> None:
    print(text, flush=True)


def _with_siblings(cluster: Cluster, namespace: str, job: Obj) -> list[Obj]:
    """The Job and the other Jobs of its JobSet: whether they outnumber the domains is part of its answer."""
    jobset = labels_of(job).get(JOBSET_NAME_LABEL)
    siblings = cluster.jobs_of_jobset(namespace, jobset) if jobset else []
    name = metadata(job).get("name")
    return [job, *(other for other in siblings if metadata(other).get("name") != name)]


def run(args: argparse.Namespace, target: tuple[str, str] | None) -> int:
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
    except BrokenPipeError:
        # The reader went away (`| head`): say nothing more, as the docs of `signal` advise.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return READ_ERROR
    finally:
        cluster.close()
