"""Configuration: flags over `EXCLUSIVE_PLACEMENT_*` environment, validation with clear errors, --help."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from pydantic import ValidationError

from resizer.logs import JsonFormatter, TextFormatter
from resizer.settings import load_settings


def test_defaults_match_the_operating_contract() -> None:
    settings = load_settings([])
    assert (settings.lease_duration, settings.renew_deadline, settings.retry_period) == (15, 10.0, 2.0)
    assert settings.metrics_port == 8080
    assert settings.leader_elect is True
    assert settings.namespace is None
    assert settings.dry_run is False


def test_flags_override_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_METRICS_PORT", "9090")
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_NAMESPACE", "team-a")
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_LEADER_ELECT", "false")
    settings = load_settings(["--metrics-port", "9191", "--dry-run"])
    assert settings.metrics_port == 9191
    assert settings.namespace == "team-a"
    assert settings.leader_elect is False
    assert settings.dry_run is True
    assert load_settings(["--leader-elect"]).leader_elect is True


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--lease-duration", "10", "--renew-deadline", "10"],
            "retry-period < renew-deadline < lease-duration",
        ),
        (["--kubeconfig", "/x", "--server", "http://127.0.0.1:1"], "either --kubeconfig or --server"),
        (["--concurrency", "0"], "greater than or equal to 1"),
        (["--metrics-port", "70000"], "less than or equal to 65535"),
    ],
)
def test_bad_configuration_is_rejected_with_a_clear_message(argv: list[str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        load_settings(argv)


def test_cli_help_and_bad_flag_exit_codes() -> None:
    helped = subprocess.run(
        [sys.executable, "-m", "resizer", "--help"], check=False, capture_output=True, text=True, timeout=60
    )
    assert helped.returncode == 0
    for flag in (
        "--kubeconfig",
        "--server",
        "--namespace",
        "--dry-run",
        "--no-leader-elect",
        "--lease-name",
        "--lease-namespace",
        "--metrics-port",
        "--concurrency",
        "--log-format",
    ):
        assert flag in helped.stdout
    invalid = subprocess.run(
        [sys.executable, "-m", "resizer", "--renew-deadline", "20"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert invalid.returncode == 2
    assert "invalid resizer configuration" in invalid.stderr


def _record(**context: object) -> logging.LogRecord:
    record = logging.LogRecord("resizer.controller", logging.INFO, __file__, 1, "resized to %s", (8,), None)
    for name, value in context.items():
        setattr(record, name, value)
    return record


def test_log_lines_carry_the_job_key() -> None:
    line = json.loads(JsonFormatter().format(_record(job="team/train-0", target=8)))
    assert line["message"] == "resized to 8"
    assert line["job"] == "team/train-0"
    assert line["target"] == 8
    assert line["level"] == "INFO"
    assert TextFormatter().format(_record(job="team/train-0")).endswith("resized to 8 job=team/train-0")
