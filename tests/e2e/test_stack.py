"""The `Stack` library itself: several resizer replicas elect one leader; components restart in place."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from devstack.manifests import exclusive_jobset
from devstack.scenario import wait_until_placed
from devstack.stack import Stack
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e


def test_two_resizers_elect_one_leader_and_components_restart_in_place(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(resizer_replicas=2)
    eventually(
        lambda: sorted(stack.resizer_roles()) == ["leader", "standby"],
        "one leader and one standby",
        60,
        interval=0.2,
    )
    webhook_url = stack.webhook_url
    stack.restart_webhook()
    stack.restart_resizer(1, kill=True)
    assert stack.webhook_url == webhook_url
    assert all(p.running for p in stack.processes())

    stack.client.create(exclusive_jobset("after-restarts", jobs=2, pods_per_job=4))
    placed = wait_until_placed(stack, "default", 2, timeout=60)
    assert all(s.resized and s.pods_running == 4 for s in placed.statuses)
    assert stack.client.stats()["pods"]["create_rejected"] == 0
