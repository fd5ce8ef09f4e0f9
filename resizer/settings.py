"""The resizer's settings (the convention and the shared fields are in `kubekit.settings`)."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode

from kubekit.settings import ProcessSettings, SettingsError, load

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
"""What the kubelet mounts into every pod with a service account token: the pod's namespace."""


def pod_namespace() -> str | None:
    """The namespace of the pod this process runs in: `POD_NAMESPACE` (the chart's downward API), else the
    service account's namespace file; None outside a pod."""
    from_env = os.environ.get("POD_NAMESPACE", "").strip()
    if from_env:
        return from_env
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or None
    except OSError:
        return None


def host_name() -> str:
    """The pod's name (the chart's downward API sets POD_NAME), else the host's."""
    return os.environ.get("POD_NAME") or socket.gethostname()


def default_identity() -> str:
    """Unique per process, readable in the Lease: `<hostname>_<random>` like client-go's callers use."""
    return f"{host_name()}_{uuid.uuid4().hex[:8]}"


class ResizerSettings(ProcessSettings):
    CLI_PROG: ClassVar[str] = "python -m resizer"
    CLI_DESCRIPTION: ClassVar[str] = (
        "Restore each elastic Job to its target size the moment its leader pod binds, and release "
        "scheduling-gated followers into their leader's domain; admit all-or-nothing JobSets when there are "
        "free domains for all of their Jobs."
    )
    RENAMED: ClassVar[dict[str, str]] = {
        "request_timeout": "request_timeout_seconds",
        "watch_timeout": "watch_timeout_seconds",
        "retry_base_delay": "retry_base_delay_seconds",
        "retry_max_delay": "retry_max_delay_seconds",
        "lease_duration": "lease_duration_seconds",
        "renew_deadline": "renew_deadline_seconds",
        "retry_period": "retry_period_seconds",
    }

    namespace: str | None = Field(
        default=None,
        description="act only in this namespace: its Jobs and pods (default: all namespaces). Nodes and the "
        "pods that hold domains are still read in every namespace (the all-or-nothing queue's free domains)",
    )
    exempt_namespaces: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="comma-separated namespaces never acted in: those the webhooks are exempt from (the "
        "chart passes its list: the release namespace, kube-system and webhook.admission.exemptNamespaces)",
    )

    # --- behaviour
    dry_run: bool = Field(default=False, description="log every decision, patch nothing")
    pin_followers_label: bool = Field(
        default=True,
        description="label each resized Job exclusive-placement.io/pin-followers=true (with its leader's "
        "domain), the params of the chart's follower MutatingAdmissionPolicy on the policy path of pod "
        "admission; finished Jobs lose the label either way. The chart turns it off on the webhook path, "
        "where no policy reads it",
    )
    concurrency: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Jobs reconciled in parallel, by the resize and by the follower controller each",
    )
    retry_base_delay_seconds: float = Field(
        default=0.05, gt=0, description="first per-Job retry delay (doubles per failure)"
    )
    retry_max_delay_seconds: float = Field(default=30.0, gt=0, description="cap of the per-Job retry delay")

    all_or_nothing_timeout_seconds: float = Field(
        default=300.0,
        gt=0,
        description="an all-or-nothing JobSet whose released leaders have not all bound within this gets its "
        "Jobs with a released leader suspended (its domains freed, no failure counted; JobSet resumes them "
        "and it queues again); a queued JobSet that does not fit holds up the ones behind it this long at "
        "most, then is stepped over",
    )

    # --- HA (coordination.k8s.io/v1 Lease)
    leader_elect: bool = Field(default=True, description="elect one active replica through a Lease")
    lease_name: str = Field(default="exclusive-placement-resizer", min_length=1, description="Lease name")
    lease_namespace: str | None = Field(
        default=None,
        min_length=1,
        validate_default=True,
        description="namespace of the Lease (default: the pod's own, from POD_NAMESPACE or the service "
        "account's namespace file; outside a pod it must be given)",
    )
    lease_duration_seconds: int = Field(
        default=15, ge=1, description="how long a Lease is valid without renewal"
    )
    renew_deadline_seconds: float = Field(
        default=10.0, gt=0, description="the holder stops acting if it has not renewed within this"
    )
    retry_period_seconds: float = Field(
        default=2.0, gt=0, description="interval between acquire/renew attempts"
    )
    identity: str = Field(default_factory=default_identity, description="holder identity in the Lease")

    # --- observability
    metrics_host: str = Field(default="0.0.0.0", description="bind address of /livez, /readyz, /metrics")
    metrics_port: int = Field(
        default=8080, ge=0, le=65535, description="port of /livez, /readyz, /metrics (0: any free port)"
    )

    @field_validator("exempt_namespaces", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    @property
    def election_namespace(self) -> str:
        """The Lease's namespace; only asked for with leader election on, which needs one (`_consistent`)."""
        if self.lease_namespace is None:
            raise SettingsError("--lease-namespace: leader election needs the namespace of its Lease")
        return self.lease_namespace

    @field_validator("lease_namespace")
    @classmethod
    def _own_namespace_by_default(cls, value: str | None) -> str | None:
        return value if value is not None else pod_namespace()

    @model_validator(mode="after")
    def _consistent(self) -> ResizerSettings:
        if self.leader_elect and not (
            0 < self.retry_period_seconds < self.renew_deadline_seconds < self.lease_duration_seconds
        ):
            raise ValueError(
                "leader election needs retry-period < renew-deadline < lease-duration, got "
                f"{self.retry_period_seconds} / {self.renew_deadline_seconds} / {self.lease_duration_seconds}"
            )
        if self.leader_elect and self.lease_namespace is None:
            raise ValueError(
                "--lease-namespace: not running in a pod (no POD_NAMESPACE, no service account namespace "
                "file), so there is no namespace of its own to hold the Lease: give the one the other "
                "replicas use (the chart's release namespace, e.g. --lease-namespace exclusive-placement), "
                "or run alone with --no-leader-elect"
            )
        if self.retry_max_delay_seconds < self.retry_base_delay_seconds:
            raise ValueError("--retry-max-delay-seconds must be >= --retry-base-delay-seconds")
        return self


def load_settings(argv: Sequence[str] | None = None) -> ResizerSettings:
    """Flags over `EXCLUSIVE_PLACEMENT_*` environment over defaults; raises `SettingsError`."""
    return load(ResizerSettings, argv)
