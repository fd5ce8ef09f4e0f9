"""ReloadingTLS on its own: load, keep-on-error, reload on change; readiness follows the certificate."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import uvicorn

from certs.files import write_dev_certs
from placement.constants import Strategy
from tests.support.asgi import ServerThread
from tests.support.metrics import sample
from tests.support.waiting import eventually
from webhook.app import create_app
from webhook.handlers import Admission
from webhook.metrics import Metrics
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


class RotatedDuringLoad(ReloadingTLS):
    """The certificate lands while the new key is being loaded (a rotation writing the key first): the
    digest read before the load is of the old certificate and the new key, the pair loaded is the new one."""

    def __init__(self, cert_dir: Path, metrics: Metrics) -> None:
        super().__init__(cert_dir, metrics)
        self.landing: bytes | None = None

    def _load(self, digest: bytes) -> bool:
        if self.landing is not None:
            self.cert_file.write_bytes(self.landing)
            self.landing = None
        return super()._load(digest)


def test_a_pair_that_changes_during_its_load_is_loaded_once_it_settles_and_counted_once(
    tmp_path: Path,
) -> None:
    served, renewed = tmp_path / "served", tmp_path / "renewed"
    write_dev_certs(served, "svc", "ns", ["localhost"], [])
    write_dev_certs(renewed, "svc", "ns", ["localhost"], [])
    metrics = Metrics()
    tls = RotatedDuringLoad(served, metrics)
    assert tls.reload_if_changed() is True
    (served / "tls.key").write_bytes((renewed / "tls.key").read_bytes())
    tls.landing = (renewed / "tls.crt").read_bytes()
    assert tls.reload_if_changed() is True
    assert tls.reload_if_changed() is False  # what is loaded is what the files hold: no second load
    assert _reloads(metrics, "ok") == 2
    assert _reloads(metrics, "error") == 0
    assert_serves(tls.context, renewed / "ca.crt")


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
