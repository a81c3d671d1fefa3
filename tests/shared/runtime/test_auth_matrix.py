"""Authentication and authorization over every RPC of every service, through real servers.

The expected matrix is written out here on purpose: it is the documented access policy, so a
change to a service's role table must change this file too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import symbol_database

from forge.continuity.v1 import (
    admission_pb2,
    admission_pb2_grpc,
    candidate_pb2,
    common_pb2,
    execution_pb2,
    ledger_pb2,
    policy_pb2,
    reconciliation_pb2,
    reconstruction_pb2,
)
from services.admission.servicer import bindings as admission_bindings
from services.candidate.servicer import bindings as candidate_bindings
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.runtime.auth import ANY_ROLE
from shared.runtime.errors import from_rpc_error
from shared.runtime.server import service_binding
from tests.support import ROLE_TOKENS, TOKENS, Served, admission_downstream, serve, token_roles

ALL = frozenset(ROLE_TOKENS)
ADMIN = frozenset({"factory_administrator"})
OPERATOR = frozenset({"execution_operator"})
WRITER = frozenset({"platform_writer"})
WORKER = frozenset({"worker"})
# One identity per service: admission commits, the candidate service only reads.
ADMISSION = frozenset({"admission_service"})
CANDIDATE = frozenset({"candidate_service"})
# Admission recomputes the candidate under its own service identity.
CANDIDATE_READERS = OPERATOR | ADMIN | ADMISSION
# Reconstruction: the service that proves candidates, operators and administrators (not
# admission, which never calls it).
RECONSTRUCTION_CALLERS = CANDIDATE | OPERATOR | ADMIN

EXPECTED: dict[str, frozenset[str]] = {
    "/forge.continuity.v1.LedgerService/CreateRun": WRITER,
    "/forge.continuity.v1.LedgerService/GetRun": ALL,
    "/forge.continuity.v1.LedgerService/ListRuns": ALL,
    "/forge.continuity.v1.LedgerService/AppendJournalEntry": WRITER | WORKER,
    "/forge.continuity.v1.LedgerService/ReadJournal": ALL,
    "/forge.continuity.v1.LedgerService/StreamJournal": ALL,
    "/forge.continuity.v1.LedgerService/VerifyJournal": ALL,
    "/forge.continuity.v1.LedgerService/ReadRunSnapshot": ALL,
    "/forge.continuity.v1.LedgerService/GetRunSnapshot": ALL,
    "/forge.continuity.v1.LedgerService/InspectJournal": ALL,
    "/forge.continuity.v1.LedgerService/PutBlob": WRITER | ADMISSION | WORKER,
    "/forge.continuity.v1.LedgerService/GetBlob": ALL,
    "/forge.continuity.v1.LedgerService/CommitAdmission": ADMISSION,
    "/forge.continuity.v1.LedgerService/GetAdmission": ALL,
    "/forge.continuity.v1.LedgerService/CommitRecovery": ADMISSION,
    "/forge.continuity.v1.LedgerService/GetRecovery": ALL,
    "/forge.continuity.v1.LedgerService/GetSigningKeys": ALL,
    "/forge.continuity.v1.LedgerService/ListSignedHeads": ALL,
    "/forge.continuity.v1.LedgerService/ListHeads": ALL,
    "/forge.continuity.v1.PolicyService/GetPolicy": ALL,
    "/forge.continuity.v1.PolicyService/PutPolicy": ADMIN,
    "/forge.continuity.v1.PolicyService/ListPolicyRevisions": ALL,
    "/forge.continuity.v1.ReconciliationService/InspectReconciliation": ALL,
    "/forge.continuity.v1.ReconciliationService/VerifyReconciliation": ADMIN,
    "/forge.continuity.v1.ReconciliationService/ReconcileExecutionRequest": ADMIN,
    "/forge.continuity.v1.ReconciliationService/GetReconciliation": ALL,
    "/forge.continuity.v1.ExecutionService/ClaimExecutionRequest": WORKER,
    "/forge.continuity.v1.ExecutionService/CompleteExecutionRequest": WORKER,
    "/forge.continuity.v1.ExecutionService/FailExecutionRequest": WORKER,
    "/forge.continuity.v1.ExecutionService/FailUnclaimedExecutionRequest": ADMIN,
    "/forge.continuity.v1.ExecutionService/GetExecutionRequest": ALL,
    "/forge.continuity.v1.ExecutionService/ListExecutionRequests": ALL,
    "/forge.continuity.v1.ExecutionService/ListAllExecutionRequests": ALL,
    "/forge.continuity.v1.ExecutionService/RecordCommand": WORKER,
    "/forge.continuity.v1.ExecutionService/GetCommandUsage": ALL,
    "/forge.continuity.v1.ExecutionService/CancelExecutionRequest": OPERATOR | ADMIN,
    "/forge.continuity.v1.ExecutionService/ExpireExecutionRequests": WORKER | ADMIN,
    "/forge.continuity.v1.ReconstructionService/ReconstructInvalidRead": RECONSTRUCTION_CALLERS,
    "/forge.continuity.v1.ReconstructionService/AnalyzeConsumedResponse": RECONSTRUCTION_CALLERS,
    "/forge.continuity.v1.ReconstructionService/AnalyzeAndReconstructInvalidRead": (
        RECONSTRUCTION_CALLERS
    ),
    "/forge.continuity.v1.ReconstructionService/ReproducePendingRequest": RECONSTRUCTION_CALLERS,
    "/forge.continuity.v1.ReconstructionService/ReconstructReadonlyObservation": (
        RECONSTRUCTION_CALLERS
    ),
    "/forge.continuity.v1.CandidateService/GetInvalidReadContinuityCandidate": CANDIDATE_READERS,
    # Admission recomputes the recovery candidate under its own service identity too.
    "/forge.continuity.v1.CandidateService/GetInvalidReadRecoveryCandidate": ADMIN | ADMISSION,
    "/forge.continuity.v1.CandidateService/GetRejectedBoundaryCandidate": ADMIN | ADMISSION,
    "/forge.continuity.v1.CandidateService/GetReadonlyObservationCandidate": ADMIN | ADMISSION,
    "/forge.continuity.v1.AdmissionService/RequestInvalidReadContinuity": OPERATOR,
    "/forge.continuity.v1.AdmissionService/RequestInvalidReadContinuityV2": OPERATOR,
    "/forge.continuity.v1.AdmissionService/GetInvalidReadContinuity": ALL,
    "/forge.continuity.v1.AdmissionService/RequestInvalidReadRecovery": ADMIN,
    "/forge.continuity.v1.AdmissionService/GetInvalidReadRecovery": ALL,
    "/forge.continuity.v1.AdmissionService/RequestRejectedBoundaryRecovery": ADMIN,
    "/forge.continuity.v1.AdmissionService/GetRejectedBoundaryRecovery": ALL,
    "/forge.continuity.v1.AdmissionService/RequestReadonlyObservationRecovery": ADMIN,
    "/forge.continuity.v1.AdmissionService/GetReadonlyObservationRecovery": ALL,
    "/forge.continuity.v1.AdmissionService/GetCallerPermissions": ALL,
    "/forge.continuity.v1.AdmissionService/ListRecoveryWorkflows": ALL,
}
# RPC names that only read (or compute without writing).
READ_PREFIXES = (
    "Get",
    "List",
    "Read",
    "Stream",
    "Verify",
    "Inspect",
    "Analyze",
    "Reconstruct",
    "Reproduce",
)
FILES = (
    ledger_pb2,
    policy_pb2,
    execution_pb2,
    reconciliation_pb2,
    reconstruction_pb2,
    candidate_pb2,
    admission_pb2,
)


def _methods() -> dict[str, tuple[str, object, bool]]:
    """full method name -> (service short name, request class, server-streaming?)."""
    found: dict[str, tuple[str, object, bool]] = {}
    database = symbol_database.Default()
    for module in FILES:
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                request_class = database.GetSymbol(method.input_type.full_name)
                found[f"/{service.full_name}/{method.name}"] = (
                    service.name,
                    request_class,
                    method.server_streaming,
                )
    return found


METHODS = _methods()


def test_the_matrix_covers_every_rpc_of_the_contracts() -> None:
    assert set(METHODS) == set(EXPECTED)


def test_a_service_is_not_hosted_with_an_rpc_left_without_roles_or_roles_for_no_rpc() -> None:
    service = reconstruction_pb2.DESCRIPTOR.services_by_name["ReconstructionService"]
    roles = {method.name: ANY_ROLE for method in service.methods}
    assert service_binding(service, roles, lambda name: lambda *_: None).method_roles == roles
    without = {name: r for name, r in roles.items() if name != "ReproducePendingRequest"}
    with pytest.raises(ValueError, match="no roles for \\['ReproducePendingRequest'\\]"):
        service_binding(service, without, lambda name: lambda *_: None)
    with pytest.raises(ValueError, match="no RPC for \\['Reconstruct'\\]"):
        service_binding(service, {**roles, "Reconstruct": ANY_ROLE}, lambda name: lambda *_: None)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Served]]:
    from services.ledger.database import make_engine, upgrade

    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('auth')}/ledger.db")
    upgrade(engine)
    with (
        serve("ledger", ledger_bindings(Ledger(engine, authority=token_roles))) as ledger,
        serve("reconstruction", reconstruction_bindings()) as reconstruction,
        serve("candidate", candidate_bindings()) as candidate,
        serve(
            "admission",
            admission_bindings(admission_downstream(ledger.target, candidate.target)),
        ) as admission,
    ):
        yield {
            "LedgerService": ledger,
            "PolicyService": ledger,
            "ExecutionService": ledger,
            "ReconciliationService": ledger,
            "ReconstructionService": reconstruction,
            "CandidateService": candidate,
            "AdmissionService": admission,
        }
    engine.dispose()


def _call(
    served: Served, method: str, metadata: list[tuple[str, str]]
) -> tuple[grpc.StatusCode, str]:
    """(status code, ErrorInfo reason) of calling ``method`` with an empty request."""
    _service, request_class, streaming = METHODS[method]
    channel = grpc.insecure_channel(served.target)
    request = request_class()  # type: ignore[operator]
    serializer = type(request).SerializeToString
    try:
        if streaming:
            for _ in channel.unary_stream(method, request_serializer=serializer)(
                request, metadata=metadata, timeout=5
            ):
                break
        else:
            channel.unary_unary(method, request_serializer=serializer)(
                request, metadata=metadata, timeout=5
            )
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as error:
        return error.code(), from_rpc_error(error).reason  # type: ignore[attr-defined]
    finally:
        channel.close()


@pytest.mark.parametrize("method", sorted(EXPECTED))
def test_missing_unknown_and_malformed_credentials_are_unauthenticated(
    servers: dict[str, Served], method: str, caplog: pytest.LogCaptureFixture
) -> None:
    served = servers[METHODS[method][0]]
    with caplog.at_level(logging.WARNING, logger="forge.audit"):
        for metadata, reason in (
            ([], "CREDENTIALS_MISSING"),
            ([("authorization", "Bearer not-a-token")], "CREDENTIALS_UNKNOWN"),
            ([("authorization", "Basic abc")], "CREDENTIALS_MALFORMED"),
        ):
            assert _call(served, method, metadata) == (grpc.StatusCode.UNAUTHENTICATED, reason)
    audited = [r.getMessage() for r in caplog.records if r.name == "forge.audit"]
    assert len(audited) == 3 and all(method in line for line in audited)


@pytest.mark.parametrize("method", sorted(EXPECTED))
def test_each_role_is_allowed_exactly_where_documented(
    servers: dict[str, Served], method: str
) -> None:
    served = servers[METHODS[method][0]]
    for role, token in ROLE_TOKENS.items():
        metadata = [("authorization", f"Bearer {token}")]
        code, reason = _call(served, method, metadata)
        if role in EXPECTED[method]:
            # Past authorization the empty request may be refused for other reasons, never these.
            assert code not in (
                grpc.StatusCode.UNAUTHENTICATED,
                grpc.StatusCode.PERMISSION_DENIED,
            ), (role, code)
        else:
            assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "ROLE_REQUIRED"), role


def _permissions(served: Served, token: str) -> admission_pb2.GetCallerPermissionsResponse:
    channel = grpc.insecure_channel(served.target)
    try:
        reply: admission_pb2.GetCallerPermissionsResponse = admission_pb2_grpc.AdmissionServiceStub(
            channel
        ).GetCallerPermissions(
            admission_pb2.GetCallerPermissionsRequest(),
            metadata=[("authorization", f"Bearer {token}")],
            timeout=5,
        )
        return reply
    finally:
        channel.close()


REPORTED = sorted(
    m
    for m in EXPECTED
    if m.split("/")[1].split(".")[-1] in ("AdmissionService", "CandidateService")
)
# Every call that writes or gates a write: the console offers an action only for these.
SUBMISSIONS = [m for m in REPORTED if m.split("/")[-1].startswith("Request")]


@pytest.mark.parametrize("role", sorted(ROLE_TOKENS))
def test_caller_permissions_match_what_the_interceptor_decides(
    servers: dict[str, Served], role: str
) -> None:
    """The reported decision for each admission and candidate RPC is the decision the server
    takes when the same caller calls it."""
    token = ROLE_TOKENS[role]
    reply = _permissions(servers["AdmissionService"], token)
    identity, roles = TOKENS[token]
    assert reply.identity == identity
    assert [common_pb2.Role.Name(r) for r in reply.roles] == [f"ROLE_{r.upper()}" for r in roles]
    reported = {p.method: p for p in reply.permissions}
    assert [p.method for p in reply.permissions] == REPORTED  # every RPC, sorted
    assert len(SUBMISSIONS) >= 5 and set(SUBMISSIONS) <= set(reported)
    for method in REPORTED:
        permission = reported[method]
        assert {
            common_pb2.Role.Name(r)[len("ROLE_") :].lower() for r in permission.required_roles
        } == (EXPECTED[method]), method
        code, reason = _call(
            servers[METHODS[method][0]], method, [("authorization", f"Bearer {token}")]
        )
        refused = (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, "ROLE_REQUIRED")
        assert permission.permitted == (not refused), (role, method, code, reason)
        assert permission.permitted == (role in EXPECTED[method]), (role, method)


def test_the_candidate_service_identity_may_call_no_write_rpc(
    servers: dict[str, Served],
) -> None:
    """The read-only candidate service cannot commit, store or change anything, whatever it is
    asked to do: every RPC it may call reads, and the servers refuse it every write."""
    permitted = {m.split("/")[-1] for m, roles in EXPECTED.items() if "candidate_service" in roles}
    assert permitted, "the candidate service must be able to read"
    assert all(name.startswith(READ_PREFIXES) for name in permitted), sorted(permitted)
    token = ROLE_TOKENS["candidate_service"]
    for method in (
        "/forge.continuity.v1.LedgerService/CommitAdmission",
        "/forge.continuity.v1.LedgerService/CommitRecovery",
        "/forge.continuity.v1.LedgerService/PutBlob",
        "/forge.continuity.v1.AdmissionService/RequestInvalidReadContinuity",
    ):
        served = servers[METHODS[method][0]]
        assert _call(served, method, [("authorization", f"Bearer {token}")]) == (
            grpc.StatusCode.PERMISSION_DENIED,
            "ROLE_REQUIRED",
        ), method


def test_caller_permissions_need_credentials(servers: dict[str, Served]) -> None:
    code, reason = _call(
        servers["AdmissionService"],
        "/forge.continuity.v1.AdmissionService/GetCallerPermissions",
        [],
    )
    assert (code, reason) == (grpc.StatusCode.UNAUTHENTICATED, "CREDENTIALS_MISSING")


def test_a_caller_with_two_roles_is_permitted_what_either_permits(
    servers: dict[str, Served],
) -> None:
    reply = _permissions(servers["AdmissionService"], "admin-operator-token")
    assert reply.identity == "ada-admin-operator"
    permitted = {p.method for p in reply.permissions if p.permitted}
    assert permitted == {
        m for m in REPORTED if EXPECTED[m] & {"factory_administrator", "execution_operator"}
    }
