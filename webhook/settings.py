"""The webhook's settings (the convention and the shared fields are in `kubekit.settings`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode

from kubekit.settings import ProcessSettings, load
from placement.admission import DEFAULT_JOB_CONTROLLER_USERNAMES
from placement.constants import DEFAULT_FOLLOWER_SHARDS, DEFAULT_STRATEGY, MAX_FOLLOWER_SHARDS, Strategy
from webhook.limits import DEFAULT_ADMISSION_MEMORY_MIB, DEFAULT_BODY_TIMEOUT_SECONDS, DEFAULT_MAX_INFLIGHT
from webhook.listener import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
    DEFAULT_TLS_HANDSHAKE_TIMEOUT_SECONDS,
)
from webhook.protocol import DEFAULT_HEADER_TIMEOUT_SECONDS, DEFAULT_MAX_HEADER_BYTES, FEED_BYTES

MAX_BODY_BYTES = 7 * 1024 * 1024
"""The API server's own request limit for admission reviews; larger bodies get 413."""


class WebhookSettings(ProcessSettings):
    CLI_PROG: ClassVar[str] = "python -m webhook"
    CLI_DESCRIPTION: ClassVar[str] = (
        "Exclusive-placement admission webhook: mutates and validates Pods, mutates Jobs, over TLS."
    )

    # --- serving
    host: str = Field(default="0.0.0.0", description="address to listen on")
    port: int = Field(
        default=9443,
        ge=0,
        le=65535,
        description="TLS port of admission, health and metrics (0: any free port)",
    )
    cert_dir: Path | None = Field(
        default=None,
        description="directory with tls.crt and tls.key (a mounted kubernetes.io/tls Secret); reloaded when "
        "they change",
    )
    insecure_dev: bool = Field(
        default=False, description="serve plain HTTP instead of TLS (development only, never in a cluster)"
    )
    cert_reload_seconds: float = Field(
        default=5.0, gt=0, description="how often the certificate files are checked for changes"
    )
    max_inflight_admissions: int = Field(
        default=DEFAULT_MAX_INFLIGHT,
        ge=1,
        description="admissions in progress beyond which new ones get 429 (health checks never do)",
    )
    body_timeout_seconds: float = Field(
        default=DEFAULT_BODY_TIMEOUT_SECONDS, gt=0, description="a request body slower than this gets 408"
    )
    header_timeout_seconds: float = Field(
        default=DEFAULT_HEADER_TIMEOUT_SECONDS,
        gt=0,
        description="a connection that sends no complete request headers within this is closed (408)",
    )
    max_header_bytes: int = Field(
        default=DEFAULT_MAX_HEADER_BYTES,
        ge=FEED_BYTES,
        description="request line and headers larger than this get 431 and the connection is closed",
    )
    admission_memory_mib: int = Field(
        default=DEFAULT_ADMISSION_MEMORY_MIB,
        ge=8,
        description="memory for request bodies and parsed reviews in flight: a review estimated larger gets "
        "413, one that does not fit beside the others 429",
    )
    max_connections: int = Field(
        default=DEFAULT_MAX_CONNECTIONS,
        ge=1,
        description="open client connections beyond which new ones are closed at once, before TLS",
    )
    max_connections_per_client: int = Field(
        default=DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
        ge=1,
        description="open connections from one client address beyond which its new ones are closed at once",
    )
    tls_handshake_timeout_seconds: float = Field(
        default=DEFAULT_TLS_HANDSHAKE_TIMEOUT_SECONDS,
        gt=0,
        description="a connection that does not complete its TLS handshake within this is closed",
    )
    client_ca_file: Path | None = Field(
        default=None,
        description="PEM CA bundle: the admission paths then require a client certificate it signed (the "
        "API server's, see SECURITY.md); /livez, /readyz and /metrics do not",
    )

    # --- cluster access beyond the shared settings
    live_lookup_timeout_seconds: float = Field(
        default=2.0,
        gt=0,
        description="timeout of each live API call after a cache miss (at most 2 per admission; a queued "
        "exclusive workload's Kueue queue, read on its creation, bounded as a whole by 2x this): keep 2x "
        "this under the webhook configuration's timeoutSeconds",
    )

    # --- behaviour
    default_strategy: Strategy = Field(
        default=DEFAULT_STRATEGY, description="strategy of Jobs that name none"
    )
    jobset_takeover: bool = Field(
        default=True,
        description="at Job admission, replace JobSet's exclusive-topology annotation on the pod template by "
        "this project's, so JobSet's pod webhooks and pod reconciler leave the pods to this project",
    )

    all_or_nothing: bool = Field(
        default=False,
        description="place the exclusive Jobs of a JobSet all or nothing (its leaders gated until the "
        "resizer admits the whole JobSet) unless the JobSet's exclusive-placement.io/all-or-nothing "
        "annotation says otherwise",
    )

    follower_shards: int = Field(
        default=DEFAULT_FOLLOWER_SHARDS,
        ge=1,
        le=MAX_FOLLOWER_SHARDS,
        description="shards of the chart's follower MutatingAdmissionPolicy bindings: a Job shrunk for "
        "elastic and its pod template are labelled exclusive-placement.io/pin-shard with a stable hash of "
        "its namespace and name modulo this; the chart passes webhook.admission.pods.followerShards, which "
        "renders one binding per shard",
    )

    job_controller_usernames: Annotated[tuple[str, ...], NoDecode] = Field(
        default=tuple(sorted(DEFAULT_JOB_CONTROLLER_USERNAMES)),
        description="comma-separated usernames the Job controller creates pods as: an exclusive pod that "
        "claims a Job but another user creates is denied (the Job controller would orphan it, and its "
        "job-key label would hold its domain); the chart passes "
        "webhook.admission.pods.jobControllerUsernames",
    )

    @field_validator("job_controller_usernames", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    @field_validator("job_controller_usernames")
    @classmethod
    def _some_job_controller(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("name at least one username of the Job controller")
        return value

    @model_validator(mode="after")
    def _tls_unless_dev(self) -> WebhookSettings:
        if self.cert_dir is None and not self.insecure_dev:
            raise ValueError("--cert-dir is required (TLS always); --insecure-dev serves plain HTTP for dev")
        if self.client_ca_file is not None and (self.cert_dir is None or self.insecure_dev):
            raise ValueError("--client-ca-file needs TLS (--cert-dir)")
        return self


def load_settings(argv: Sequence[str] | None = None) -> WebhookSettings:
    """Flags over `EXCLUSIVE_PLACEMENT_*` environment over defaults; raises `SettingsError`."""
    return load(WebhookSettings, argv)
