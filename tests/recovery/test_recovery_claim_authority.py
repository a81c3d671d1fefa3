"""A request a recovery queued is claimed, and its commands dispatched, only while the
recovery's actor still holds the authority its workflow required (claim step 11.5c, command
step 13): revocation stops dispatch, writes nothing and leaves the request queued; restoring the
authority lets the next claim through. Four real services, SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, execution_pb2, ledger_pb2
from services.demo.provider import RefusingProvider
from tests.admission.conftest import Stack
from tests.errors import expect_error
from tests.recovery.conftest import Authority
from tests.recovery.test_never_claimed import (
    ADA,
    ADA_IDENTITY,
    admit,
    claim,
    execution,
    fail_unclaimed,
    kinds,
    recovery,
    recovery_candidate,
)
from tests.recovery.test_readonly_observation import (
    consumed,
    observation,
    observation_candidate,
    refusal_recovered,
)
from tests.support import row_counts

FP = grpc.StatusCode.FAILED_PRECONDITION


def queued_state(stack: Stack, ticket: ledger_pb2.AdmissionTicket) -> tuple[int, int]:
    request = (
        execution(stack, "reader-token")
        .GetExecutionRequest(
            execution_pb2.GetExecutionRequestRequest(
                execution_request_id=ticket.execution_request.execution_request_id
            )
        )
        .execution_request
    )
    return request.state, request.lease.generation


def refused_revoked(
    stack: Stack, engine: Engine, call: Callable[[], object], workflow: str, missing: str
) -> None:
    """RECOVERY_AUTHORITY_REVOKED, typed, naming the actor and the role; nothing written."""
    before = row_counts(engine), kinds(stack)
    error = expect_error(FP, "RECOVERY_AUTHORITY_REVOKED", call)
    assert error.metadata["actor"] == ADA_IDENTITY
    assert error.metadata["workflow"] == workflow
    assert error.metadata["missing_roles"] == missing
    assert (row_counts(engine), kinds(stack)) == before


def record(
    stack: Stack, claimed: common_pb2.ExecutionRequest, command_id: str
) -> execution_pb2.RecordCommandResponse:
    return execution(stack).RecordCommand(
        execution_pb2.RecordCommandRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=claimed.lease.generation,
            command_id=command_id,
            command_digest="sha256:" + "a" * 64,
        )
    )


def test_never_claimed_revocation_stops_claim_and_dispatch(
    stack: Stack, engine: Engine, authority: Authority
) -> None:
    ticket = admit(stack)
    fail_unclaimed(stack, ticket)
    stack.admissions(ADA).RequestInvalidReadRecovery(recovery(recovery_candidate(stack)))
    queued = queued_state(stack, ticket)
    assert queued == (common_pb2.EXECUTION_REQUEST_STATE_QUEUED, 0)
    # Revoked after the recovery committed: the claim refuses and the request stays queued.
    authority.revoke(ADA_IDENTITY, "factory_administrator")
    refused_revoked(
        stack, engine, lambda: claim(stack, ticket), "never_claimed", "factory_administrator"
    )
    assert queued_state(stack, ticket) == queued
    # Restored: the next claim succeeds under the original attempt.
    authority.grant(ADA_IDENTITY, "factory_administrator")
    claimed = claim(stack, ticket).execution_request
    assert claimed.lease.generation == 1
    # Revoked during execution: the next command is not dispatched (nothing charged).
    authority.revoke(ADA_IDENTITY, "factory_administrator")
    refused_revoked(
        stack,
        engine,
        lambda: record(stack, claimed, "cmd-after-revocation"),
        "never_claimed",
        "factory_administrator",
    )
    # The worker may still report its outcome: completing dispatches nothing new.
    execution(stack).CompleteExecutionRequest(
        execution_pb2.CompleteExecutionRequestRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=claimed.lease.generation,
        )
    )
    assert queued_state(stack, ticket)[0] == common_pb2.EXECUTION_REQUEST_STATE_COMPLETED


def test_never_claimed_commands_dispatch_while_authority_holds(
    stack: Stack, authority: Authority
) -> None:
    ticket = admit(stack)
    fail_unclaimed(stack, ticket)
    stack.admissions(ADA).RequestInvalidReadRecovery(recovery(recovery_candidate(stack)))
    claimed = claim(stack, ticket).execution_request
    receipt = record(stack, claimed, "cmd-1")
    assert receipt.charged


@pytest.mark.parametrize("role", ["factory_administrator", "execution_operator"])
def test_rejected_boundary_revocation_stops_the_claim(
    stack: Stack, engine: Engine, authority: Authority, role: str, provider: RefusingProvider
) -> None:
    ticket, _ = refusal_recovered(stack, provider)
    queued = queued_state(stack, ticket)
    assert queued[0] == common_pb2.EXECUTION_REQUEST_STATE_QUEUED
    authority.revoke(ADA_IDENTITY, role)
    refused_revoked(stack, engine, lambda: claim(stack, ticket), "rejected_boundary", role)
    assert queued_state(stack, ticket) == queued
    authority.grant(ADA_IDENTITY, role)
    assert claim(stack, ticket).execution_request.lease.generation == queued[1] + 1


@pytest.mark.parametrize("role", ["factory_administrator", "execution_operator"])
def test_readonly_observation_revocation_stops_the_claim(
    stack: Stack, engine: Engine, authority: Authority, role: str, provider: RefusingProvider
) -> None:
    ticket, sent = refusal_recovered(stack, provider)
    consumed(stack, ticket, sent)
    candidate = observation_candidate(stack)
    stack.admissions(ADA).RequestReadonlyObservationRecovery(observation(candidate))
    queued = queued_state(stack, ticket)
    assert queued[0] == common_pb2.EXECUTION_REQUEST_STATE_QUEUED
    authority.revoke(ADA_IDENTITY, role)
    # Both recoveries that queued this request name the actor; the first one found refuses.
    before = row_counts(engine), kinds(stack)
    error = expect_error(FP, "RECOVERY_AUTHORITY_REVOKED", lambda: claim(stack, ticket))
    assert error.metadata["missing_roles"] == role
    assert (row_counts(engine), kinds(stack)) == before
    assert queued_state(stack, ticket) == queued
    authority.grant(ADA_IDENTITY, role)
    assert claim(stack, ticket).execution_request.lease.generation == queued[1] + 1


def test_an_admissions_claim_re_asks_the_operators_authority(
    stack: Stack, engine: Engine, authority: Authority
) -> None:
    """Actor loss stops execution: the claim of an admission's request, and every command
    dispatch under it, re-asks the admitting operator's execution_operator role; restoring it
    lets the next claim through. An unrelated role taken away does not matter."""
    ticket = admit(stack)
    authority.revoke(ADA_IDENTITY, "factory_administrator")
    authority.revoke(ADA_IDENTITY, "execution_operator")
    before = row_counts(engine), kinds(stack)
    error = expect_error(FP, "OPERATOR_AUTHORITY_REVOKED", lambda: claim(stack, ticket))
    assert (error.metadata["actor"], error.metadata["missing_roles"]) == (
        ADA_IDENTITY,
        "execution_operator",
    )
    # Actor loss is not a refusal while entering the policy epoch: nothing is written.
    assert (row_counts(engine), kinds(stack)) == before
    authority.grant(ADA_IDENTITY, "execution_operator")
    claimed = claim(stack, ticket).execution_request
    assert claimed.lease.generation == 1
    authority.revoke(ADA_IDENTITY, "execution_operator")
    before = row_counts(engine), kinds(stack)
    expect_error(FP, "OPERATOR_AUTHORITY_REVOKED", lambda: record(stack, claimed, "cmd-1"))
    assert (row_counts(engine), kinds(stack)) == before
