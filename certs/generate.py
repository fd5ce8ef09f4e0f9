"""Pure certificate generation with `cryptography`: no files, no clock other than the one passed in."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from typing import Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_CA_NAME: Final = "exclusive-placement-ca"
DEFAULT_CA_DAYS: Final = 3650
DEFAULT_SERVING_DAYS: Final = 365
# Backdate notBefore so a peer whose clock is slightly behind still accepts a fresh certificate.
CLOCK_SKEW: Final = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM (PKCS#8, unencrypted) private key."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _check_days(days: int) -> None:
    if days < 1:
        raise ValueError(f"certificate validity must be at least 1 day, got {days}")


def create_ca(common_name: str = DEFAULT_CA_NAME, days: int = DEFAULT_CA_DAYS) -> KeyPair:
    """A self-signed CA that may only sign end-entity certificates (pathLen 0)."""
    _check_days(days)
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _parse_ips(ip_addresses: list[str]) -> list[x509.IPAddress]:
    parsed = []
    for raw in ip_addresses:
        try:
            parsed.append(x509.IPAddress(ipaddress.ip_address(raw)))
        except ValueError as err:
            raise ValueError(f"not an IP address: {raw!r}") from err
    return parsed


def create_serving_cert(
    ca: KeyPair, dns_names: list[str], ip_addresses: list[str], days: int = DEFAULT_SERVING_DAYS
) -> KeyPair:
    """A TLS server certificate signed by `ca`; the first DNS name (or IP) becomes the common name."""
    if not dns_names and not ip_addresses:
        raise ValueError("a serving certificate needs at least one DNS name or IP address")
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    sans.extend(_parse_ips(ip_addresses))
    common_name = dns_names[0] if dns_names else ip_addresses[0]
    return _leaf_cert(ca, common_name, ExtendedKeyUsageOID.SERVER_AUTH, days, sans)


def create_client_cert(ca: KeyPair, common_name: str, days: int = DEFAULT_SERVING_DAYS) -> KeyPair:
    """A TLS client certificate signed by `ca` (e.g. the API server's, for a webhook run with
    `--client-ca-file`)."""
    return _leaf_cert(ca, common_name, ExtendedKeyUsageOID.CLIENT_AUTH, days)


def _leaf_cert(
    ca: KeyPair,
    common_name: str,
    usage: x509.ObjectIdentifier,
    days: int,
    sans: list[x509.GeneralName] | None = None,
) -> KeyPair:
    _check_days(days)
    ca_cert = ca.certificate
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key must be an EC private key (as create_ca makes)")
    key = _new_key()
    now = _now()
    not_after = min(now + datetime.timedelta(days=days), ca_cert.not_valid_after_utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server may use to reach a webhook Service (it dials `<svc>.<ns>.svc`)."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def remaining_validity(cert_pem: bytes, now: datetime.datetime | None = None) -> datetime.timedelta:
    """Time left before the certificate expires (negative once expired)."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    return cert.not_valid_after_utc - (now or _now())


def cert_matches_key(cert_pem: bytes, key_pem: bytes) -> bool:
    cert = x509.load_pem_x509_certificate(cert_pem)
    key = serialization.load_pem_private_key(key_pem, password=None)
    return cert.public_key() == key.public_key()


def is_signed_by(cert_pem: bytes, ca_pem: bytes) -> bool:
    cert = x509.load_pem_x509_certificate(cert_pem)
    ca_cert = x509.load_pem_x509_certificate(ca_pem)
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def san_names(cert_pem: bytes) -> tuple[list[str], list[str]]:
    """(DNS names, IP addresses) in the certificate's subjectAltName."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], []
    return list(san.get_values_for_type(x509.DNSName)), [
        str(ip) for ip in san.get_values_for_type(x509.IPAddress)
    ]
