"""`python -m bench compare`: the figures of a kubesim run that differ from the real control plane's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.compare import differences, differs, main


def report(control_plane: str, time_scale: float, **results: dict[str, Any]) -> dict[str, Any]:
    scenario = {"name": "4x8", "time_scale": time_scale, "results": results, "elastic_vs_jobset": {}}
    return {"control_plane": control_plane, "scenarios": [scenario]}


KUBESIM = report(
    "kubesim",
    0.1,
    jobset={"api_requests": 389, "pod_creates_rejected": 8, "seconds_to_all_running": 0.4},
    elastic={"api_requests": 387, "pod_creates_rejected": 0, "seconds_to_all_running": 0.6},
    gate={"error": "timeout"},
)
KUBE = report(
    "kube",
    1.0,
    jobset={"api_requests": 221, "pod_creates_rejected": 8, "seconds_to_all_running": 4.2},
    elastic={"api_requests": 380, "pod_creates_rejected": 2, "seconds_to_all_running": 6.1},
    gate={"api_requests": 202},
)


@pytest.mark.parametrize(
    ("kubesim", "kube", "listed"),
    [
        (100, 111, True),
        (100, 110, False),
        (100, 89, True),
        (0, 0, False),
        (0, 1, True),
        (None, None, False),
        (None, 3, True),
    ],
)
def test_a_figure_differs_beyond_the_threshold_or_when_only_one_side_has_it(
    kubesim: float | None, kube: float | None, listed: bool
) -> None:
    assert differs(kubesim, kube, 0.1) is listed


def test_counts_compare_as_they_are_and_seconds_in_the_scenarios_time() -> None:
    found = {(d.contender, d.figure): d for d in differences(KUBESIM, KUBE)}
    assert set(found) == {("jobset", "api_requests"), ("elastic", "pod_creates_rejected")}
    assert found["jobset", "api_requests"].change == "-43%"
    assert found["elastic", "pod_creates_rejected"].change == "from 0"  # 4 s vs 4.2 s, 6 s vs 6.1 s: equal


def test_the_command_prints_a_table_and_refuses_swapped_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubesim, kube = tmp_path / "kubesim.json", tmp_path / "kube.json"
    kubesim.write_text(json.dumps(KUBESIM))
    kube.write_text(json.dumps(KUBE))
    assert main([str(kubesim), str(kube)]) == 0
    assert "| 4x8 | `jobset` | api_requests | 389 | 221 | -43% |" in capsys.readouterr().out
    assert main([str(kube), str(kubesim)]) == 2
    assert "a kube run, expected kubesim" in capsys.readouterr().err
    assert main([str(kubesim), str(tmp_path / "missing.json")]) == 2
    assert "not a readable strategies.json" in capsys.readouterr().err
