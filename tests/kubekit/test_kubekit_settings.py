"""The settings convention both binaries follow: generated flags, environment below flags, renamed settings
refused with the new name, every problem naming its flag; and the one log format."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import ClassVar

import pytest
from pydantic import Field

from kubekit.logs import JsonFormatter, TextFormatter
from kubekit.settings import ProcessSettings, SettingsError, build_parser, load
from placement.constants import Strategy


class Example(ProcessSettings):
    CLI_PROG: ClassVar[str] = "example"
    CLI_DESCRIPTION: ClassVar[str] = "An example."
    RENAMED: ClassVar[dict[str, str]] = {"grace": "grace_seconds"}

    grace_seconds: float = Field(default=1.5, gt=0, description="how long to wait")
    strategy: Strategy = Field(default=Strategy.ELASTIC, description="which strategy")
    verbose: bool = Field(default=False, description="say more")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("EXCLUSIVE_PLACEMENT_"):
            monkeypatch.delenv(name)


def test_help_is_generated_from_the_model() -> None:
    text = build_parser(Example).format_help()
    for expected in (
        "--grace-seconds SECONDS",
        "how long to wait (default: 1.5)",
        "{elastic,gate,scheduling-gate,affinity}",
        "--verbose, --no-verbose",
        "--kubeconfig",
        "--request-timeout-seconds SECONDS",
        "EXCLUSIVE_PLACEMENT_<FLAG>",
    ):
        assert expected in text
    assert "--grace " not in text  # a renamed flag is not advertised


def test_flags_over_environment_over_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load(Example, []).grace_seconds == 1.5
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_GRACE_SECONDS", "3")
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_STRATEGY", "gate")
    from_env = load(Example, [])
    assert (from_env.grace_seconds, from_env.strategy) == (3.0, Strategy.GATE)
    flagged = load(
        Example, ["--grace-seconds", "4", "--strategy", "affinity", "--verbose", "--log-level", "debug"]
    )
    assert (flagged.grace_seconds, flagged.strategy, flagged.verbose, flagged.log_level) == (
        4.0,
        Strategy.AFFINITY,
        True,
        "DEBUG",
    )


def test_renamed_settings_are_refused_naming_the_new_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        load(Example, ["--grace", "2"])
    assert "--grace was renamed --grace-seconds" in capsys.readouterr().err
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_GRACE", "2")
    with pytest.raises(
        SettingsError, match="EXCLUSIVE_PLACEMENT_GRACE was renamed EXCLUSIVE_PLACEMENT_GRACE_SECONDS"
    ):
        load(Example, [])


def test_every_problem_names_its_flag() -> None:
    with pytest.raises(SettingsError) as raised:
        load(Example, ["--grace-seconds", "0", "--request-timeout-seconds", "-1"])
    lines = str(raised.value).splitlines()
    assert lines[0].startswith("--request-timeout-seconds: ")
    assert lines[1] == "--grace-seconds: Input should be greater than 0"
    with pytest.raises(SettingsError, match="either --kubeconfig or --server"):
        load(Example, ["--kubeconfig", "k", "--server", "http://127.0.0.1:1"])


def record(**context: object) -> logging.LogRecord:
    entry = logging.LogRecord("resizer.controller", logging.INFO, __file__, 1, "resized to %s", (8,), None)
    entry.created = 0.25
    entry.msecs = 250.0
    for name, value in context.items():
        setattr(entry, name, value)
    return entry


def test_json_log_lines_are_utc_with_context() -> None:
    line = json.loads(JsonFormatter().format(record(job="team/train-0", target=8)))
    assert line == {
        "time": "1970-01-01T00:00:00.250Z",
        "level": "INFO",
        "logger": "resizer.controller",
        "msg": "resized to 8",
        "job": "team/train-0",
        "target": 8,
    }


def test_json_log_lines_carry_the_exception() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        entry = logging.LogRecord("webhook.app", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = json.loads(JsonFormatter().format(entry))
    assert "RuntimeError: boom" in line["exception"]


def test_text_log_lines_append_the_context() -> None:
    assert TextFormatter().format(record(job="team/train-0")) == (
        "1970-01-01T00:00:00.250Z INFO resizer.controller: resized to 8 job=team/train-0"
    )
