"""Certificates for TLS tests, made on the spot: a CA, and leaf certificates it signs for
``localhost`` (the loopback servers' name)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def certificate(
    subject: str,
    issuer_key: ec.EllipticCurvePrivateKey | None,
    issuer: x509.Name | None,
    *,
    ca: bool,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False
        )
    return key, builder.sign(issuer_key or key, hashes.SHA256())


def pem(key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> tuple[bytes, bytes]:
    return (
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        cert.public_bytes(serialization.Encoding.PEM),
    )


def server_files(directory: Path, subject: str = "localhost") -> tuple[Path, Path, Path]:
    """A new CA and a server certificate it signs, written as tls.crt, tls.key and ca.crt (the
    keys of a Kubernetes TLS Secret) under ``directory``."""
    ca_key, ca_cert = certificate("forge-test-ca", None, None, ca=True)
    key, cert = pem(*certificate(subject, ca_key, ca_cert.subject, ca=False))
    paths = (directory / "tls.crt", directory / "tls.key", directory / "ca.crt")
    paths[0].write_bytes(cert)
    paths[1].write_bytes(key)
    paths[2].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    return paths
