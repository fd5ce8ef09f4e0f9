"""The settings convention of both binaries: one pydantic model per binary, three sources.

defaults < `EXCLUSIVE_PLACEMENT_<NAME>` environment variables < `--<name>` flags. The flags, their help
and `--help` itself are generated from the model, so a setting cannot exist in one place and not the
other. Durations are numbers of seconds named `*_seconds`. A renamed setting is listed in the model's
`RENAMED`: its old flag or environment variable is refused with a message naming the new one.

`ProcessSettings` holds what every process that talks to the API server needs: cluster access, API
timeouts and logging. `load(Model, argv)` parses and validates; every problem surfaces as one
`SettingsError` whose lines name the flag.
"""

from __future__ import annotations

import argparse
import os
import typing
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from kubekit.logs import LogFormat, LogLevel

ENV_PREFIX = "EXCLUSIVE_PLACEMENT_"
S = TypeVar("S", bound="ProcessSettings")


class SettingsError(ValueError):
    """Unusable configuration: one line per problem, each naming its flag."""


def flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


def env_of(name: str) -> str:
    return ENV_PREFIX + name.upper()


class ProcessSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    CLI_PROG: ClassVar[str] = ""
    CLI_DESCRIPTION: ClassVar[str] = ""
    RENAMED: ClassVar[dict[str, str]] = {}
    """Old setting name → new one."""

    # --- cluster access
    kubeconfig: Path | None = Field(
        default=None,
        description="kubeconfig file (default: $KUBECONFIG, else the in-cluster service account, else "
        "~/.kube/config)",
    )
    server: str | None = Field(
        default=None,
        description="plain-HTTP API server URL used without credentials (a local test API server), e.g. http://127.0.0.1:6443",
    )
    request_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="client-side read timeout of every API call, so a dead connection cannot hang",
    )
    watch_timeout_seconds: int = Field(
        default=300,
        gt=0,
        description="server-side length of each watch; it then resumes from its last resourceVersion",
    )

    # --- logs
    log_format: LogFormat = Field(default="text", description="log line format")
    log_level: LogLevel = Field(default="INFO", description="lowest level logged")

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_case_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_cluster_source(self) -> ProcessSettings:
        if self.kubeconfig is not None and self.server is not None:
            raise ValueError("give either --kubeconfig or --server, not both")
        return self


def _choices(annotation: Any) -> list[str] | None:
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return [str(member.value) for member in annotation]
    if typing.get_origin(annotation) is typing.Literal:
        return [str(arg) for arg in typing.get_args(annotation)]
    return None


def _help(name: str, field: FieldInfo) -> str:
    text = field.description or name.replace("_", " ")
    if field.default_factory is not None:
        return f"{text} (default: generated per process)"
    default = field.get_default(call_default_factory=False)
    if default is None or default is False or default == ():
        return text
    shown = default.value if isinstance(default, Enum) else default
    return f"{text} (default: {shown})"


class _Renamed(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        parser.error(f"{self.option_strings[0]} was renamed {self.metavar}")


def build_parser(model: type[ProcessSettings]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=model.CLI_PROG,
        description=f"{model.CLI_DESCRIPTION} Every flag can also be set as an environment variable "
        f"{ENV_PREFIX}<FLAG> (e.g. {env_of('log_format')}=json); flags win.",
        argument_default=argparse.SUPPRESS,
    )
    for name, field in model.model_fields.items():
        if field.annotation is bool:
            parser.add_argument(flag_of(name), action=argparse.BooleanOptionalAction, help=_help(name, field))
            continue
        options: dict[str, Any] = {"help": _help(name, field)}
        if name.endswith("_seconds"):
            options["metavar"] = "SECONDS"
        choices = _choices(field.annotation)
        if choices is not None:
            options["choices"] = choices
            if all(choice.isupper() for choice in choices):
                options["type"] = str.upper  # levels: `--log-level debug` means DEBUG
        parser.add_argument(flag_of(name), **options)
    for old, new in model.RENAMED.items():
        parser.add_argument(
            flag_of(old), nargs="?", action=_Renamed, metavar=flag_of(new), help=argparse.SUPPRESS
        )
    return parser


def _check_renamed_environment(model: type[ProcessSettings]) -> None:
    stale = [(env_of(old), env_of(new)) for old, new in model.RENAMED.items() if env_of(old) in os.environ]
    if stale:
        raise SettingsError("\n".join(f"{old} was renamed {new}" for old, new in stale))


def describe(error: ValidationError) -> str:
    """One line per problem, naming its flag: a field's own, or the one a cross-field check names first."""
    lines = []
    for problem in error.errors():
        message = str(problem["msg"]).removeprefix("Value error, ")
        where = ", ".join(flag_of(str(part)) for part in problem["loc"])
        lines.append(
            f"{where}: {message}"
            if where
            else message
            if message.startswith("--")
            else f"settings: {message}"
        )
    return "\n".join(lines)


def load(model: type[S], argv: Sequence[str] | None = None) -> S:
    """Flags (`argv`) over environment over defaults.

    Raises SystemExit for `--help` and unknown flags (argparse), SettingsError for anything invalid."""
    _check_renamed_environment(model)
    flags = vars(build_parser(model).parse_args(list(argv) if argv is not None else []))
    try:
        return model(**flags)
    except ValidationError as err:
        raise SettingsError(describe(err)) from err
