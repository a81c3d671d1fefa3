"""Mutual TLS between real servers on loopback, with the certificates `make certs` writes.

A ledger and a reconstruction server require client certificates of the development CA; a
candidate server calls both with its own. A caller holding a certificate of that CA is served,
through the candidate server to the ledger too. A stranger (no certificate, a certificate of
another CA, plaintext) is refused at the handshake: no method runs, and its bearer token never
reaches the server (the gate, which reads it first, never sees the call). A client refuses a
server whose certificate another CA signed."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from forge.continuity.v1 import (
    candidate_pb2,
    candidate_pb2_grpc,
    ledger_pb2,
    ledger_pb2_grpc,
    policy_pb2,
    policy_pb2_grpc,
)
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings as candidate_bindings
from services.client import ContinuityClient
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.contract.channels import open_channel
from shared.runtime.auth import Directory, Principal, PrincipalDirectory
from shared.runtime.config import ClientTls, Settings, TlsSettings
from shared.runtime.dev_certificates import Issued, write_certificates
from shared.runtime.server import ServiceBinding, start_server
from tests.support import principals_document

HANDSHAKE_SECONDS = 10


class WitnessDirectory:
    """The test principals, remembering every bearer token presented to them: the gate reads
    the token first, so a token missing here never reached any part of the server's code."""

    def __init__(self) -> None:
        self._principals = PrincipalDirectory.from_document(principals_document())
        self.presented: list[str | None] = []

    def authenticate(
        self, authorization: str | None, mtls_subjects: Iterable[str] = ()
    ) -> Principal:
        self.presented.append(authorization)
        return self._principals.authenticate(authorization, mtls_subjects)


@dataclass
class Stack:
    certs: dict[str, Issued]
    strangers: dict[str, Issued]
    ledger: str
    candidate: str
    ledger_witness: WitnessDirectory

    def tls(self, role: str, *, certs: dict[str, Issued] | None = None) -> ClientTls:
        issued = (certs or self.certs)[role]
        return ClientTls(str(self.certs[role].ca), str(issued.cert), str(issued.key))


def server_tls(issued: Issued) -> TlsSettings:
    """A service's own certificate; client certificates of its CA required."""
    return TlsSettings(str(issued.cert), str(issued.key), str(issued.ca), str(issued.ca))


@contextmanager
def mtls_server(
    service: str,
    bindings: list[ServiceBinding],
    issued: Issued,
    directory: Directory,
) -> Iterator[str]:
    settings = Settings(service=service, host="127.0.0.1", port=0, tls=server_tls(issued))
    running = start_server(settings, bindings, directory)
    try:
        yield f"127.0.0.1:{running.port}"
    finally:
        running.stop(grace=1.0)


@pytest.fixture(scope="session")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Issued], ...]:
    """`make certs` twice: the deployment's CA and a stranger's."""
    root = tmp_path_factory.mktemp("certs")
    return write_certificates(root / "ours"), write_certificates(root / "theirs")


@pytest.fixture
def stack(ledger: Ledger, certificates: tuple[dict[str, Issued], ...]) -> Iterator[Stack]:
    certs, strangers = certificates
    witness = WitnessDirectory()
    candidate_tls = ClientTls(
        str(certs["candidate"].ca), str(certs["candidate"].cert), str(certs["candidate"].key)
    )
    with (
        mtls_server("ledger", ledger_bindings(ledger), certs["ledger"], witness) as ledger_target,
        mtls_server(
            "reconstruction",
            reconstruction_bindings(),
            certs["reconstruction"],
            PrincipalDirectory.from_document(principals_document()),
        ) as reconstruction_target,
    ):
        ledger_channel = open_channel(ledger_target, "candidate-service-token", tls=candidate_tls)
        reconstruction_channel = open_channel(
            reconstruction_target, "candidate-service-token", tls=candidate_tls
        )
        try:
            with mtls_server(
                "candidate",
                candidate_bindings(GrpcCandidateSources(ledger_channel, reconstruction_channel)),
                certs["candidate"],
                PrincipalDirectory.from_document(principals_document()),
            ) as candidate_target:
                yield Stack(certs, strangers, ledger_target, candidate_target, witness)
        finally:
            ledger_channel.close()
            reconstruction_channel.close()


def create_run(stack: Stack, run_id: str) -> None:
    with open_channel(stack.ledger, "writer-token", tls=stack.tls("writer")) as channel:
        ledger_pb2_grpc.LedgerServiceStub(channel).CreateRun(
            ledger_pb2.CreateRunRequest(
                run_id=run_id,
                task_id="task-tls",
                attempt_id="attempt-tls",
                source_revision="rev-tls",
                configuration_digest="sha256:" + "c" * 64,
                provider_timeout_seconds=900,
                command_limit=22,
                time_budget_protocol="provider-timeout-v1",
                source_profile="profile-tls",
            ),
            timeout=HANDSHAKE_SECONDS,
        )


