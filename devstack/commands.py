"""The one source of the commands that run the system locally.

`make run`, `make demo`, the benchmarks, the end-to-end tests and docker-compose (which must mirror these
command lines) all start the components the same way. Each builder returns an argv list; `python` is
the interpreter running devstack unless another one is given (compose passes "python"). `extra_args` go
after the builder's own flags, for the options only a test or a tuning run sets (certificate reload period,
abuse limits, lease timings, log format); the component's own flag parser validates them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

RELEASE_NAMESPACE = "exclusive-placement"
"""Namespace the Helm chart installs into; always exempt from the webhooks."""
WEBHOOK_SERVICE = "exclusive-placement-webhook"
"""Service name in the serving certificate (`<service>.<namespace>.svc`), as the chart names it."""
LOCAL_HOST = "127.0.0.1"


def _python(python: str | None) -> list[str]:
    return [python or sys.executable]


def certs_command(out_dir: Path, *, python: str | None = None) -> list[str]:
    """Dev CA + serving certificate valid for the in-cluster Service name and for 127.0.0.1/localhost."""
    return [
        *_python(python),
        "-m",
        "certs",
        "generate",
        "--out-dir",
        str(out_dir),
        "--service",
        WEBHOOK_SERVICE,
        "--namespace",
        RELEASE_NAMESPACE,
        "--dns",
        "localhost",
        "--ip",
        LOCAL_HOST,
    ]


def _connection(server: str | None, kubeconfig: Path | None) -> list[str]:
    if server is not None and kubeconfig is not None:
        raise ValueError("give a component either a server URL or a kubeconfig, not both")
    if server is not None:
        return ["--server", server]
    if kubeconfig is not None:
        return ["--kubeconfig", str(kubeconfig)]
    return []


def webhook_command(
    *,
    port: int,
    cert_dir: Path,
    server: str | None,
    kubeconfig: Path | None = None,
    default_strategy: str | None = None,
    jobset_takeover: bool = True,
    python: str | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The admission webhook over TLS; ready when `GET https://127.0.0.1:PORT/readyz` answers 200.
    It reaches the API server through `kubeconfig`, or at `server`: a plain-HTTP URL with no credentials
    (the in-memory fake API server of the unit tests).
    `default_strategy=None` leaves the webhook's own default; `jobset_takeover=False` adds
    `--no-jobset-takeover` (JobSet's webhooks then act on the pods too)."""
    argv = [
        *_python(python),
        "-m",
        "webhook",
        "--host",
        LOCAL_HOST,
        "--port",
        str(port),
        "--cert-dir",
        str(cert_dir),
        *_connection(server, kubeconfig),
    ]
    if default_strategy is not None:
        argv += ["--default-strategy", default_strategy]
    if not jobset_takeover:
        argv.append("--no-jobset-takeover")
    return [*argv, *extra_args]


def resizer_command(
    *,
    server: str | None,
    metrics_port: int,
    leader_elect: bool,
    kubeconfig: Path | None = None,
    lease_namespace: str = RELEASE_NAMESPACE,
    exempt_namespaces: Sequence[str] = (),
    python: str | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The resizer; ready when `GET http://127.0.0.1:METRICS_PORT/readyz` answers 200. It never acts in
    `exempt_namespaces` (those the chart's webhooks are exempt from, as the chart tells its resizer).

    It reaches the API server through `kubeconfig` or at a plain `server` URL; with neither, the resizer
    uses its own default (`$KUBECONFIG`, in-cluster, `~/.kube/config`). With `leader_elect` the replicas
    elect a leader through a Lease in `lease_namespace` (which must exist), as the chart's do: devstack's
    stacks always elect, so another resizer pointed at them waits as a standby; without, the process acts
    alone (the compose file, the benchmarks' lone resizer)."""
    argv = [*_python(python), "-m", "resizer", *_connection(server, kubeconfig)]
    argv += [
        "--metrics-host",
        LOCAL_HOST,
        "--metrics-port",
        str(metrics_port),
    ]
    if leader_elect:
        argv += ["--leader-elect", "--lease-namespace", lease_namespace]
    else:
        argv.append("--no-leader-elect")
    if exempt_namespaces:
        argv += ["--exempt-namespaces", ",".join(exempt_namespaces)]
    return [*argv, *extra_args]
