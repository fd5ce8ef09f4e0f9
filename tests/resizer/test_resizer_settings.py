"""The resizer's configuration: its defaults, flags over `EXCLUSIVE_PLACEMENT_*` environment, the election
timing rule, and the CLI's exit codes (the convention itself is tested in tests/kubekit)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kubekit.settings import SettingsError
from resizer.settings import ResizerSettings, load_settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("EXCLUSIVE_PLACEMENT_"):
            monkeypatch.delenv(name)


def test_defaults_match_the_operating_contract() -> None:
    settings = load_settings([])
    assert (
        settings.lease_duration_seconds,
        settings.renew_deadline_seconds,
        settings.retry_period_seconds,
    ) == (15, 10.0, 2.0)
    assert (settings.request_timeout_seconds, settings.watch_timeout_seconds) == (10.0, 300)
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
            ["--lease-duration-seconds", "10", "--renew-deadline-seconds", "10"],
            "retry-period < renew-deadline < lease-duration",
        ),
        (
            ["--retry-base-delay-seconds", "2", "--retry-max-delay-seconds", "1"],
            "retry-max-delay-seconds must be",
        ),
        (["--concurrency", "0"], "--concurrency: Input should be greater than or equal to 1"),
        (["--metrics-port", "70000"], "--metrics-port: Input should be less than or equal to 65535"),
    ],
)
def test_bad_configuration_is_rejected_with_a_clear_message(argv: list[str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(argv)


def test_every_rename_points_at_an_existing_setting() -> None:
    assert set(ResizerSettings.RENAMED.values()) <= set(ResizerSettings.model_fields)
    assert not set(ResizerSettings.RENAMED) & set(ResizerSettings.model_fields)


def test_cli_help_and_bad_flag_exit_codes() -> None:
    helped = subprocess.run(
        [sys.executable, "-m", "resizer", "--help"], check=False, capture_output=True, text=True, timeout=60
    )
    assert helped.returncode == 0
    for flag in ("--kubeconfig", "--namespace", "--dry-run", "--no-leader-elect", "--lease-duration-seconds"):
        assert flag in helped.stdout
    invalid = subprocess.run(
        [sys.executable, "-m", "resizer", "--renew-deadline-seconds", "20"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert invalid.returncode == 2
    assert invalid.stderr.startswith("error: ")
    assert "retry-period < renew-deadline < lease-duration" in invalid.stderr
