"""A real `python -m webhook` process over TLS against the fake API, with its log captured to a file."""

from __future__ import annotations

import contextlib
import copy
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from certs.files import write_dev_certs
from devstack.commands import webhook_command
from devstack.ports import free_port
from devstack.processes import ManagedProcess
from devstack.readiness import wait_http_ok
from tests.support.fake_api import FakeKubeApi

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "admission"
SECRET_MARKER = "s3cr3t-7f41c9d2-do-not-log"
"""Planted in env values, labels and annotations of admitted objects: must never reach a log line."""

# Tight limits so the tests reach them quickly; production defaults are in webhook/limits.py.
MAX_INFLIGHT = 8
BODY_TIMEOUT = 1.0
HEADER_TIMEOUT = 1.0


@dataclass
class WebhookProcess:
    process: ManagedProcess
    port: int
    cert_dir: Path
    api: FakeKubeApi

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.cert_dir / "ca.crt"

    def trust(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def client(self, **kwargs: Any) -> httpx.Client:
        options: dict[str, Any] = {"timeout": 10.0, **kwargs}
        return httpx.Client(base_url=self.base, verify=self.trust(), **options)

    def tls_socket(self) -> ssl.SSLSocket:
        """A raw TLS connection (for byte-level slow clients)."""
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return self.trust().wrap_socket(raw, server_hostname="localhost")

    def log_text(self) -> str:
        return self.process.log_path.read_text(errors="replace")


LEGIT_ADDRESS = "127.0.0.2"
"""Another loopback address (all of 127/8 is the loopback interface): a client the webhook sees apart from
an attacker on 127.0.0.1, as it would see the API server apart from a pod."""


def legit_client(webhook: WebhookProcess) -> httpx.Client:
    """A client connecting from `LEGIT_ADDRESS`."""
    transport = httpx.HTTPTransport(verify=webhook.trust(), local_address=LEGIT_ADDRESS)
    return httpx.Client(base_url=webhook.base, transport=transport, timeout=10.0)


def start_webhook(tmp_path: Path, api: FakeKubeApi, *extra: str) -> WebhookProcess:
    cert_dir = tmp_path / "certs"
    write_dev_certs(
        cert_dir, "exclusive-placement-webhook", "exclusive-placement", ["localhost"], ["127.0.0.1"]
    )
    port = free_port()
    argv = webhook_command(port=port, cert_dir=cert_dir, server=api.url, extra_args=extra)
    process = ManagedProcess("webhook", argv, tmp_path / "webhook.log")
    process.start()
    webhook = WebhookProcess(process, port, cert_dir, api)
    try:
        wait_http_ok(process, f"{webhook.base}/readyz", 60, ca_file=webhook.ca_file)
    except BaseException:
        process.stop()
        raise
    return webhook


@contextlib.contextmanager
def running_webhook(
    tmp_path_factory: pytest.TempPathFactory, name: str, *extra: str
) -> Iterator[WebhookProcess]:
    """A webhook process with `extra` flags against its own fake API server, stopped on exit."""
    with FakeKubeApi() as api:
        webhook = start_webhook(tmp_path_factory.mktemp(name), api, *extra)
        try:
            yield webhook
        finally:
            webhook.process.stop()


@pytest.fixture(scope="module")
def limited_webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    """One webhook for the module, with tight flood/slow-client limits."""
    with running_webhook(
        tmp_path_factory,
        "webhook",
        "--max-inflight-admissions",
        str(MAX_INFLIGHT),
        "--body-timeout-seconds",
        str(BODY_TIMEOUT),
        "--header-timeout-seconds",
        str(HEADER_TIMEOUT),
    ) as webhook:
        yield webhook


@pytest.fixture(scope="module")
def flooded_webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookProcess]:
    """A webhook with the tight in-flight limit only. The flood's 80 clients share one event loop in the
    test process; on a loaded machine one of them can take longer than `HEADER_TIMEOUT` between an answer
    and its next request on the kept-alive connection, which the header timeout (tight in `limited_webhook`
    for the slow-client tests) closes unanswered as idle: every later request on it then fails with
    RemoteProtocolError. That tests the header timeout, not shedding (one loaded run saw 80 such errors)."""
    with running_webhook(
        tmp_path_factory, "webhook", "--max-inflight-admissions", str(MAX_INFLIGHT)
    ) as webhook:
        yield webhook


def fixture_review(name: str) -> dict[str, Any]:
    import json

    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def with_secrets(review: dict[str, Any]) -> dict[str, Any]:
    """The review with the marker in a container env value, a label value and an annotation."""
    review = copy.deepcopy(review)
    obj = review["request"]["object"]
    meta = obj["metadata"]
    meta.setdefault("labels", {})["leak-check"] = SECRET_MARKER
    meta.setdefault("annotations", {})["leak-check/token"] = SECRET_MARKER
    spec = obj["spec"]["template"]["spec"] if obj["kind"] == "Job" else obj["spec"]
    for container in spec["containers"]:
        container.setdefault("env", []).append({"name": "API_TOKEN", "value": SECRET_MARKER})
    return review
