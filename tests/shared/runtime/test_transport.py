"""Transport options of the shared bootstrap: mutual TLS identities, message-size limits, and
server streams read on the reading thread."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.experimental
import pytest
from cryptography.hazmat.primitives import serialization
from grpc_health.v1 import health_pb2, health_pb2_grpc

from forge.continuity.v1 import (
    common_pb2,
    ledger_pb2,
    ledger_pb2_grpc,
    policy_pb2,
    policy_pb2_grpc,
)
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from shared.contract.channels import open_channel, service_channel
from shared.runtime.auth import PrincipalDirectory
from shared.runtime.config import Settings, TlsSettings, load_settings
from shared.runtime.readiness import LIVENESS, answers
from shared.runtime.server import start_server
from tests.certificates import certificate as _certificate
from tests.certificates import pem as _pem
from tests.errors import expect_error
from tests.ledger.conftest import run_request
from tests.support import principals_document, serve


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
    # A certificate that names no principal only opens the connection: a token is still needed.
    expect_error(
        grpc.StatusCode.UNAUTHENTICATED,
        "CREDENTIALS_MISSING",
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


@pytest.fixture
def tls_ledger(ledger: Ledger, tmp_path: Path) -> Iterator[tuple[str, Path, int]]:
    """A ledger serving TLS (no client certificates) with a plaintext health-only port."""
    ca_key, ca_cert = _certificate("forge-test-ca", None, None, ca=True)
    server_key, server_cert = _pem(*_certificate("localhost", ca_key, ca_cert.subject, ca=False))
    (tmp_path / "tls.key").write_bytes(server_key)
    (tmp_path / "tls.crt").write_bytes(server_cert)
    (tmp_path / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        health_port = probe.getsockname()[1]
    running = start_server(
        Settings(
            service="ledger",
            host="127.0.0.1",
            port=0,
            tls=TlsSettings(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")),
            health_port=health_port,
        ),
        bindings(ledger),
        PrincipalDirectory.from_document(principals_document()),
    )
    try:
        yield f"localhost:{running.port}", tmp_path, health_port
    finally:
        running.stop(grace=1.0)


def _caller(tmp_path: Path, target: str, ca_file: str, token_file: Path) -> Settings:
    """The admission service's settings as a pod gets them: its certificate, the CA that
    verifies its callees, and its token from a mounted file."""
    return dataclasses.replace(
        load_settings(
            "admission",
            env={
                "FORGE_LEDGER_TARGET": target,
                "FORGE_TLS_CERT": str(tmp_path / "tls.crt"),
                "FORGE_TLS_KEY": str(tmp_path / "tls.key"),
                "FORGE_TLS_CA": ca_file,
                "FORGE_SERVICE_TOKEN_FILE": str(token_file),
            },
        ),
        port=0,
    )


def test_services_verify_their_callees_with_the_ca_and_present_a_token_from_a_file(
    tls_ledger: tuple[str, Path, int],
) -> None:
    target, tmp_path, _health_port = tls_ledger
    token_file = tmp_path / "token"
    token_file.write_text("admin-token\n", encoding="utf-8")
    settings = _caller(tmp_path, target, str(tmp_path / "ca.crt"), token_file)
    assert settings.service_token == "admin-token"
    stub = policy_pb2_grpc.PolicyServiceStub(service_channel(settings, "ledger"))
    assert stub.GetPolicy(policy_pb2.GetPolicyRequest(), timeout=5).policy.revision == 1
    # Without the CA the server's certificate is not trusted (the system's roots do not know it).
    untrusting = policy_pb2_grpc.PolicyServiceStub(
        service_channel(_caller(tmp_path, target, "", token_file), "ledger")
    )
    with pytest.raises(grpc.RpcError) as caught:
        untrusting.GetPolicy(policy_pb2.GetPolicyRequest(), timeout=5)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]


def test_a_tls_server_answers_plaintext_health_checks_on_its_health_port_only(
    tls_ledger: tuple[str, Path, int],
) -> None:
    target, _tmp_path, health_port = tls_ledger
    assert answers(grpc.insecure_channel(f"127.0.0.1:{health_port}"))
    with grpc.insecure_channel(f"127.0.0.1:{health_port}") as channel:
        liveness = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=LIVENESS), timeout=5
        )
        assert liveness.status == health_pb2.HealthCheckResponse.SERVING
        # The health port hosts nothing else.
        with pytest.raises(grpc.RpcError) as caught:
            policy_pb2_grpc.PolicyServiceStub(channel).GetPolicy(
                policy_pb2.GetPolicyRequest(), timeout=5
            )
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED  # type: ignore[attr-defined]
    # The service port itself speaks only TLS.
    assert not answers(grpc.insecure_channel(target), timeout=2)


def _follow(channel: grpc.Channel, timeout: float) -> Any:
    """A follower's call: an iterator of StreamJournalResponse that is also a grpc.Call."""
    stub = ledger_pb2_grpc.LedgerServiceStub(channel)
    request = ledger_pb2.StreamJournalRequest(run_id="run-1", follow=True)
    return stub.StreamJournal(request, timeout=timeout)


def test_a_stream_read_on_its_own_thread_still_ends_on_cancel_and_deadline(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The channels services keep to each other (service_channel) read server streams on the
    iterating thread (no spin thread hands the responses over): a follower cancelled from another
    thread, or past its deadline, still ends at once with that status, after every entry was
    delivered."""
    # Without the tracing interceptor another test may have left exporting: its stream is a
    # plain generator, which has no cancel() to call.
    monkeypatch.setattr("shared.runtime.client.exporting", lambda: False)
    with serve("ledger", bindings(ledger)) as served:
        writer = ledger_pb2_grpc.LedgerServiceStub(served.channel("writer-token"))
        writer.CreateRun(run_request())
        writer.AppendJournalEntry(
            ledger_pb2.AppendJournalEntryRequest(
                run_id="run-1",
                kind=common_pb2.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
                payload_json='{"annotation": "followed"}',
            )
        )
        settings = Settings(
            service="candidate",
            host="127.0.0.1",
            port=0,
            service_token="reader-token",
            targets={"ledger": served.target},
        )
        channel = service_channel(settings, "ledger")
        follower = _follow(channel, timeout=30)
        delivered: list[int] = []
        ended: list[grpc.StatusCode] = []

        def read() -> None:
            try:
                for response in follower:
                    delivered.append(response.entry.sequence)
            except grpc.RpcError as error:
                ended.append(error.code())  # type: ignore[attr-defined]

        reader = threading.Thread(target=read)
        reader.start()
        deadline = time.monotonic() + 10
        while not delivered and time.monotonic() < deadline:
            time.sleep(0.01)
        # Read on the reading thread: asking for the result while the stream runs refuses at
        # once instead of waiting (a stream handed over by a spin thread would time out).
        with pytest.raises(grpc.experimental.UsageError):
            follower.result(timeout=0.5)
        follower.cancel()
        reader.join(timeout=5)
        assert not reader.is_alive()
        assert ended == [grpc.StatusCode.CANCELLED]
        assert delivered == [1]

        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as caught:
            for _ in _follow(channel, timeout=0.5):
                pass
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED  # type: ignore[attr-defined]
        assert time.monotonic() - started < 5
