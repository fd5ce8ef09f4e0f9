"""Quick variant of the abuse benchmark: each attack runs against a real webhook process and meets its bound.

What must hold, whatever the machine's load: the legitimate admission made in the middle of every attack was
answered (200), the webhook stayed under the chart's memory limit, and each attack was stopped by the limit
meant for it. The seconds are reported, not asserted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.abuse import ATTACKS, main


def test_quick_abuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "abuse.json"
    main(["--quick", "--out", str(out)])  # its exit status includes the 1 s target: reported, not asserted
    print(capsys.readouterr().out)
    report = json.loads(out.read_text())
    assert set(report) == set(ATTACKS)
    for name, outcome in report.items():
        assert outcome["legit_status"] == 200, (name, outcome)
        assert outcome["within_memory_limit"], (name, outcome)
        assert outcome["legit_admission_seconds"] > 0
    closed = report["idle-connections"]["detail"]["closed_by_the_server"]
    assert closed['{reason="max-connections-per-client"}'] > 0, closed
    assert report["endless-header"]["detail"]["answers"] == ["HTTP/1.1 431 Request Header Fields Too Large"]
    assert set(report["expanding-body"]["detail"]["answers"]) == {"413"}
