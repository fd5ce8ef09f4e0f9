"""ReloadingTLS on its own: load, keep-on-error, reload on change; readiness follows the certificate."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import uvicorn

from certs.files import write_dev_certs
from placement.constants import Strategy
from tests.support.metrics import sample
from tests.support.waiting import eventually
from webhook.app import create_app
from webhook.handlers import Admission
from webhook.metrics import Metrics
from webhook.testing import ServerThread
from webhook.tls import ReloadingTLS


def _reloads(metrics: Metrics, outcome: str) -> float:
    return sample(metrics.registry, "exclusive_placement_cert_reloads_total", outcome=outcome)


def test_reload_only_on_change_and_keep_previous_on_broken_files(tmp_path: Path) -> None:
    metrics = Metrics()
    tls = ReloadingTLS(tmp_path, metrics)
    assert tls.reload_if_changed() is False  # no files yet
    assert tls.loaded is False
    assert tls.context.minimum_version is ssl.TLSVersion.TLSv1_2

    write_dev_certs(tmp_path, "svc", "ns", ["localhost"], [])
    assert tls.reload_if_changed() is True
    assert tls.loaded is True
    assert tls.reload_if_changed() is False  # unchanged content: nothing to do
    assert _reloads(metrics, "ok") == 1

    good_key = (tmp_path / "tls.key").read_bytes()
    (tmp_path / "tls.key").write_bytes(b"-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n")
    assert tls.reload_if_changed() is False
    assert tls.loaded is True  # still serving the previous certificate
    assert _reloads(metrics, "error") == 1
    assert tls.reload_if_changed() is False  # the same broken files are not retried every poll
    assert _reloads(metrics, "error") == 1
    assert_serves(tls.context, tmp_path / "ca.crt")

    (tmp_path / "tls.key").write_bytes(good_key)  # back to what is loaded: nothing to do
    assert tls.reload_if_changed() is False
    write_dev_certs(tmp_path, "svc", "ns", ["localhost", "renamed.example"], [])
    assert tls.reload_if_changed() is True
    assert _reloads(metrics, "ok") == 2
    assert_serves(tls.context, tmp_path / "ca.crt")


def assert_serves(server: ssl.SSLContext, ca_file: Path) -> None:
    """A full TLS handshake in memory against the live server context."""
    client = ssl.create_default_context(cafile=str(ca_file))
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client_side = client.wrap_bio(c_in, c_out, server_hostname="localhost")
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    done = False
    for _ in range(10):
        done = True
        for side in (client_side, server_side):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                done = False
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if done:
            break
    assert done
    assert client_side.version() is not None
    assert server_side.version() is not None


class AlwaysSynced:
    def ready(self) -> bool:
        return True

    async def leader_state(self, plan: object) -> object:
        raise AssertionError("not used")


def test_not_ready_without_certificate(tmp_path: Path) -> None:
    metrics = Metrics()
    tls = ReloadingTLS(tmp_path, metrics)
    leaders = AlwaysSynced()
    admission = Admission(Strategy.ELASTIC, leaders, jobsets=None)  # type: ignore[arg-type]
    app = create_app(admission, leaders, metrics, tls_loaded=lambda: tls.loaded)  # type: ignore[arg-type]
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, lifespan="off")
    with ServerThread(config) as server, httpx.Client(base_url=f"http://127.0.0.1:{server.port}") as client:
        answer = client.get("/readyz")
        assert answer.status_code == 503
        assert answer.json() == {"ready": False, "certs": False, "caches": True, "admissions": True}
        write_dev_certs(tmp_path, "svc", "ns", [], ["127.0.0.1"])
        tls.reload_if_changed()
        eventually(lambda: client.get("/readyz").status_code == 200, "the webhook ready")
