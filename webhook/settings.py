"""The one settings object: defaults < EXCLUSIVE_PLACEMENT_* environment < command-line flags."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from placement.constants import DEFAULT_STRATEGY, STRATEGIES
from webhook.limits import DEFAULT_BODY_TIMEOUT_SECONDS, DEFAULT_MAX_INFLIGHT
from webhook.protocol import DEFAULT_HEADER_TIMEOUT_SECONDS

ENV_PREFIX = "EXCLUSIVE_PLACEMENT_"
MAX_BODY_BYTES = 7 * 1024 * 1024
"""The API server's own request limit for admission reviews; larger bodies get 413."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    # --- serving -------------------------------------------------------------------------------------
    host: str = Field(default="0.0.0.0", description="address to listen on")
    port: int = Field(default=9443, ge=0, le=65535, description="TLS port for admission, health and metrics")
    cert_dir: Path | None = Field(
        default=None, description="directory with tls.crt and tls.key (a mounted kubernetes.io/tls Secret)"
    )
    insecure_dev: bool = Field(
        default=False, description="serve plain HTTP (development only, never in a cluster)"
    )
    cert_reload_seconds: float = Field(
        default=5.0, gt=0, description="how often (s) the cert files are checked for changes and reloaded"
    )

    max_inflight_admissions: int = Field(
        default=DEFAULT_MAX_INFLIGHT,
        ge=1,
        description="admissions in progress beyond which new ones get 429 (health checks never do)",
    )
    body_timeout_seconds: float = Field(
        default=DEFAULT_BODY_TIMEOUT_SECONDS, gt=0, description="a request body slower than this (s) gets 408"
    )
    header_timeout_seconds: float = Field(
        default=DEFAULT_HEADER_TIMEOUT_SECONDS,
        gt=0,
        description="a connection that sends no complete request headers within this (s) is closed (408)",
    )

    # --- cluster access --------------------------------------------------------------------------------
    kubeconfig: Path | None = Field(default=None, description="kubeconfig file (default: in-cluster config)")
    server: str | None = Field(
        default=None, description="API server URL without auth, e.g. kubesim's http://..."
    )
    request_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="client-side timeout (s) of list/get calls, so a dead connection can't hang",
    )
    live_lookup_timeout_seconds: float = Field(
        default=2.0,
        gt=0,
        description="timeout (s) of each live API call after a cache miss (at most 2 per admission): "
        "keep 2x this under the webhook configuration's timeoutSeconds",
    )
    watch_timeout_seconds: int = Field(
        default=300,
        gt=0,
        description="server-side watch duration (s); the watch restarts from its resourceVersion",
    )

    # --- behaviour ---------------------------------------------------------------------------------------
    default_strategy: str = Field(
        default=DEFAULT_STRATEGY, description=f"strategy when a Job names none: {STRATEGIES}"
    )
    log_format: Literal["text", "json"] = Field(default="text", description="log line format")
    log_level: str = Field(default="INFO", description="Python logging level")

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.default_strategy not in STRATEGIES:
            raise ValueError(f"default_strategy must be one of {', '.join(STRATEGIES)}")
        if self.cert_dir is None and not self.insecure_dev:
            raise ValueError("cert_dir is required (TLS always); --insecure-dev serves plain HTTP for dev")
        if self.kubeconfig is not None and self.server is not None:
            raise ValueError("give either kubeconfig or server, not both")
        return self


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m webhook",
        description="Exclusive-placement admission webhook (mutate/validate Pods, mutate Jobs). Every flag "
        f"can also be set as {ENV_PREFIX}<FLAG_NAME_IN_CAPS_WITH_UNDERSCORES>.",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("--host", help="listen address (default 0.0.0.0)")
    parser.add_argument("--port", type=int, help="TLS port (default 9443; 0 picks a free port)")
    parser.add_argument(
        "--cert-dir", type=Path, help="directory with tls.crt and tls.key; reloaded on change"
    )
    parser.add_argument("--insecure-dev", action="store_true", help="plain HTTP, development only")
    parser.add_argument("--cert-reload-seconds", type=float, help="cert file check interval (default 5)")
    parser.add_argument(
        "--max-inflight-admissions", type=int, help="shed admissions beyond this many with 429 (default 256)"
    )
    parser.add_argument("--body-timeout-seconds", type=float, help="408 for a slower body (default 10)")
    parser.add_argument(
        "--header-timeout-seconds", type=float, help="close connections with slower headers (default 10)"
    )
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig file (default: in-cluster config)")
    parser.add_argument("--server", help="API server URL, no auth (kubesim), e.g. http://127.0.0.1:6443")
    parser.add_argument("--request-timeout-seconds", type=float, help="client-side API timeout (default 10)")
    parser.add_argument(
        "--live-lookup-timeout-seconds",
        type=float,
        help="timeout of each live API call after a cache miss (default 2)",
    )
    parser.add_argument(
        "--watch-timeout-seconds", type=int, help="watch duration before restart (default 300)"
    )
    parser.add_argument(
        "--default-strategy", choices=STRATEGIES, help="strategy for Jobs that name none (default elastic)"
    )
    parser.add_argument("--log-format", choices=("text", "json"), help="log format (default text)")
    parser.add_argument("--log-level", help="logging level (default INFO)")
    return parser


def load_settings(argv: list[str] | None = None, **overrides: Any) -> Settings:
    """Flags over environment over defaults. Raises SystemExit (argparse) or pydantic.ValidationError."""
    flags = vars(build_parser().parse_args(argv if argv is not None else []))
    return Settings(**{**flags, **overrides})
