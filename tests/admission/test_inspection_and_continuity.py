"""Inspection is not continuity, through the four real services, SQLite and PostgreSQL: an
inspectable record can still be ineligible, and an inspection renews no lease and writes
nothing; a derived checkpoint inspects under its own known SDK epoch."""

from __future__ import annotations

import json

from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, execution_pb2, execution_pb2_grpc, inspection_pb2
from services.demo.seed import load_fixture, seed_held_run
from tests.admission.conftest import Stack, submission
from tests.support import row_counts

S = inspection_pb2.InspectedRecordStatus


def inspect(stack: Stack, run_id: str) -> inspection_pb2.InspectJournalResponse:
    return stack.ledger_stub("reader-token").InspectJournal(
        inspection_pb2.InspectJournalRequest(run_id=run_id)
    )


def test_an_inspectable_source_can_still_be_ineligible_for_continuity(stack: Stack) -> None:
    stack.set_policy()
    for fixture, hold in (
        ("refused_validator_unregistered", common_pb2.HOLD_REASON_IDENTITY_UNREGISTERED),
        ("refused_valid_query", common_pb2.HOLD_REASON_QUERY_VALID),
    ):
        seed_held_run(
            stack.ledger_stub(), load_fixture(fixture), f"run-{fixture}".replace("_", "-")
        )
        run_id = f"run-{fixture}".replace("_", "-")
        report = inspect(stack, run_id)
        assert [r.status for r in report.records] == [S.INSPECTED_RECORD_STATUS_INSPECTED] * 2
        candidate = stack.candidate_of(run_id)
        assert not candidate.eligible
        assert hold in [h.reason for h in candidate.holds]
    unreviewed = inspect(stack, "run-refused-validator-unregistered").records[0].validator
    assert unreviewed.standing == "unreviewed" and not unreviewed.original_source_hash


def test_inspection_renews_no_lease_and_reads_the_derived_checkpoint(
    stack: Stack, engine: Engine
) -> None:
    seed_held_run(stack.ledger_stub(), load_fixture("v1_basic"), "run-1")
    stack.set_policy()
    ticket = (
        stack.admissions()
        .RequestInvalidReadContinuity(submission(stack.candidate_of("run-1")))
        .ticket
    )
    execution = execution_pb2_grpc.ExecutionServiceStub(stack.ledger.channel("reader-token"))
    exr = ticket.execution_request.execution_request_id
    before_request = execution.GetExecutionRequest(
        execution_pb2.GetExecutionRequestRequest(execution_request_id=exr)
    ).execution_request
    before = row_counts(engine)
    report = inspect(stack, "run-1")
    assert row_counts(engine) == before
    after_request = execution.GetExecutionRequest(
        execution_pb2.GetExecutionRequestRequest(execution_request_id=exr)
    ).execution_request
    assert after_request == before_request
    derived = next(
        r
        for r in report.records
        if r.kind == inspection_pb2.INSPECTED_RECORD_KIND_DERIVED_CHECKPOINT
    )
    assert derived.status == S.INSPECTED_RECORD_STATUS_INSPECTED, derived.problem
    assert derived.sdk_epoch == "firefly-agentic-26.10.1/pydantic-ai-2.55.0"
    assert derived.digest == ticket.derived_checkpoint_digest
    assert json.loads(derived.record_json)["format"] == "forge.continuity.derived-checkpoint/1"
