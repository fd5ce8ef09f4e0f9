"""Quick variant of the webhook load benchmark: it runs end to end and its accounting holds.

Timings are reported, never asserted; what must hold is that every request succeeded, that follower
lookups were all served from the cache (zero API calls, zero cache misses) and that the report is complete.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from bench.webhook_load import (
    ENDPOINTS,
    INSTALL_HEY,
    NOOP_MARGIN,
    NOOPS,
    REAL_ENDPOINTS,
    SAME_BODY_NOOPS,
    GeneratorLoad,
    bodies,
    find_hey,
    generator_bound_reasons,
    hey_origin,
    main,
    reference_noop,
)


@pytest.mark.parametrize(
    "tool",
    [
        "httpx",
        # hey is built by `make kube` from its pin, so this never skips: the kube tier's build comes first.
        pytest.param("hey", marks=pytest.mark.kube),
    ],
)
def test_quick_webhook_load(tmp_path: Path, tool: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "webhook.json"
    assert main(["--quick", "--tool", tool, "--out", str(out)]) == 0
    printed = capsys.readouterr()
    report = json.loads(out.read_text())
    assert report["tool"] == tool
    if tool == "hey":
        assert report["hey"].startswith("github.com/rakyll/hey v"), report["hey"]
    assert set(report["endpoints"]) == set(ENDPOINTS)
    for name in ENDPOINTS:
        result = report["endpoints"][name]
        assert result["max_throughput"]["requests"] > 0
        assert result["max_throughput"]["errors"] == 0
        assert result["at_50_rps"]["requests"] > 0
        assert result["at_50_rps"]["errors"] == 0
        assert result["max_throughput"]["p50_ms"] > 0
    # Either the server set the pace (ratios, the no-op's 1.0) or the report says why not and gives none.
    ratios = {name: report["endpoints"][name]["ratio_to_noop"] for name in ENDPOINTS}
    same_body = {name: report["endpoints"][name]["ratio_to_same_body_noop"] for name in ENDPOINTS}
    assert set(report["met"]) == {*REAL_ENDPOINTS, "zero_api_calls"}
    if report["generator_bound"]:
        assert set(ratios.values()) == set(same_body.values()) == {None}
        assert {report["met"][n]["ratio"] for n in REAL_ENDPOINTS} == {None}
        assert "NO RATIO: the load generator" in printed.err
    else:
        assert ratios["noop"] == 1.0
        assert {same_body[noop] for noop in NOOPS} == {1.0}
        assert all(same_body[name] < NOOP_MARGIN for name in REAL_ENDPOINTS)
        for name in REAL_ENDPOINTS:
            assert report["met"][name]["ratio"] == (same_body[name] >= 0.8), name
    assert report["generator"]["cpu_share"] > 0
    assert report["api_calls_during_load"] == 0
    assert report["webhook_cache"]["misses"] == 0
    assert report["webhook_cache"]["hits"] >= report["follower_lookups"]
    assert report["met"]["zero_api_calls"] is True
    assert "mutate-follower" in printed.out


def test_each_endpoint_is_held_against_the_no_op_fed_its_own_review() -> None:
    sent = bodies()
    assert set(sent) == set(ENDPOINTS)
    for endpoint, noop in SAME_BODY_NOOPS.items():
        assert reference_noop(endpoint) == noop
        assert sent[noop] == sent[endpoint]
    pod_endpoints = [name for name in REAL_ENDPOINTS if name not in SAME_BODY_NOOPS]
    assert pod_endpoints == ["mutate-leader", "mutate-follower", "validate-follower"]
    for name in pod_endpoints:  # pod reviews all: the pod no-op's is within 10 % of their size
        assert reference_noop(name) == "noop"
        assert abs(len(sent[name]) - len(sent["noop"])) <= 0.1 * len(sent["noop"]), name
    assert all(reference_noop(noop) == noop for noop in NOOPS)


def test_bad_arguments_are_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--duration", "0", "--tool", "httpx"]) == 2
    assert "must be > 0" in capsys.readouterr().err


IDLE = GeneratorLoad(cpu_seconds=3.0, wall_seconds=15.0, cores=2)
SERVER_BOUND = {
    "noop": 4900.0,
    "mutate-leader": 3095.0,
    "mutate-follower": 3460.0,
    "validate-follower": 4007.0,
}


@pytest.mark.parametrize(
    ("max_rps", "generator", "reasons"),
    [
        (SERVER_BOUND, IDLE, []),
        # the fresh-machine httpx run: the no-op slower than the real endpoints (ratio 1.32)
        (
            {"noop": 700.0, "mutate-leader": 924.0, "mutate-follower": 650.0, "validate-follower": 690.0},
            GeneratorLoad(cpu_seconds=14.5, wall_seconds=15.0, cores=1),
            [
                "the no-op endpoint (700 req/s) was not clearly the fastest (mutate-leader 1.32x, "
                "validate-follower 0.99x its throughput)",
                "the load generator used 97% of the 1 core(s) it can use",
            ],
        ),
        # all endpoints equally fast: the generator cannot send faster
        (
            {"noop": 1000.0, "mutate-leader": 960.0, "mutate-follower": 940.0, "validate-follower": 900.0},
            IDLE,
            [
                "the no-op endpoint (1000 req/s) was not clearly the fastest "
                "(mutate-leader 0.96x its throughput)"
            ],
        ),
        (
            SERVER_BOUND,
            GeneratorLoad(cpu_seconds=27.0, wall_seconds=15.0, cores=2),
            ["the load generator used 90% of the 2 core(s) it can use"],
        ),
        # the Job endpoint held against the no-op fed its own review, not the pod no-op
        (
            {**SERVER_BOUND, "noop-job": 2000.0, "mutate-job": 1950.0},
            IDLE,
            [
                "the no-op endpoint fed mutate-job's review (2000 req/s) was not clearly the fastest "
                "(mutate-job 0.97x its throughput)"
            ],
        ),
        ({**SERVER_BOUND, "noop-job": 2000.0, "mutate-job": 1500.0}, IDLE, []),
    ],
)
def test_a_generator_bound_run_is_recognised(
    max_rps: dict[str, float], generator: GeneratorLoad, reasons: list[str]
) -> None:
    assert generator_bound_reasons(max_rps, generator) == reasons


@pytest.mark.kube
def test_the_pinned_hey_is_preferred_to_one_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    impostor = tmp_path / "hey"
    impostor.write_text("#!/bin/sh\nexit 1\n")
    impostor.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert shutil.which("hey") == str(impostor)
    found = find_hey()
    assert found is not None, f"make kube builds hey: {INSTALL_HEY}"
    assert found != str(impostor)
    assert hey_origin(found).endswith("(make kube)")
    assert hey_origin(str(impostor)).startswith("PATH")


def test_without_a_pinned_build_hey_comes_from_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_KUBE_CACHE", str(tmp_path / "no-build"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_hey() is None
    assert main(["--quick", "--tool", "hey", "--out", str(tmp_path / "x.json")]) == 2
    (tmp_path / "hey").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "hey").chmod(0o755)
    assert find_hey() == str(tmp_path / "hey")
