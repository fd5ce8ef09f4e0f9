"""Pure scheduling-cycle helpers: how many nodes to search, LeastAllocated scores, the message."""

from collections import Counter

import pytest

from kubesim.controllers.nodefit import Resources
from kubesim.controllers.nodestate import (
    NodeState,
    least_allocated_score,
    num_feasible_nodes_to_find,
    unschedulable_message,
)


@pytest.mark.parametrize(
    ("nodes", "percentage", "expected"),
    [
        (50, 0, 50),
        (100, 0, 100),
        (1000, 0, 420),  # 50% - 1000/125 = 42%
        (4096, 0, 737),  # 50% - 32 = 18%
        (5000, 0, 500),  # 50% - 40 = 10%
        (10000, 0, 500),  # floor of 5%
        (4096, 100, 4096),
        (150, 10, 100),  # never fewer than 100
    ],
)
def test_num_feasible_nodes_to_find(nodes: int, percentage: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(nodes, percentage) == expected


def _node(cpu_used: int, memory_used: int) -> NodeState:
    state = NodeState(
        "n", {}, {}, Resources(cpu=10_000, memory=100, gpu=8, pods=110), Resources(cpu_used, memory_used)
    )
    state.account()
    return state


@pytest.mark.parametrize(
    ("cpu_used", "memory_used", "score"),
    [(0, 0, 90), (5_000, 0, 65), (9_000, 90, 0), (10_000, 0, 45)],
)
def test_least_allocated_prefers_emptier_nodes(cpu_used: int, memory_used: int, score: int) -> None:
    assert (
        least_allocated_score(_node(cpu_used, memory_used), Resources(cpu=1_000, memory=10, pods=1)) == score
    )


def test_free_capacity_follows_requests() -> None:
    state = _node(4_000, 10)
    assert (state.free_cpu, state.free_memory, state.free_gpu, state.free_pods) == (6_000, 90, 8, 110)


def test_unschedulable_message_lists_reasons_like_the_scheduler() -> None:
    reasons = Counter(
        {"Insufficient nvidia.com/gpu": 3, "node(s) didn't match Pod's node affinity/selector": 5}
    )
    assert unschedulable_message(8, reasons) == (
        "0/8 nodes are available: 3 Insufficient nvidia.com/gpu, "
        "5 node(s) didn't match Pod's node affinity/selector."
    )


def test_unschedulable_message_sorts_count_and_reason_as_one_string() -> None:
    """FitError.Error sorts the "count reason" strings: the count leads, and "10 ..." sorts before "3 ..."."""
    reasons = Counter(
        {"Insufficient cpu": 5, "node(s) had untolerated taint {a: b}": 3, "node(s) were unschedulable": 10}
    )
    assert unschedulable_message(18, reasons) == (
        "0/18 nodes are available: 10 node(s) were unschedulable, "
        "3 node(s) had untolerated taint {a: b}, 5 Insufficient cpu."
    )
