"""Certificate files on disk, laid out like a Kubernetes TLS Secret mount (`tls.crt`, `tls.key`, `ca.crt`).

`write_dev_certs` is idempotent: a still-valid CA is reused (never overwritten unless `force_ca`), and the
serving certificate is kept unless it is close to expiry, no longer matches the requested names, or was
not signed by the current CA. Files are replaced atomically (write + rename) so a process reloading them
never reads half a file; private keys are 0600.
"""

from __future__ import annotations

import base64
import datetime
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509

from certs.generate import (
    DEFAULT_CA_DAYS,
    DEFAULT_CA_NAME,
    DEFAULT_SERVING_DAYS,
    KeyPair,
    cert_matches_key,
    create_ca,
    create_serving_cert,
    is_signed_by,
    remaining_validity,
    san_names,
    service_dns_names,
)

log = logging.getLogger(__name__)

CA_CRT: Final = "ca.crt"
CA_KEY: Final = "ca.key"
TLS_CRT: Final = "tls.crt"
TLS_KEY: Final = "tls.key"
RENEW_FRACTION: Final = 1 / 3
"""Renew a certificate once less than this fraction of its lifetime remains (cert-manager's default)."""


class CertError(Exception):
    """Certificates cannot be produced as asked (e.g. a valid CA would have to be overwritten)."""


@dataclass(frozen=True)
class CertPaths:
    ca_crt: Path
    ca_key: Path
    tls_crt: Path
    tls_key: Path
    ca_created: bool
    """True when this call generated a new CA (clients must be given the new caBundle)."""
    serving_renewed: bool
    """True when this call wrote a new serving certificate."""


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def needs_renewal(cert_pem: bytes, now: datetime.datetime | None = None) -> bool:
    """True when less than RENEW_FRACTION of the certificate's lifetime remains."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    return remaining_validity(cert_pem, now) < lifetime * RENEW_FRACTION


def _load_pair(cert_path: Path, key_path: Path) -> KeyPair | None:
    if not cert_path.exists() or not key_path.exists():
        return None
    try:
        pair = KeyPair(cert_path.read_bytes(), key_path.read_bytes())
        if not cert_matches_key(pair.cert_pem, pair.key_pem):
            return None
    except ValueError:
        return None
    return pair


def _usable_ca(out_dir: Path, force_ca: bool) -> KeyPair | None:
    """The existing CA if it may be reused; None when a new one must be made."""
    ca_crt, ca_key = out_dir / CA_CRT, out_dir / CA_KEY
    existing = _load_pair(ca_crt, ca_key)
    if existing is None:
        if ca_crt.exists() and not force_ca:
            raise CertError(
                f"{ca_crt} exists but {ca_key} is missing or does not match it; "
                "refusing to replace the CA (pass force_ca / --force-ca to generate a new one)"
            )
        return None
    if force_ca:
        return None
    if remaining_validity(existing.cert_pem) <= datetime.timedelta(0):
        log.warning("CA in %s has expired; generating a new one", out_dir)
        return None
    if needs_renewal(existing.cert_pem):
        log.warning(
            "CA in %s is close to expiry; rerun with --force-ca and roll out the new caBundle", out_dir
        )
    return existing


def _serving_is_current(
    serving: KeyPair | None, ca: KeyPair, dns: list[str], ips: list[str], now: datetime.datetime | None
) -> bool:
    if serving is None or needs_renewal(serving.cert_pem, now):
        return False
    if not is_signed_by(serving.cert_pem, ca.cert_pem):
        return False
    have_dns, have_ips = san_names(serving.cert_pem)
    return set(have_dns) == set(dns) and set(have_ips) == set(ips)


def write_dev_certs(
    out_dir: Path,
    service: str,
    namespace: str,
    dns: list[str],
    ips: list[str],
    *,
    force_ca: bool = False,
    ca_days: int = DEFAULT_CA_DAYS,
    serving_days: int = DEFAULT_SERVING_DAYS,
    now: datetime.datetime | None = None,
) -> CertPaths:
    """Ensure `out_dir` holds a CA and a serving cert for `<service>.<namespace>.svc` plus `dns`/`ips`.

    `now` overrides the clock for the renewal decision (tests).
    """
    if not service or not namespace:
        raise CertError("service and namespace must be non-empty")
    out_dir.mkdir(parents=True, exist_ok=True)
    all_dns = list(dict.fromkeys([*service_dns_names(service, namespace), *dns]))
    all_ips = list(dict.fromkeys(ips))

    ca = _usable_ca(out_dir, force_ca)
    ca_created = ca is None
    if ca is None:
        ca = create_ca(DEFAULT_CA_NAME, ca_days)
        _write_atomic(out_dir / CA_KEY, ca.key_pem, 0o600)
        _write_atomic(out_dir / CA_CRT, ca.cert_pem, 0o644)
        log.info("wrote a new CA to %s", out_dir / CA_CRT)

    paths = CertPaths(
        ca_crt=out_dir / CA_CRT,
        ca_key=out_dir / CA_KEY,
        tls_crt=out_dir / TLS_CRT,
        tls_key=out_dir / TLS_KEY,
        ca_created=ca_created,
        serving_renewed=False,
    )
    serving = _load_pair(paths.tls_crt, paths.tls_key)
    if _serving_is_current(serving, ca, all_dns, all_ips, now):
        log.info("serving certificate %s is current; kept", paths.tls_crt)
        return paths
    serving = create_serving_cert(ca, all_dns, all_ips, serving_days)
    # Key first: a reloader that sees the new cert with the old key fails and retries, never serves a mix.
    _write_atomic(paths.tls_key, serving.key_pem, 0o600)
    _write_atomic(paths.tls_crt, serving.cert_pem, 0o644)
    log.info("wrote serving certificate %s for %s %s", paths.tls_crt, all_dns, all_ips)
    return CertPaths(
        ca_crt=paths.ca_crt,
        ca_key=paths.ca_key,
        tls_crt=paths.tls_crt,
        tls_key=paths.tls_key,
        ca_created=ca_created,
        serving_renewed=True,
    )


def ca_bundle_b64(path: Path) -> str:
    """Base64 of the PEM CA file, as `clientConfig.caBundle` in a webhook configuration expects."""
    pem = Path(path).read_bytes()
    try:
        x509.load_pem_x509_certificate(pem)
    except ValueError as err:
        raise CertError(f"{path} is not a PEM certificate") from err
    return base64.b64encode(pem).decode("ascii")
