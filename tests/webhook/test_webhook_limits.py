"""The webhook's bounds as units: connection counts, admission slots, memory budget, readiness hold, and the
parsed-size estimate against what parsing and copying a review really allocate (tracemalloc).

The real process under abusive clients is tested in tests/security/test_abuse_limits.py.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tracemalloc
from collections.abc import Callable

import pytest

from placement.patch import deep_copy
from tests.security.security_support import ROOT, fixture_review
from webhook.body import parsed_size_estimate
from webhook.limits import InflightGate, MemoryBudget, Reservation, Shedding
from webhook.listener import ConnectionLimits

# --- connections ------------------------------------------------------------------------------------------


def test_connections_are_capped_per_client_then_in_total() -> None:
    limits = ConnectionLimits(total=3, per_client=2)
    releases = [limits.opened("10.0.0.1"), limits.opened("10.0.0.1")]
    assert limits.refusal("10.0.0.1") == "max-connections-per-client"
    assert limits.refusal("10.0.0.2") is None
    releases.append(limits.opened("10.0.0.2"))
    assert limits.refusal("10.0.0.3") == "max-connections"
    releases[0]()
    releases[0]()  # released once, however often it is called
    assert (limits.open, limits.by_client["10.0.0.1"]) == (2, 1)
    assert limits.refusal("10.0.0.1") is None
    for release in releases:
        release()
    assert (limits.open, dict(limits.by_client)) == (0, {})


# --- admissions -------------------------------------------------------------------------------------------


def test_the_gate_admits_up_to_its_limit() -> None:
    gate = InflightGate(2)
    assert gate.try_enter()
    assert gate.try_enter()
    assert gate.full
    assert not gate.try_enter()
    gate.leave()
    assert not gate.full
    assert gate.try_enter()


def test_readiness_holds_after_the_last_refusal() -> None:
    now = [100.0]
    shedding = Shedding(hold_seconds=5.0, clock=lambda: now[0])
    assert not shedding.recently()
    shedding.refused()
    now[0] = 104.9
    assert shedding.recently()
    now[0] = 105.0
    assert not shedding.recently()


def test_reservations_grow_within_the_budget_and_release_what_they_hold() -> None:
    budget = MemoryBudget(100)
    first, second = Reservation(budget), Reservation(budget)
    assert first.grow_to(60)
    assert first.grow_to(40)  # never shrinks
    assert (first.size, budget.reserved) == (60, 60)
    assert not second.grow_to(41)
    assert (second.size, budget.reserved) == (0, 60)  # a refused growth holds what it held
    assert second.grow_to(40)
    first.release()
    second.release()
    assert budget.reserved == 0


# --- the parsed-size estimate -----------------------------------------------------------------------------


def _items(item: bytes, count: int = 50_000) -> bytes:
    return b"[" + b",".join([item] * count) + b"]"


def _many_env_vars() -> bytes:
    review = fixture_review("leader-pod.json")
    env = [{"name": f"VAR_{i}", "value": f"value-{i}" * 3} for i in range(5_000)]
    review["request"]["object"]["spec"]["containers"][0]["env"] = env
    return json.dumps(review).encode()


SHAPES: dict[str, Callable[[], bytes]] = {
    "empty objects": lambda: _items(b"{}"),
    "empty arrays": lambda: _items(b"[]"),
    "one-member objects": lambda: _items(b'{"a":0}'),
    "nested arrays": lambda: _items(b"[[[[[[[[[[]]]]]]]]]]", 5_000),
    "floats": lambda: _items(b"1.5"),
    "large integers": lambda: _items(b"123456"),
    "short strings": lambda: _items(b'"ab"'),
    "distinct keys": lambda: b"{" + b",".join(b'"k%d":0' % i for i in range(50_000)) + b"}",
    "one long string": lambda: b'["' + b"x" * 500_000 + b'"]',
    "leader review": lambda: json.dumps(fixture_review("leader-pod.json")).encode(),
    "job review": lambda: json.dumps(fixture_review("jobset-child-job.json")).encode(),
    "pod with 5,000 env vars": _many_env_vars,
}


def _peak_of_parse_and_copy(body: bytes) -> int:
    """What an admission allocates from its body: the parsed review and the deep copy a mutation works on."""
    gc.collect()
    tracemalloc.start()
    try:
        parsed = json.loads(body)
        copied = deep_copy(parsed) if isinstance(parsed, dict) else json.loads(json.dumps(parsed))
        peak = tracemalloc.get_traced_memory()[1]
        del parsed, copied
    finally:
        tracemalloc.stop()
    return peak + len(body)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_estimate_bounds_what_parsing_and_copying_allocate(shape: str) -> None:
    body = SHAPES[shape]()
    estimate, peak = parsed_size_estimate(body), _peak_of_parse_and_copy(body)
    print(f"{shape}: {len(body)} B, peak {peak} B ({peak / len(body):.1f}x), estimate {estimate / peak:.2f}x")
    assert estimate >= peak


def test_the_file_limit_is_raised_to_fit_the_connection_limit() -> None:
    """In a child process (the limit is per process): a soft limit of 100 is raised for 500 connections."""
    script = (
        "import resource\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (100, hard))\n"
        "from webhook.listener import raise_file_limit\n"
        "raise_file_limit(500)\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)\n"
    )
    soft, hard = map(
        int,
        subprocess.run(
            [sys.executable, "-c", script], check=True, capture_output=True, text=True, cwd=ROOT
        ).stdout.split(),
    )
    assert soft == (564 if hard == -1 or hard >= 564 else hard)
