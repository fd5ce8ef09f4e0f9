"""The resizer's configuration: its defaults, flags over `EXCLUSIVE_PLACEMENT_*` environment, the election
timing rule, and the CLI's exit codes (the convention itself is tested in tests/kubekit)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kubekit.settings import SettingsError
from resizer import settings as settings_module
from resizer.settings import ResizerSettings, load_settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Outside any pod, whatever the developer's shell (or CI's pod) says."""
    for name in list(os.environ):
        if name.startswith("EXCLUSIVE_PLACEMENT_") or name in {"POD_NAME", "POD_NAMESPACE"}:
            monkeypatch.delenv(name)
    monkeypatch.setattr(settings_module, "SERVICE_ACCOUNT_NAMESPACE", tmp_path / "serviceaccount-namespace")


def test_defaults_match_the_operating_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    settings = load_settings([])
    assert (
        settings.lease_duration_seconds,
        settings.renew_deadline_seconds,
        settings.retry_period_seconds,
    ) == (15, 10.0, 2.0)
    assert (settings.request_timeout_seconds, settings.watch_timeout_seconds) == (10.0, 300)
    assert settings.metrics_port == 8080
    assert settings.leader_elect is True
    assert settings.lease_namespace == "ops"
    assert settings.namespace is None
    assert settings.dry_run is False


def test_in_a_pod_the_lease_is_in_the_pods_own_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    settings_module.SERVICE_ACCOUNT_NAMESPACE.write_text("team-ops\n")
    assert load_settings([]).lease_namespace == "team-ops"  # the service account's namespace file
    monkeypatch.setenv("POD_NAMESPACE", "from-downward-api")
    assert load_settings([]).lease_namespace == "from-downward-api"
    assert load_settings(["--lease-namespace", "chosen"]).lease_namespace == "chosen"


def test_outside_a_pod_leader_election_needs_a_lease_namespace() -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings([])
    assert str(refused.value).startswith("--lease-namespace: not running in a pod")
    assert "--no-leader-elect" in str(refused.value)
    assert load_settings(["--no-leader-elect"]).lease_namespace is None
    assert (
        load_settings(["--lease-namespace", "exclusive-placement"]).lease_namespace == "exclusive-placement"
    )


def test_flags_override_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_METRICS_PORT", "9090")
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_NAMESPACE", "team-a")
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_LEADER_ELECT", "false")
    settings = load_settings(["--metrics-port", "9191", "--dry-run"])
    assert settings.metrics_port == 9191
    assert settings.namespace == "team-a"
    assert settings.leader_elect is False
    assert settings.dry_run is True
    assert load_settings(["--leader-elect", "--lease-namespace", "ops"]).leader_elect is True


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
        load_settings([*argv, "--lease-namespace", "ops"])


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


def test_a_metrics_port_in_use_is_one_line_naming_the_port_and_its_flag() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = subprocess.run(
            [sys.executable, "-m", "resizer", "--server", "http://127.0.0.1:9", "--no-leader-elect",
             "--metrics-host", "127.0.0.1", "--metrics-port", str(port)],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"error: --metrics-port: cannot listen on 127.0.0.1:{port} (Address already in use); choose another "
        "port with --metrics-port (EXCLUSIVE_PLACEMENT_METRICS_PORT; 0 takes any free one)"
    ]
