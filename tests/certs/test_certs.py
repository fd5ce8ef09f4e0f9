"""certs/: generation, idempotent file layout, renewal, CA protection, CLI."""

from __future__ import annotations

import base64
import datetime
import ssl
import stat
from pathlib import Path

import pytest

from certs.__main__ import main
from certs.files import CertError, ca_bundle_b64, needs_renewal, write_dev_certs
from certs.generate import (
    cert_matches_key,
    create_ca,
    create_serving_cert,
    is_signed_by,
    remaining_validity,
    san_names,
)


def test_serving_cert_is_signed_by_ca_and_carries_sans() -> None:
    ca = create_ca("test-ca", days=10)
    pair = create_serving_cert(ca, ["svc.ns.svc", "localhost"], ["127.0.0.1", "::1"], days=2)
    assert is_signed_by(pair.cert_pem, ca.cert_pem)
    assert not is_signed_by(pair.cert_pem, create_ca().cert_pem)
    assert cert_matches_key(pair.cert_pem, pair.key_pem)
    assert san_names(pair.cert_pem) == (["svc.ns.svc", "localhost"], ["127.0.0.1", "::1"])
    assert datetime.timedelta(days=1) < remaining_validity(pair.cert_pem) <= datetime.timedelta(days=2)


def test_serving_cert_never_outlives_its_ca() -> None:
    ca = create_ca(days=1)
    pair = create_serving_cert(ca, ["x"], [], days=365)
    assert pair.certificate.not_valid_after_utc <= ca.certificate.not_valid_after_utc


@pytest.mark.parametrize(
    ("dns", "ips", "days", "message"),
    [
        ([], [], 1, "at least one DNS name or IP"),
        (["x"], ["not-an-ip"], 1, "not an IP address"),
        (["x"], [], 0, "at least 1 day"),
    ],
)
def test_serving_cert_rejects_bad_input(dns: list[str], ips: list[str], days: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        create_serving_cert(create_ca(), dns, ips, days=days)


def test_write_dev_certs_layout_modes_and_tls_handshake_material(tmp_path: Path) -> None:
    paths = write_dev_certs(tmp_path, "webhook", "ns", ["localhost"], ["127.0.0.1"])
    assert (paths.ca_crt.name, paths.tls_crt.name, paths.tls_key.name) == ("ca.crt", "tls.crt", "tls.key")
    assert stat.S_IMODE(paths.tls_key.stat().st_mode) == 0o600
    assert stat.S_IMODE(paths.ca_key.stat().st_mode) == 0o600
    dns, ips = san_names(paths.tls_crt.read_bytes())
    assert {"webhook.ns.svc", "webhook.ns.svc.cluster.local", "localhost"} <= set(dns)
    assert ips == ["127.0.0.1"]
    # The files load into a real server context and are trusted by a client context with the CA.
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(paths.tls_crt, paths.tls_key)
    client = ssl.create_default_context(cafile=str(paths.ca_crt))
    assert client.get_ca_certs()[0]["subject"] == ((("commonName", "exclusive-placement-ca"),),)


def test_second_run_reuses_ca_and_keeps_current_serving_cert(tmp_path: Path) -> None:
    first = write_dev_certs(tmp_path, "webhook", "ns", [], ["127.0.0.1"])
    ca_before, tls_before = first.ca_crt.read_bytes(), first.tls_crt.read_bytes()
    second = write_dev_certs(tmp_path, "webhook", "ns", [], ["127.0.0.1"])
    assert (first.ca_created, first.serving_renewed) == (True, True)
    assert (second.ca_created, second.serving_renewed) == (False, False)
    assert second.ca_crt.read_bytes() == ca_before
    assert second.tls_crt.read_bytes() == tls_before


def test_changed_names_reissue_serving_cert_under_same_ca(tmp_path: Path) -> None:
    first = write_dev_certs(tmp_path, "webhook", "ns", [], [])
    ca_before = first.ca_crt.read_bytes()
    second = write_dev_certs(tmp_path, "webhook", "ns", ["extra.example"], [])
    assert second.serving_renewed
    assert not second.ca_created
    assert second.ca_crt.read_bytes() == ca_before
    assert "extra.example" in san_names(second.tls_crt.read_bytes())[0]


def test_serving_cert_close_to_expiry_is_renewed(tmp_path: Path) -> None:
    write_dev_certs(tmp_path, "webhook", "ns", [], [], serving_days=3)
    cert = (tmp_path / "tls.crt").read_bytes()
    assert not needs_renewal(cert)
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=2, hours=1)
    assert needs_renewal(cert, now=later)
    kept = write_dev_certs(tmp_path, "webhook", "ns", [], [], serving_days=3)
    assert not kept.serving_renewed
    renewed = write_dev_certs(tmp_path, "webhook", "ns", [], [], serving_days=3, now=later)
    assert renewed.serving_renewed
    assert not renewed.ca_created
    assert (tmp_path / "tls.crt").read_bytes() != cert


def test_force_ca_replaces_ca_and_reissues(tmp_path: Path) -> None:
    first = write_dev_certs(tmp_path, "webhook", "ns", [], [])
    ca_before = first.ca_crt.read_bytes()
    forced = write_dev_certs(tmp_path, "webhook", "ns", [], [], force_ca=True)
    assert forced.ca_created
    assert forced.serving_renewed
    assert forced.ca_crt.read_bytes() != ca_before
    assert is_signed_by(forced.tls_crt.read_bytes(), forced.ca_crt.read_bytes())


def test_refuses_to_replace_a_ca_whose_key_is_missing(tmp_path: Path) -> None:
    write_dev_certs(tmp_path, "webhook", "ns", [], [])
    (tmp_path / "ca.key").unlink()
    with pytest.raises(CertError, match="refusing to replace the CA"):
        write_dev_certs(tmp_path, "webhook", "ns", [], [])


def test_ca_bundle_is_base64_of_the_pem(tmp_path: Path) -> None:
    paths = write_dev_certs(tmp_path, "webhook", "ns", [], [])
    assert base64.b64decode(ca_bundle_b64(paths.ca_crt)) == paths.ca_crt.read_bytes()
    (tmp_path / "junk.crt").write_text("not a cert")
    with pytest.raises(CertError, match="not a PEM certificate"):
        ca_bundle_b64(tmp_path / "junk.crt")


def test_cli_generate_prints_paths_and_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "certs"
    argv = ["generate", "--out-dir", str(out_dir), "--service", "exclusive-placement-webhook"]
    argv += ["--namespace", "exclusive-placement", "--dns", "localhost", "--ip", "127.0.0.1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    bundle = next(line.split()[1] for line in out.splitlines() if line.startswith("caBundle:"))
    assert base64.b64decode(bundle) == (out_dir / "ca.crt").read_bytes()
    assert "(new CA)" in out
    assert main(argv) == 0
    assert "(kept)" in capsys.readouterr().out


def test_cli_reports_bad_ip_as_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["generate", "--out-dir", str(tmp_path), "--service", "s", "--namespace", "n", "--ip", "nope"]
    assert main(argv) == 2
    assert "not an IP address" in capsys.readouterr().err
