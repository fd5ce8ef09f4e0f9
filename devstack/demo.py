"""The scripted end to end behind `make run` and `make demo`: apply manifests, follow, summarise."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from devstack.diagnosis import diagnose, read_snapshot
from devstack.report import state_summary
from devstack.scenario import Observation, ensure_namespace, expected_jobs, wait_until_placed
from devstack.stack import Stack
from devstack.stall import StallWatcher

Printer = Callable[[str], None]


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
    ensure_namespace(stack.client, namespace)
    start = time.monotonic()
    for obj in objects:
        created = stack.client.create(obj, namespace=namespace)
        echo(f"created {created['kind']} {namespace}/{created['metadata']['name']}")
    last = ""
    stall = (
        StallWatcher(after=stall_seconds, diagnose=lambda: diagnose(read_snapshot(stack.client, namespace)))
        if stall_seconds is not None
        else None
    )

    def progress(observation: Observation) -> None:
        nonlocal last
        now = time.monotonic()
        summary = state_summary(observation.statuses)
        if summary != last:
            echo(f"[{now - start:6.2f}s] {summary}")
            last = summary
        report = stall.observe(observation.statuses, now) if stall is not None else None
        if report is not None:
            echo(f"[{now - start:6.2f}s] {report}")

    return wait_until_placed(
        stack, namespace, expected_jobs(objects), timeout=timeout, on_progress=progress, start=start
    )
