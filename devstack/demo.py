"""The scripted end to end behind `make run` and `make demo`: apply manifests, follow, summarise; then, for
`make run`, keep reporting every exclusive Job of the cluster while it serves."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from devstack.diagnosis import diagnose, read_cluster
from devstack.interrupts import pause
from devstack.report import DONE_STATES, JobState, Timeline, state_summary
from devstack.scenario import (
    Observation,
    PlacementError,
    ensure_namespace,
    expected_jobs,
    observe,
    wait_until_placed,
)
from devstack.stack import Stack
from devstack.stall import StallWatcher
from kubekit.client import KubeError
from kubekit.generic import GenericClient
from kubekit.resources import UnservedKind

Printer = Callable[[str], None]
SETTLED: frozenset[JobState] = DONE_STATES | {"failed"}
"""Nothing more happens to a Job in these states: no stall to report about it."""


class ProgressReporter:
    """Prints the Jobs' summary when it changes and, with a `StallWatcher`, why they wait once they stop
    progressing while some are not settled."""

    def __init__(self, echo: Printer, start: float, stall: StallWatcher | None, *, last: str = "") -> None:
        self._echo = echo
        self._start = start
        self._stall = stall
        self._last = last

    def __call__(self, observation: Observation) -> None:
        now = time.monotonic()
        summary = state_summary(observation.statuses)
        if summary != self._last:
            self._echo(f"[{now - self._start:6.2f}s] {summary}")
            self._last = summary
        if self._stall is None or all(s.state in SETTLED for s in observation.statuses):
            return
        report = self._stall.observe(observation.statuses, now)
        if report is not None:
            self._echo(f"[{now - self._start:6.2f}s] {report}")


def stall_watcher(client: GenericClient, namespace: str | None, seconds: float | None) -> StallWatcher | None:
    if seconds is None:
        return None
    return StallWatcher(after=seconds, diagnose=lambda: diagnose(read_cluster(client, namespace)))


def apply(stack: Stack, objects: list[dict[str, Any]], *, namespace: str, echo: Printer) -> None:
    """Create `objects` in `namespace` (cluster-scoped ones where they belong), any kind the API server
    serves; a refusal is one `PlacementError` line naming the object."""
    ensure_namespace(stack.client, namespace)
    for obj in objects:
        meta = obj.get("metadata") or {}
        what = f"{obj.get('kind')} {meta.get('name') or meta.get('generateName') or ''}".rstrip()
        try:
            created = stack.client.create(obj, namespace=namespace)
        except (KubeError, UnservedKind) as err:
            raise PlacementError(f"cannot create {what}: {err}") from None
        created_ns = (created.get("metadata") or {}).get("namespace")
        echo(
            f"created {created['kind']} {created_ns + '/' if created_ns else ''}{created['metadata']['name']}"
        )


def apply_and_follow(
    stack: Stack,
    objects: list[dict[str, Any]],
    *,
    namespace: str,
    timeout: float,
    echo: Printer,
    stall_seconds: float | None = None,
) -> Observation:
    """Create `objects` in `namespace`, print progress when it changes, return the placed state.

    With `stall_seconds`, also print why the Jobs wait once they made no progress for that long (see
    `devstack.stall`). Raises `PlacementError` with the table and the reasons if not everything is placed."""
    start = time.monotonic()
    apply(stack, objects, namespace=namespace, echo=echo)
    reporter = ProgressReporter(echo, start, stall_watcher(stack.client, namespace, stall_seconds))
    return wait_until_placed(
        stack, namespace, expected_jobs(objects), timeout=timeout, on_progress=reporter, start=start
    )


def follow_forever(
    stack: Stack, *, echo: Printer, start: float, stall_seconds: float, last: str, poll_seconds: float = 1.0
) -> None:
    """While the stack serves: every exclusive Job of every namespace, reported as it progresses or stalls,
    so workloads applied after the example are followed too. A violation of exclusivity is said once;
    nothing here ends the stack but a dead component (`ProcessError`) or Ctrl-C."""
    reporter = ProgressReporter(echo, start, stall_watcher(stack.client, None, stall_seconds), last=last)
    timeline = Timeline(start)
    said: set[str] = set()
    while True:
        stack.check_alive()
        observation = observe(stack.client, None, timeline, stack.client.list("Node"))
        reporter(observation)
        for problem in observation.problems:
            if problem not in said:
                said.add(problem)
                echo(f"exclusivity violated: {problem}")
        pause(poll_seconds)
