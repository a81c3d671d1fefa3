"""Transport options of the shared bootstrap: mutual TLS identities and message-size limits."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from forge.continuity.v1 import ledger_pb2, ledger_pb2_grpc, policy_pb2, policy_pb2_grpc
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from shared.runtime.auth import PrincipalDirectory
from shared.runtime.client import open_channel, service_channel
from shared.runtime.config import Settings, TlsSettings
from shared.runtime.server import start_server
from tests.errors import expect_error
from tests.support import principals_document, serve


def _certificate(
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


def _pem(key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> tuple[bytes, bytes]:
    return (
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        cert.public_bytes(serialization.Encoding.PEM),
    )


@pytest.fixture
def mtls_server(
    ledger: Ledger, tmp_path: Path
) -> Iterator[tuple[str, bytes, tuple[bytes, bytes], tuple[bytes, bytes]]]:
    ca_key, ca_cert = _certificate("forge-test-ca", None, None, ca=True)
    server_pem = _pem(*_certificate("localhost", ca_key, ca_cert.subject, ca=False))
    known_pem = _pem(*_certificate("admission", ca_key, ca_cert.subject, ca=False))
    stranger_pem = _pem(*_certificate("stranger", ca_key, ca_cert.subject, ca=False))
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "server.key").write_bytes(server_pem[0])
    (tmp_path / "server.crt").write_bytes(server_pem[1])
    (tmp_path / "ca.crt").write_bytes(ca_pem)
    document = principals_document()
    entries = document["principals"]
    assert isinstance(entries, list)
    entries.append(
        {"identity": "admission-service", "roles": ["reader"], "mtls_subject": "admission"}
    )
    running = start_server(
        Settings(
            service="ledger",
            host="127.0.0.1",
            port=0,
            tls=TlsSettings(
                str(tmp_path / "server.crt"), str(tmp_path / "server.key"), str(tmp_path / "ca.crt")
            ),
        ),
        bindings(ledger),
        PrincipalDirectory.from_document(document),
    )
    try:
        yield f"localhost:{running.port}", ca_pem, known_pem, stranger_pem
    finally:
        running.stop(grace=1.0)


def test_mutual_tls_subject_authenticates_and_unknown_subjects_do_not(
    mtls_server: tuple[str, bytes, tuple[bytes, bytes], tuple[bytes, bytes]],
) -> None:
    target, ca_pem, known, stranger = mtls_server
    trusted = policy_pb2_grpc.PolicyServiceStub(
        open_channel(target, root_certificates=ca_pem, client_certificate=known)
    )
    assert trusted.GetPolicy(policy_pb2.GetPolicyRequest()).policy.revision == 1
    expect_error(
        grpc.StatusCode.PERMISSION_DENIED,  # known subject, reader only
        "ROLE_REQUIRED",
        lambda: trusted.PutPolicy(policy_pb2.PutPolicyRequest(expected_revision=1)),
    )
    unknown = policy_pb2_grpc.PolicyServiceStub(
        open_channel(target, root_certificates=ca_pem, client_certificate=stranger)
    )
    expect_error(
        grpc.StatusCode.UNAUTHENTICATED,
        "CREDENTIALS_UNKNOWN",
        lambda: unknown.GetPolicy(policy_pb2.GetPolicyRequest()),
    )
    # A bearer token still works over the mutually authenticated channel.
    token_over_tls = policy_pb2_grpc.PolicyServiceStub(
        open_channel(target, "admin-token", root_certificates=ca_pem, client_certificate=stranger)
    )
    assert token_over_tls.GetPolicy(policy_pb2.GetPolicyRequest()).policy.revision == 1
    # Without a client certificate the handshake itself is refused.
    anonymous = policy_pb2_grpc.PolicyServiceStub(
        open_channel(target, "admin-token", root_certificates=ca_pem)
    )
    with pytest.raises(grpc.RpcError) as caught:
        anonymous.GetPolicy(policy_pb2.GetPolicyRequest(), timeout=5)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]


def test_messages_over_the_size_limit_are_refused(ledger: Ledger) -> None:
    with serve("ledger", bindings(ledger), max_message_bytes=64 * 1024) as served:
        stub = ledger_pb2_grpc.LedgerServiceStub(served.channel("writer-token"))
        with pytest.raises(grpc.RpcError) as caught:
            stub.PutBlob(ledger_pb2.PutBlobRequest(content=b"x" * (128 * 1024)))
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
        assert stub.PutBlob(ledger_pb2.PutBlobRequest(content=b"small")).created


def test_services_call_each_other_over_mutual_tls(
    mtls_server: tuple[str, bytes, tuple[bytes, bytes], tuple[bytes, bytes]], tmp_path: Path
) -> None:
    target, ca_pem, known, _stranger = mtls_server
    (tmp_path / "admission.key").write_bytes(known[0])
    (tmp_path / "admission.crt").write_bytes(known[1])
    (tmp_path / "ca.crt").write_bytes(ca_pem)
    settings = Settings(
        service="admission",
        host="127.0.0.1",
        port=0,
        targets={"ledger": target},
        tls=TlsSettings(
            str(tmp_path / "admission.crt"),
            str(tmp_path / "admission.key"),
            str(tmp_path / "ca.crt"),
        ),
    )
    stub = policy_pb2_grpc.PolicyServiceStub(service_channel(settings, "ledger"))
    assert stub.GetPolicy(policy_pb2.GetPolicyRequest()).policy.revision == 1
