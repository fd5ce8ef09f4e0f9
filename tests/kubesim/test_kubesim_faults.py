"""Fault injection: spec parsing, and faults observable by external clients only."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from email.message import Message
from typing import Any

import pytest

from kubesim.apiserver.faults import FaultSpec, parse_faults
from kubesim.testing import KubesimServer


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("", FaultSpec()),
        ("error-rate=0.1,error-codes=429+500", FaultSpec(error_rate=0.1, error_codes=(429, 500))),
        ("latency-ms=20", FaultSpec(latency_ms=(20.0, 20.0))),
        (
            "latency-ms=5-50,drop-watch-after=5-30",
            FaultSpec(latency_ms=(5.0, 50.0), drop_watch_after=(5.0, 30.0)),
        ),
    ],
)
def test_parse_faults(spec: str, expected: FaultSpec) -> None:
    assert parse_faults(spec) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("error-rate=2", "must be within"),
        ("error-codes=404", "error-codes"),
        ("flood=1", "unknown fault kind"),
        ("latency-ms=9-1", "invalid range"),
        ("error-rate", "key=value"),
    ],
)
def test_bad_fault_specs_name_the_problem(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_faults(spec)


def get(url: str) -> tuple[int, Any, Message]:
    """Status, parsed body (None when empty) and headers (case-insensitive)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            raw = reply.read()
            return reply.status, json.loads(raw) if raw else None, reply.headers
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), exc.headers


def test_every_request_fails_with_429_and_retry_after_but_debug_and_controllers_are_spared() -> None:
    with KubesimServer(nodes=2, pools=1, faults="error-rate=1,error-codes=429,retry-after=3", seed=7) as sim:
        code, body, headers = get(f"{sim.url}/api/v1/nodes")
        assert code == 429
        assert headers["Retry-After"] == "3"
        assert body["reason"] == "TooManyRequests"
        nodes, _ = sim.call(lambda api: api.list("nodes"))
        assert len(nodes) == 2
        code, _, _ = get(f"{sim.url}/version")
        assert code == 200
        stats = sim.stats()
    assert stats["faults"]["injected"] == {"429": 1}


def test_error_rate_is_reproducible_with_a_seed() -> None:
    def codes() -> list[int]:
        with KubesimServer(
            nodes=1, pools=1, controllers=False, faults="error-rate=0.5,error-codes=500", seed=3
        ) as sim:
            return [get(f"{sim.url}/api/v1/namespaces")[0] for _ in range(20)]

    first, second = codes(), codes()
    assert first == second
    assert set(first) == {200, 500}


def test_watch_streams_are_dropped_after_the_drawn_lifetime() -> None:
    with KubesimServer(nodes=1, pools=1, controllers=False, faults="drop-watch-after=0.2-0.4", seed=1) as sim:
        code, _, _ = get(f"{sim.url}/api/v1/pods?watch=true&timeoutSeconds=30")
        assert code == 200  # the stream ended long before its 30 s timeout
        assert sim.stats()["faults"]["watch_streams_dropped"] == 1


def test_latency_is_added_and_counted() -> None:
    with KubesimServer(nodes=1, pools=1, controllers=False, faults="latency-ms=1-2", seed=1) as sim:
        for _ in range(3):
            assert get(f"{sim.url}/api/v1/nodes")[0] == 200
        assert sim.stats()["faults"]["injected"] == {"latency": 3}
