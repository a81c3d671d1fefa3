"""`make certs`: a development CA and one certificate per service and per calling role, for mutual
TLS on one machine (compose, `make run --certs`) or a test cluster.

Layout under the directory (default var/certs, ignored by git), one directory per name holding the
keys of a Kubernetes TLS Secret, so ``kubectl create secret generic forge-tls-ledger
--from-file=var/certs/ledger/`` takes one as it is::

    ca/ca.crt ca/ca.key            the development CA (its key signs the others; keep it here)
    <name>/tls.crt tls.key ca.crt  a certificate the CA signs, its key, and the CA

Services (ledger, reconstruction, candidate, admission, gateway) get a certificate valid for
localhost, 127.0.0.1 and their compose and Kubernetes names, usable as server and as client (each
calls the others with it). Callers (worker, operator, writer) get a client-only certificate whose
common name is the role. A certificate proves the caller holds a key the CA signed: the bearer token
still says who it is and what it may do (docs/adr/0047-mutual-tls-everywhere.md).

Existing files are kept (rerun with ``--force`` to issue everything anew): compose and a running
`make run` keep working across `make certs`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_DIRECTORY = "var/certs"
#: The namespace of deploy/k8s (each Service's in-cluster names go into its certificate).
NAMESPACE = "forge-continuity"
#: Processes that serve (and call each other): server and client certificates.
SERVICES = ("ledger", "reconstruction", "candidate", "admission", "gateway")
#: Roles that only call: client certificates.
CALLERS = ("worker", "operator", "writer")
VALIDITY = dt.timedelta(days=365)
CA_DIRECTORY = "ca"
CERT, KEY, CA = "tls.crt", "tls.key", "ca.crt"


@dataclass(frozen=True)
class Issued:
    """Where one name's certificate, key and CA copy are."""

    cert: Path
    key: Path
    ca: Path


def service_names(service: str) -> list[str]:
    """The DNS names a service's certificate is valid for: loopback, compose, Kubernetes."""
    return [
        "localhost",
        service,
        f"{service}.{NAMESPACE}",
        f"{service}.{NAMESPACE}.svc",
        f"{service}.{NAMESPACE}.svc.cluster.local",
    ]


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "forge continuity development"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def new_ca(common_name: str = "forge continuity development CA") -> tuple[bytes, bytes]:
    """A self-signed CA: (certificate PEM, private key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
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
        .sign(key, hashes.SHA256())
    )
    return _cert_pem(cert), _key_pem(key)


def issue(
    ca_cert_pem: bytes, ca_key_pem: bytes, common_name: str, *, server: bool
) -> tuple[bytes, bytes]:
    """A leaf certificate the CA signs: (certificate PEM, private key PEM). ``server``: valid
    for the service's names and usable both ways; otherwise a client-only certificate."""
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the development CA key is not an EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    alternative: list[x509.GeneralName] = [x509.DNSName(common_name)]
    if server:
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
        alternative = [
            *(x509.DNSName(name) for name in service_names(common_name)),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectAlternativeName(alternative), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return _cert_pem(cert), _key_pem(key)


def _write(path: Path, data: bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)


def write_certificates(
    directory: Path,
    *,
    services: Sequence[str] = SERVICES,
    callers: Sequence[str] = CALLERS,
    force: bool = False,
) -> dict[str, Issued]:
    """The CA and every certificate under ``directory``, issuing only what is missing (all anew
    with ``force``); returns where each name's files are."""
    ca_cert_path = directory / CA_DIRECTORY / CA
    ca_key_path = directory / CA_DIRECTORY / "ca.key"
    if force or not (ca_cert_path.is_file() and ca_key_path.is_file()):
        ca_cert, ca_key = new_ca()
        _write(ca_cert_path, ca_cert)
        _write(ca_key_path, ca_key, 0o600)
        force = True  # a new CA invalidates every certificate the old one signed
    ca_cert, ca_key = ca_cert_path.read_bytes(), ca_key_path.read_bytes()
    issued: dict[str, Issued] = {}
    for name, server in [*((s, True) for s in services), *((c, False) for c in callers)]:
        files = Issued(directory / name / CERT, directory / name / KEY, directory / name / CA)
        if force or not (files.cert.is_file() and files.key.is_file()):
            cert, key = issue(ca_cert, ca_key, name, server=server)
            _write(files.cert, cert)
            # Readable by others: compose bind-mounts it into containers that run as another
            # user (10001). Development material on one machine; the CA key stays private.
            _write(files.key, key)
        _write(files.ca, ca_cert)
        issued[name] = files
    return issued


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shared.runtime.dev_certificates",
        description="Write a development CA and a certificate per service and calling role.",
    )
    parser.add_argument("directory", nargs="?", default=DEFAULT_DIRECTORY)
    parser.add_argument("--force", action="store_true", help="issue everything anew")
    args = parser.parse_args(argv)
    issued = write_certificates(Path(args.directory), force=args.force)
    print(
        f"development CA and certificates in {args.directory}/ ({', '.join(issued)}); "
        "for development only",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
