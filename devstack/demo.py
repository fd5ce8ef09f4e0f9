"""The scripted end to end behind `make run` and `make demo`: apply manifests, follow, summarise."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from devstack.report import state_summary
from devstack.scenario import Observation, ensure_namespace, expected_jobs, wait_until_placed
from devstack.stack import Stack

Printer = Callable[[str], None]


def apply_and_follow(
    stack: Stack,
    objects: list[dict[str, Any]],
    *,
    namespace: str,
    timeout: float,
    echo: Printer,
) -> Observation:
    """Create `objects` in `namespace`, print progress when it changes, return the placed state.

    Raises `PlacementError` with the table and the scheduler's reasons if not everything is placed."""
    ensure_namespace(stack.client, namespace)
    start = time.monotonic()
    for obj in objects:
        created = stack.client.create(obj, namespace=namespace)
        echo(f"created {created['kind']} {namespace}/{created['metadata']['name']}")
    last = ""

    def progress(observation: Observation) -> None:
        nonlocal last
        summary = state_summary(observation.statuses)
        if summary != last:
            echo(f"[{time.monotonic() - start:6.2f}s] {summary}")
            last = summary

    return wait_until_placed(
        stack, namespace, expected_jobs(objects), timeout=timeout, on_progress=progress, start=start
    )
