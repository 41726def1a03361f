"""Certificates made at test time: a CA, the collector's certificate for 127.0.0.1 and
localhost, a client certificate for mutual TLS, and an unrelated CA that trusts none of them."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Certs:
    """PEM files in one directory."""

    ca: Path  # signed the collector's and the client's certificates
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here: trusting it alone must fail
    other_client_cert: Path  # a client certificate signed by other_ca
    other_client_key: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


def _write_cert(cert: x509.Certificate, path: Path) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _builder(
    subject: str, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _DAY)
        .not_valid_after(now + _DAY)
    )


def _ca(common: str, path: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(common, _name(common), key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
    _write_cert(cert, path)
    return cert, key


def _leaf(
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    common: str,
    usage: x509.ObjectIdentifier,
    cert_path: Path,
    key_path: Path,
) -> None:
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        _builder(common, ca_cert.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if usage == ExtendedKeyUsageOID.SERVER_AUTH:
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    _write_cert(builder.sign(ca_key, hashes.SHA256()), cert_path)
    _write_key(key, key_path)


def make_certs(base: Path) -> Certs:
    """Write a fresh CA, server and client certificates (and an unrelated CA) under ``base``."""
    base.mkdir(parents=True, exist_ok=True)
    certs = Certs(
        *(base / name for name in ("ca.pem", "server.pem", "server.key", "client.pem")),
        *(base / n for n in ("client.key", "other-ca.pem", "other-client.pem", "other-client.key")),
    )
    ca = _ca("stepwatch test CA", certs.ca)
    _leaf(ca, "collector", ExtendedKeyUsageOID.SERVER_AUTH, certs.server_cert, certs.server_key)
    _leaf(ca, "trainer", ExtendedKeyUsageOID.CLIENT_AUTH, certs.client_cert, certs.client_key)
    other = _ca("some other CA", certs.other_ca)
    _leaf(
        other,
        "stranger",
        ExtendedKeyUsageOID.CLIENT_AUTH,
        certs.other_client_cert,
        certs.other_client_key,
    )
    return certs
