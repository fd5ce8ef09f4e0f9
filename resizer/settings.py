"""One settings object for the resizer: flags override `EXCLUSIVE_PLACEMENT_*` environment variables."""

from __future__ import annotations

import argparse
import os
import socket
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "EXCLUSIVE_PLACEMENT_"


def default_identity() -> str:
    """Unique per process, readable in the Lease: `<hostname>_<random>` like client-go's callers use."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class ResizerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    # --- cluster access
    kubeconfig: Path | None = Field(
        None, description="kubeconfig file (default: in-cluster, then ~/.kube/config)"
    )
    server: str | None = Field(None, description="API server URL without credentials, e.g. kubesim's")
    namespace: str | None = Field(None, description="only watch this namespace (default: all namespaces)")
    request_timeout: float = Field(30.0, gt=0, description="client-side read timeout of every API call, s")
    watch_timeout: int = Field(300, gt=0, description="server-side timeout of each watch request, s")

    # --- behaviour
    dry_run: bool = Field(False, description="log every decision, patch nothing")
    concurrency: int = Field(4, ge=1, le=64, description="Jobs reconciled in parallel")
    retry_base_delay: float = Field(
        0.05, gt=0, description="first per-Job retry delay, s (doubles per failure)"
    )
    retry_max_delay: float = Field(30.0, gt=0, description="cap of the per-Job retry delay, s")

    # --- HA (coordination.k8s.io/v1 Lease)
    leader_elect: bool = Field(True, description="elect one active replica through a Lease")
    lease_name: str = Field("exclusive-placement-resizer", min_length=1)
    lease_namespace: str = Field("default", min_length=1, description="namespace of the Lease")
    lease_duration: int = Field(15, ge=1, description="how long a Lease is valid without renewal, s")
    renew_deadline: float = Field(10.0, gt=0, description="the holder stops acting if not renewed within, s")
    retry_period: float = Field(2.0, gt=0, description="interval between acquire/renew attempts, s")
    identity: str = Field(default_factory=default_identity, description="holder identity in the Lease")

    # --- observability
    metrics_host: str = Field("0.0.0.0", description="bind address of /livez, /readyz, /metrics")
    metrics_port: int = Field(8080, ge=0, le=65535, description="port of /livez, /readyz, /metrics (0: any)")
    log_format: Literal["text", "json"] = "text"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @model_validator(mode="after")
    def _consistent(self) -> ResizerSettings:
        if self.leader_elect and not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "leader election needs retry-period < renew-deadline < lease-duration, got "
                f"{self.retry_period} / {self.renew_deadline} / {self.lease_duration}"
            )
        if self.retry_max_delay < self.retry_base_delay:
            raise ValueError("retry-max-delay must be >= retry-base-delay")
        if self.kubeconfig is not None and self.server is not None:
            raise ValueError("give either --kubeconfig or --server, not both")
        return self


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m resizer",
        description=(
            "Restore each elastic Job to its target size the moment its leader pod binds, and release "
            "scheduling-gated followers into their leader's domain. Every flag can also be set as an "
            f"environment variable {ENV_PREFIX}<FLAG> (e.g. {ENV_PREFIX}METRICS_PORT=9090); flags win."
        ),
    )
    for name, field in ResizerSettings.model_fields.items():
        default = field.get_default(call_default_factory=False)
        shown = "generated per process" if field.default_factory else default
        help_text = field.description or name.replace("_", " ")
        if shown is not None:
            help_text += f" (default: {shown})"
        if field.annotation is bool:
            parser.add_argument(
                _flag(name), action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=help_text
            )
            continue
        choices: Any = None
        metadata_args = getattr(field.annotation, "__args__", None)
        if name in ("log_format", "log_level") and metadata_args:
            choices = list(metadata_args)
        parser.add_argument(_flag(name), default=argparse.SUPPRESS, choices=choices, help=help_text)
    return parser


def load_settings(argv: list[str] | None = None) -> ResizerSettings:
    """Environment first, then explicit flags on top; a bad value raises pydantic's ValidationError."""
    explicit = vars(build_parser().parse_args(argv))
    return ResizerSettings(**explicit)
