"""Helpers of the ledger admission and execution tests: seeding a held run, commit and claim
requests as the admission service and a worker send them."""

from __future__ import annotations

from functools import cache

from forge.continuity.v1 import (
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    ledger_pb2,
    policy_pb2,
)
from services.demo.seed import (
    CONFIGURATION_DIGEST,
    HeldRunFixture,
    SeededRun,
    load_fixture,
    seed_held_run,
)
from services.reconstruction.domain import ReconstructionResult, reconstruct_invalid_read
from shared.continuity.canonical import digest_of
from shared.continuity.qualification import DEFAULT_QUALIFIED_PROFILE
from shared.contract.terms import enum_short_name
from tests.ledger.conftest import LedgerClients
from tests.support import whole_journal

FIXTURE = load_fixture("v1_basic")


@cache
def reconstructed(version: int = 1) -> ReconstructionResult:
    """The fixture's real reconstruction under ``version``: the ledger checks the derived
    checkpoint's envelope against the journal, so a commit carries the genuine one."""
    return reconstruct_invalid_read(
        FIXTURE.checkpoint, FIXTURE.raw_response, version, FIXTURE.consumed_at
    )


def derived_fields(fixture: HeldRunFixture) -> dict[str, object]:
    """The commit fields carrying ``fixture``'s own version-1 derived checkpoint."""
    found = reconstruct_invalid_read(
        fixture.checkpoint, fixture.raw_response, 1, fixture.consumed_at
    )
    return {
        "derived_checkpoint": found.derived_checkpoint,
        "derived_checkpoint_digest": found.derived_checkpoint_digest,
        "witness_digest": found.witness_digest,
    }


DERIVED = reconstructed(1).derived_checkpoint
WITNESS = reconstructed(1).witness_digest
S = common_pb2.ExecutionRequestState


def enable_policy(clients: LedgerClients, **settings: object) -> common_pb2.Policy:
    current = clients.policy().GetPolicy(policy_pb2.GetPolicyRequest()).policy
    values: dict[str, object] = {"enabled": True, "window_seconds": 3600}
    values.update(settings)
    return (
        clients.policy()
        .PutPolicy(
            policy_pb2.PutPolicyRequest(
                expected_revision=current.revision, settings=common_pb2.PolicySettings(**values)
            )
        )
        .policy
    )


def execution(
    clients: LedgerClients, token: str = "worker-token"
) -> execution_pb2_grpc.ExecutionServiceStub:
    return execution_pb2_grpc.ExecutionServiceStub(clients.channel(token))


def seed(clients: LedgerClients, run_id: str = "run-1", **options: object) -> SeededRun:
    seeded = seed_held_run(clients.ledger(), FIXTURE, run_id, **options)  # type: ignore[arg-type]
    for version in (1, 2):
        content = reconstructed(version).derived_checkpoint
        clients.ledger("service-token").PutBlob(ledger_pb2.PutBlobRequest(content=content))
    return seeded


def commit_request(
    clients: LedgerClients, seeded: SeededRun, request_id: str = "req-1", **overrides: object
) -> ledger_pb2.CommitAdmissionRequest:
    policy = clients.policy("reader-token").GetPolicy(policy_pb2.GetPolicyRequest()).policy
    version = int(overrides.get("version", 1))  # type: ignore[call-overload]
    derived = reconstructed(version if version in (1, 2) else 1)
    fields: dict[str, object] = {
        "run_id": seeded.run_id,
        "request_id": request_id,
        "operator_identity": "olga-operator",
        "request_content_digest": digest_of({"request": request_id, "valid_for_seconds": 1800}),
        "expected_head_hash": seeded.head_hash,
        "policy_revision": policy.revision,
        "digests": common_pb2.ContinuityDigests(
            candidate_digest=digest_of("candidate"),
            run_digest=digest_of("run"),
            journal_digest=seeded.head_hash,
            policy_digest=policy.digest,
        ),
        "version": version,
        "valid_for_seconds": 1800,
        "derived_checkpoint_digest": derived.derived_checkpoint_digest,
        "consumed_response_digest": seeded.response_digest,
        "witness_digest": derived.witness_digest,
    }
    fields.update(overrides)
    return ledger_pb2.CommitAdmissionRequest(**fields)  # type: ignore[arg-type]


def commit(
    clients: LedgerClients, request: ledger_pb2.CommitAdmissionRequest
) -> ledger_pb2.CommitAdmissionResponse:
    return clients.ledger("service-token").CommitAdmission(request)


def journal_kinds(clients: LedgerClients, run_id: str) -> list[str]:
    entries = whole_journal(clients.ledger("reader-token"), run_id)
    return [enum_short_name(common_pb2.JournalEntryKind, e.kind).lower() for e in entries]


def claim_request(
    clients: LedgerClients, execution_request_id: str, **overrides: object
) -> execution_pb2.ClaimExecutionRequestRequest:
    """A claim presenting the run's own source and its original attempt."""
    queued = execution(clients, "reader-token").GetExecutionRequest(
        execution_pb2.GetExecutionRequestRequest(execution_request_id=execution_request_id)
    )
    run = (
        clients.ledger("reader-token")
        .GetRun(ledger_pb2.GetRunRequest(run_id=queued.execution_request.run_id))
        .run
    )
    fields: dict[str, object] = {
        "execution_request_id": execution_request_id,
        "attempt_id": run.attempt_id,
        "source_revision": "git:4f1c2a9",
        "configuration_digest": CONFIGURATION_DIGEST,
        "source_profile": DEFAULT_QUALIFIED_PROFILE,
    }
    fields.update(overrides)
    return execution_pb2.ClaimExecutionRequestRequest(**fields)  # type: ignore[arg-type]


def admitted(
    clients: LedgerClients, **policy: object
) -> tuple[SeededRun, ledger_pb2.AdmissionTicket]:
    seeded = seed(clients)
    enable_policy(clients, **policy)
    return seeded, commit(clients, commit_request(clients, seeded)).ticket
