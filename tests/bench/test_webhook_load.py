"""Quick variant of the webhook load benchmark: it runs end to end and its accounting holds.

Timings are reported, never asserted; what must hold is that every request succeeded, that follower
lookups were all served from the cache (zero API calls, zero cache misses) and that the report is complete.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.webhook_load import ENDPOINTS, main


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
    report = json.loads(out.read_text())
    assert set(report["endpoints"]) == set(ENDPOINTS)
    for name in ENDPOINTS:
        result = report["endpoints"][name]
        assert result["max_throughput"]["requests"] > 0
        assert result["max_throughput"]["errors"] == 0
        assert result["at_50_rps"]["requests"] > 0
        assert result["at_50_rps"]["errors"] == 0
        assert result["max_throughput"]["p50_ms"] > 0
    assert report["endpoints"]["noop"]["ratio_to_noop"] == 1.0
    assert report["api_calls_during_load"] == 0
    assert report["webhook_cache"]["misses"] == 0
    assert report["webhook_cache"]["hits"] >= report["follower_lookups"]
    assert report["met"]["zero_api_calls"] is True
    assert "mutate-follower" in capsys.readouterr().out


def test_bad_arguments_are_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--duration", "0", "--tool", "httpx"]) == 2
    assert "must be > 0" in capsys.readouterr().err
