"""A signing ledger behind the four real services, and a real run exported as an audit bundle."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import execution_pb2, execution_pb2_grpc, ledger_pb2
from services.client import ContinuityClient
from services.demo.seed import CONFIGURATION_DIGEST, load_fixture, seed_held_run
from services.ledger.domain.signing import HeadSigner
from services.ledger.service import Ledger
from shared.continuity.canonical import digest_of
from shared.continuity.qualification import DEFAULT_QUALIFIED_PROFILE
from tests.admission.conftest import Stack, stack, submission
from tests.support import token_roles

__all__ = ["stack"]  # the four real services, over the signing ledger below

FIXTURE = load_fixture("v1_basic")


@pytest.fixture
def signer() -> HeadSigner:
    return HeadSigner.generate()


@pytest.fixture
def ledger(engine: Engine, signer: HeadSigner) -> Ledger:
    return Ledger(engine, authority=token_roles, signer=signer)


@dataclass
class RealRun:
    """A run held, admitted, claimed, charged a command and completed through the services."""

    run_id: str
    bundle: Path
    public_key: Path
    stack: Stack


def client(stack: Stack, token: str = "reader-token") -> ContinuityClient:
    return ContinuityClient(
        token,
        ledger_target=stack.ledger.target,
        candidate_target=stack.candidate.target,
        admission_target=stack.admission.target,
    )


def live_run(stack: Stack, run_id: str = "run-1") -> None:
    """Seed a held run as the platform writes it, admit it as an operator, then let a worker
    claim it, charge one command and complete it."""
    seed_held_run(stack.ledger_stub(), FIXTURE, run_id)
    stack.set_policy()
    candidate = stack.candidate_of(run_id)
    assert candidate.eligible, candidate.holds
    ticket = stack.admissions().RequestInvalidReadContinuity(submission(candidate)).ticket
    exr = ticket.execution_request.execution_request_id
    run = stack.ledger_stub("reader-token").GetRun(ledger_pb2.GetRunRequest(run_id=run_id)).run
    worker = execution_pb2_grpc.ExecutionServiceStub(stack.ledger.channel("worker-token"))
    claimed = worker.ClaimExecutionRequest(
        execution_pb2.ClaimExecutionRequestRequest(
            execution_request_id=exr,
            attempt_id=run.attempt_id,
            source_revision=run.source_revision,
            configuration_digest=CONFIGURATION_DIGEST,
            source_profile=DEFAULT_QUALIFIED_PROFILE,
        )
    ).execution_request
    generation = claimed.lease.generation
    worker.RecordCommand(
        execution_pb2.RecordCommandRequest(
            execution_request_id=exr,
            lease_generation=generation,
            command_id="cmd-after-admission",
            command_digest=digest_of({"command": "ls"}),
        )
    )
    worker.CompleteExecutionRequest(
        execution_pb2.CompleteExecutionRequestRequest(
            execution_request_id=exr, lease_generation=generation
        )
    )


def export(stack: Stack, run_id: str, path: Path) -> Path:
    with client(stack) as reader:
        reader.export_journal(run_id, path)
    return path


@pytest.fixture
def real_run(stack: Stack, signer: HeadSigner, tmp_path: Path) -> RealRun:
    live_run(stack)
    public_key = tmp_path / "ledger-signing.pub.pem"
    public_key.write_bytes(signer.public_pem())
    return RealRun(
        "run-1", export(stack, "run-1", tmp_path / "run-1.audit.jsonl"), public_key, stack
    )