def test_a_caller_with_a_certificate_of_the_ca_is_served_through_two_services(
    stack: Stack,
) -> None:
    create_run(stack, "run-tls")
    with ContinuityClient(
        "operator-token",
        ledger_target=stack.ledger,
        candidate_target=stack.candidate,
        admission_target=stack.candidate,  # not called here
        tls=stack.tls("operator"),
    ) as client:
        assert client.get_policy().revision == 1
        assert client.get_run("run-tls").run.task_id == "task-tls"
        # The candidate server read the run from the ledger over its own mutual TLS.
        candidate = client.invalid_read_continuity_candidate("run-tls")
    assert candidate.run_id == "run-tls"
    assert not candidate.eligible
    # The same client from the environment (FORGE_TLS_CA / FORGE_TLS_CERT / FORGE_TLS_KEY).
    operator = stack.tls("operator")
    environment = {
        "FORGE_TOKEN": "reader-token",
        "FORGE_LEDGER_TARGET": stack.ledger,
        "FORGE_TLS_CA": operator.ca_file,
        "FORGE_TLS_CERT": operator.cert_file,
        "FORGE_TLS_KEY": operator.key_file,
    }
    with ContinuityClient.from_environment(environment) as client:
        assert client.get_run("run-tls").run.attempt_id == "attempt-tls"
    # The candidate's own call reached the ledger's gate with its token.
    assert "Bearer candidate-service-token" in stack.ledger_witness.presented


def stranger_channel(stack: Stack, kind: str) -> grpc.Channel:
    ca = str(stack.certs["operator"].ca)
    other = stack.strangers["operator"]
    if kind == "no certificate":
        return open_channel(stack.ledger, "reader-token", tls=ClientTls(ca_file=ca))
    if kind == "a certificate of another CA":
        return open_channel(
            stack.ledger, "reader-token", tls=ClientTls(ca, str(other.cert), str(other.key))
        )
    return open_channel(stack.ledger, "reader-token")  # plaintext


@pytest.mark.parametrize("kind", ["no certificate", "a certificate of another CA", "plaintext"])
def test_a_stranger_is_refused_at_the_handshake_and_its_token_never_arrives(
    stack: Stack, kind: str
) -> None:
    with stranger_channel(stack, kind) as channel, pytest.raises(grpc.RpcError) as refused:
        policy_pb2_grpc.PolicyServiceStub(channel).GetPolicy(
            policy_pb2.GetPolicyRequest(), timeout=HANDSHAKE_SECONDS
        )
    # No gRPC status from the service: the connection never carried a call.
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE, refused.value
    assert "Bearer reader-token" not in stack.ledger_witness.presented
    assert stack.ledger_witness.presented == []
    # The same token with a certificate of the CA is served: only the handshake refused it.
    with open_channel(stack.ledger, "reader-token", tls=stack.tls("operator")) as channel:
        reply = policy_pb2_grpc.PolicyServiceStub(channel).GetPolicy(
            policy_pb2.GetPolicyRequest(), timeout=HANDSHAKE_SECONDS
        )
    assert reply.policy.revision == 1
    assert stack.ledger_witness.presented.count("Bearer reader-token") >= 1


def test_a_client_refuses_a_server_certified_by_another_ca(stack: Stack) -> None:
    """The client verifies the server too: with a stranger's CA as its roots, the ledger's
    certificate is not trusted and nothing is sent."""
    theirs, ours = stack.strangers["operator"], stack.certs["operator"]
    tls = ClientTls(str(theirs.ca), str(ours.cert), str(ours.key))
    with (
        open_channel(stack.candidate, "operator-token", tls=tls) as channel,
        pytest.raises(grpc.RpcError) as refused,
    ):
        candidate_pb2_grpc.CandidateServiceStub(channel).GetInvalidReadContinuityCandidate(
            candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id="run-x"),
            timeout=HANDSHAKE_SECONDS,
        )
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE


def test_make_certs_keeps_what_exists_and_issues_what_is_missing(tmp_path: Path) -> None:
    first = write_certificates(tmp_path)
    ledger_cert = first["ledger"].cert.read_bytes()
    first["worker"].cert.unlink()
    second = write_certificates(tmp_path)
    assert second["ledger"].cert.read_bytes() == ledger_cert
    assert second["worker"].cert.is_file()
    assert first["ledger"].key.stat().st_mode & 0o777 == 0o644  # compose's user reads it
    assert (tmp_path / "ca" / "ca.key").stat().st_mode & 0o077 == 0
    assert write_certificates(tmp_path, force=True)["ledger"].cert.read_bytes() != ledger_cert
