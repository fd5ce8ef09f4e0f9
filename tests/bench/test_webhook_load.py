"""Quick variant of the webhook load benchmark: it runs end to end and its accounting holds.

Timings are reported, never asserted; what must hold is that every request succeeded, that follower
lookups were all served from the cache (zero API calls, zero cache misses) and that the report is complete.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.webhook_load import ENDPOINTS, NOOP_MARGIN, GeneratorLoad, generator_bound_reasons, main


@pytest.mark.parametrize(
    "tool",
    [
        "httpx",
        pytest.param(
            "hey", marks=pytest.mark.skipif(shutil.which("hey") is None, reason="hey not installed")
        ),
    ],
)
def test_quick_webhook_load(tmp_path: Path, tool: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "webhook.json"
    assert main(["--quick", "--tool", tool, "--out", str(out)]) == 0
    printed = capsys.readouterr()
    report = json.loads(out.read_text())
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
    if report["generator_bound"]:
        assert set(ratios.values()) == {None}
        assert {report["met"][n]["ratio"] for n in ENDPOINTS if n != "noop"} == {None}
        assert "NO RATIO: the load generator" in printed.err
    else:
        assert ratios["noop"] == 1.0
        assert all(ratio < NOOP_MARGIN for name, ratio in ratios.items() if name != "noop")
    assert report["generator"]["cpu_share"] > 0
    assert report["api_calls_during_load"] == 0
    assert report["webhook_cache"]["misses"] == 0
    assert report["webhook_cache"]["hits"] >= report["follower_lookups"]
    assert report["met"]["zero_api_calls"] is True
    assert "mutate-follower" in printed.out


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
    ],
)
def test_a_generator_bound_run_is_recognised(
    max_rps: dict[str, float], generator: GeneratorLoad, reasons: list[str]
) -> None:
    assert generator_bound_reasons(max_rps, generator) == reasons
