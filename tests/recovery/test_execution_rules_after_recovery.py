"""Execution-time rules across a request chain (ADR 0014): after a reconciliation retry the
ticket read-back names the current member of the chain, and a fenced generation's command
receipts never satisfy the retry; an expired, never-claimed request keeps the never-claimed
recovery. Four real services, SQLite and PostgreSQL."""

from __future__ import annotations

import time

import grpc
from sqlalchemy import Engine

from forge.continuity.v1 import admission_pb2, common_pb2, execution_pb2, ledger_pb2
from services.demo.seed import seed_held_run
from tests.admission.conftest import Stack, submission
from tests.errors import expect_error
from tests.recovery.test_never_claimed import (
    ADA,
    FIXTURE,
    claim,
    execution,
    recovery,
    recovery_candidate,
)
from tests.recovery.test_reconciliation import (
    claimed_request,
    decision,
    inspect,
    ledger,  # noqa: F401 - the ledger with the test verifier
    reconciliations,
    record,
    verify,
)
from tests.support import row_counts


def retried(stack: Stack) -> tuple[common_pb2.ExecutionRequest, common_pb2.ExecutionRequest]:
    """(the reconciled original, the queued retry) after a verified RETRY_STAGE."""
    owned = claimed_request(stack)
    snapshot = inspect(stack, owned)
    verify(stack, snapshot)
    saved = reconciliations(stack).ReconcileExecutionRequest(decision(snapshot)).reconciliation
    return owned, saved.retry_request


def test_the_read_back_names_the_current_member_of_the_chain(stack: Stack) -> None:
    owned, retry = retried(stack)
    ticket = (
        stack.ledger_stub("reader-token")
        .GetAdmission(ledger_pb2.GetAdmissionRequest(run_id="run-1", request_id=owned.request_id))
        .ticket
    )
    assert ticket.execution_request.execution_request_id == owned.execution_request_id
    assert ticket.execution_request.state == common_pb2.EXECUTION_REQUEST_STATE_RECONCILED
    assert ticket.current_execution_request.execution_request_id == retry.execution_request_id
    assert ticket.current_execution_request.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED
    # The admission service's read-back carries the same ticket.
    read_back = stack.admissions(ADA).GetInvalidReadContinuity(
        admission_pb2.GetInvalidReadContinuityRequest(run_id="run-1", request_id=owned.request_id)
    )
    assert read_back.ticket.current_execution_request == ticket.current_execution_request


def test_a_fenced_generations_receipt_does_not_satisfy_the_retry(
    stack: Stack, engine: Engine
) -> None:
    _owned, retry = retried(stack)
    claimed = claim(stack, ledger_pb2.AdmissionTicket(execution_request=retry)).execution_request
    before = row_counts(engine)
    error = expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "COMMAND_RECEIPT_FENCED",
        lambda: record(stack, claimed, "cmd-new-0"),
    )
    assert error.metadata["lease_generation"] == "1"
    assert row_counts(engine) == before
    # Under a new command id the command is charged anew (13 -> 14 of 22).
    receipt = record(stack, claimed, "cmd-retry-0")
    assert receipt.charged and receipt.usage.used == 14


def test_an_expired_never_claimed_request_keeps_the_never_claimed_recovery(stack: Stack) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    candidate = stack.candidate_of("run-1")
    ticket = (
        stack.admissions(ADA)
        .RequestInvalidReadContinuity(submission(candidate, valid_for_seconds=1))
        .ticket
    )
    time.sleep(1.1)
    expired = execution(stack).ExpireExecutionRequests(
        execution_pb2.ExpireExecutionRequestsRequest()
    )
    assert [e.state for e in expired.expired] == [common_pb2.EXECUTION_REQUEST_STATE_EXPIRED]
    reviewed = recovery_candidate(stack)
    assert reviewed.eligible, reviewed.holds
    saved = stack.admissions(ADA).RequestInvalidReadRecovery(recovery(reviewed)).outcome
    assert saved.execution_request.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED
    assert claim(stack, ticket).execution_request.lease.generation == 1
