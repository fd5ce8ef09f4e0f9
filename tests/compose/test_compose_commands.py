"""Compose runs each component with the command line `make run` uses (devstack.commands is the one source).

The only differences are the values devstack chooses at run time (free ports, a temporary work directory,
the kubeconfig of each component's ServiceAccount), fixed here: compose's components all read the one
kubeconfig the user mounts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devstack.__main__ import build_parser, options_from
from devstack.commands import certs_command, resizer_command, webhook_command
from devstack.stack import StackOptions
from devstack.webhooks import chart_values, render_chart, resizer_exempt_namespaces
from tests.compose.compose_model import argv, resolved

PYTHON = "python"
CERT_DIR = Path("/var/lib/exclusive-placement/certs")
KUBECONFIG = Path("/var/lib/exclusive-placement/kubeconfig")
WEBHOOK_PORT = 9443
RESIZER_METRICS_PORT = 8080


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    model: dict[str, Any] = resolved()["services"]
    return model


@pytest.fixture(scope="module")
def make_run() -> StackOptions:
    """The options `make run` (`python -m devstack run`) starts the stack with."""
    return options_from(build_parser().parse_args(["run"]))


def test_certs_command_matches_devstack(services: dict[str, Any]) -> None:
    assert argv(services["certs"]) == certs_command(CERT_DIR, python=PYTHON)


def test_webhook_command_matches_make_run(services: dict[str, Any], make_run: StackOptions) -> None:
    expected = webhook_command(
        port=WEBHOOK_PORT,
        cert_dir=CERT_DIR,
        server=None,
        kubeconfig=KUBECONFIG,
        default_strategy=make_run.default_strategy,
        python=PYTHON,
    )
    assert argv(services["webhook"]) == expected


def test_resizer_command_matches_make_run_but_for_the_election(
    services: dict[str, Any], make_run: StackOptions
) -> None:
    """`make run`'s resizers always elect, in the release namespace devstack creates; compose creates no
    namespace in the user's cluster (`docker compose up resizer` runs without the rest), so its one resizer
    acts alone. It leaves alone the namespaces the chart's webhooks (which compose registers) are exempt
    from."""
    chart = render_chart(chart_values("Q0E=", make_run.default_strategy))
    expected = resizer_command(
        server=None,
        kubeconfig=KUBECONFIG,
        metrics_port=RESIZER_METRICS_PORT,
        leader_elect=False,
        exempt_namespaces=resizer_exempt_namespaces(chart),
        python=PYTHON,
    )
    assert argv(services["resizer"]) == expected


def test_registration_points_the_chart_at_the_compose_webhook(
    services: dict[str, Any], make_run: StackOptions
) -> None:
    assert argv(services["register-webhooks"]) == [
        PYTHON,
        "images/register_webhooks.py",
        "--kubeconfig",
        str(KUBECONFIG),
        "--webhook-url",
        f"https://127.0.0.1:{WEBHOOK_PORT}",
        "--ca-file",
        str(CERT_DIR / "ca.crt"),
        "--default-strategy",
        make_run.default_strategy,
    ]


@pytest.mark.parametrize(
    ("service", "port"),
    [("webhook", WEBHOOK_PORT), ("resizer", RESIZER_METRICS_PORT)],
)
def test_healthchecks_probe_the_port_the_command_opens(
    services: dict[str, Any], service: str, port: int
) -> None:
    assert str(port) in argv(services[service])
    assert f"127.0.0.1:{port}/" in " ".join(services[service]["healthcheck"]["test"])
