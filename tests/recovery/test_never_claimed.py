"""The never-claimed failed-request recovery end to end: four real services, SQLite and
PostgreSQL (part A of the recovery workflows)."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import (
    admission_pb2,
    candidate_pb2,
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    ledger_pb2,
)
from services.demo.seed import load_fixture, seed_held_run
from shared.runtime.errors import DomainError
from tests.admission.conftest import Stack, submission
from tests.errors import expect_error
from tests.recovery.conftest import Authority, race_two_ids
from tests.support import row_counts, whole_journal

FIXTURE = load_fixture("v1_basic")
ADA = "admin-operator-token"  # the ticket's original operator, also a factory administrator
ADA_IDENTITY = "ada-admin-operator"


def kinds(stack: Stack, run_id: str = "run-1") -> list[str]:
    entries = whole_journal(stack.ledger_stub("reader-token"), run_id)
    return [
        common_pb2.JournalEntryKind.Name(e.kind).removeprefix("JOURNAL_ENTRY_KIND_").lower()
        for e in entries
    ]


def execution(stack: Stack, token: str = "worker-token") -> execution_pb2_grpc.ExecutionServiceStub:
    return execution_pb2_grpc.ExecutionServiceStub(stack.ledger.channel(token))


def admit(stack: Stack) -> ledger_pb2.AdmissionTicket:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    candidate = stack.candidate_of("run-1")
    assert candidate.eligible, candidate.holds
    return stack.admissions(ADA).RequestInvalidReadContinuity(submission(candidate)).ticket


def fail_unclaimed(stack: Stack, ticket: ledger_pb2.AdmissionTicket) -> None:
    execution(stack, "admin-token").FailUnclaimedExecutionRequest(
        execution_pb2.FailUnclaimedExecutionRequestRequest(
            execution_request_id=ticket.execution_request.execution_request_id,
            reason="dispatch_refused",
        )
    )


def claim(
    stack: Stack, ticket: ledger_pb2.AdmissionTicket
) -> execution_pb2.ClaimExecutionRequestResponse:
    run = stack.ledger_stub("reader-token").GetRun(ledger_pb2.GetRunRequest(run_id="run-1")).run
    return execution(stack).ClaimExecutionRequest(
        execution_pb2.ClaimExecutionRequestRequest(
            execution_request_id=ticket.execution_request.execution_request_id,
            attempt_id=run.attempt_id,
            source_revision=run.source_revision,
            configuration_digest=run.configuration_digest,
            source_profile=run.source_profile,
        )
    )


def recovery_candidate(stack: Stack, token: str = ADA) -> candidate_pb2.RecoveryCandidate:
    return (
        stack.candidates(token)
        .GetInvalidReadRecoveryCandidate(
            candidate_pb2.GetInvalidReadRecoveryCandidateRequest(run_id="run-1", request_id="req-1")
        )
        .candidate
    )


def recovery(
    candidate: candidate_pb2.RecoveryCandidate, recovery_id: str = "rec-1", **overrides: object
) -> admission_pb2.RequestInvalidReadRecoveryRequest:
    fields: dict[str, object] = {
        "run_id": "run-1",
        "request_id": "req-1",
        "recovery_id": recovery_id,
        "candidate_digest": candidate.candidate_digest,
        "valid_for_seconds": 900,
        "acknowledge_never_claimed": True,
        "acknowledge_same_request_and_attempt": True,
        "acknowledge_budgets_charged": True,
        "acknowledge_same_attempt_lease": True,
    }
    fields.update(overrides)
    return admission_pb2.RequestInvalidReadRecoveryRequest(**fields)  # type: ignore[arg-type]


def holds(candidate: candidate_pb2.RecoveryCandidate) -> set[str]:
    return {
        common_pb2.HoldReason.Name(h.reason).removeprefix("HOLD_REASON_") for h in candidate.holds
    }


FP, AE, IA = (
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.INVALID_ARGUMENT,
)


def refused_with_nothing_written(
    stack: Stack, engine: Engine, call: Callable[[], object], reason: str
) -> DomainError:
    before = row_counts(engine), kinds(stack)
    # the requests, not the answer: its ledger_time is the time of each read
    queued = (
        execution(stack, "reader-token")
        .ListExecutionRequests(execution_pb2.ListExecutionRequestsRequest(run_id="run-1"))
        .execution_requests
    )
    code = {
        "RECOVERY_ID_CONFLICT": AE,
        "RECOVERY_ID_OWNED_BY_ANOTHER_IDENTITY": AE,
        "RECOVERY_ALREADY_SPENT": AE,
    }.get(
        reason,
        IA
        if reason in ("ACKNOWLEDGEMENT_REQUIRED", "FIELD_INVALID", "CORRECTIVE_PROVIDER_INVALID")
        else FP,
    )
    error = expect_error(code, reason, call)
    assert (row_counts(engine), kinds(stack)) == before
    assert (
        execution(stack, "reader-token")
        .ListExecutionRequests(execution_pb2.ListExecutionRequestsRequest(run_id="run-1"))
        .execution_requests
        == queued
    )
    return error


def test_recover_read_back_resubmit_and_a_different_action_refused(
    stack: Stack, engine: Engine
) -> None:
    ticket = admit(stack)
    fail_unclaimed(stack, ticket)
    candidate = recovery_candidate(stack)
    assert candidate.eligible, candidate.holds
    assert [a.action for a in candidate.handoff.permitted_next_actions] == [
        "request_invalid_read_recovery"
    ]
    assert candidate.handoff.bound_requests[0].failed_unclaimed
    counts = row_counts(engine)
    first = stack.admissions(ADA).RequestInvalidReadRecovery(recovery(candidate))
    assert first.created
    outcome = first.outcome
    assert outcome.workflow == common_pb2.RECOVERY_WORKFLOW_NEVER_CLAIMED
    assert outcome.actor == ADA_IDENTITY
    requeued = outcome.execution_request
    # The same request, attempt and checkpoint, queued again at generation 0 with a new lease.
    assert requeued.execution_request_id == ticket.execution_request.execution_request_id
    assert requeued.attempt_id == ticket.execution_request.attempt_id
    assert requeued.checkpoint_digest == ticket.execution_request.checkpoint_digest
    assert requeued.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED
    assert requeued.lease.generation == 0 and 0 < requeued.lease.seconds <= 900
    # The outcome explains the new lease: every bound the lease rule applied and which won.
    bounds = outcome.lease_bounds
    assert (bounds.requested_seconds, bounds.granted_seconds) == (900, requeued.lease.seconds)
    assert bounds.maximum_seconds == 7200 and bounds.limited_by != 0
    # Everything is preserved; a witness and a request event are appended.
    journal = kinds(stack)
    assert journal[-4:] == [
        "ownership_claim",
        "request_failed",
        "recovery_witness",
        "request_event",
    ]
    assert journal.count("migration_settlement") == 1
    after = row_counts(engine)
    assert after["recovery_actions"] == counts["recovery_actions"] + 1
    assert after["admission_tickets"] == counts["admission_tickets"]
    assert after["execution_requests"] == counts["execution_requests"]
    # A lost response: read it back; an identical resubmit writes nothing.
    read_back = stack.admissions("reader-token").GetInvalidReadRecovery(
        admission_pb2.GetInvalidReadRecoveryRequest(run_id="run-1", request_id="req-1")
    )
    assert read_back.outcome == outcome
    again = stack.admissions(ADA).RequestInvalidReadRecovery(recovery(candidate))
    assert not again.created and again.outcome == outcome
    assert row_counts(engine) == after
    # A different action can never replace the witness; the answer says the request's one
    # recovery is spent, not that rec-2 (never submitted) was submitted with other content.
    spent = refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestInvalidReadRecovery(recovery(candidate, "rec-2")),
        "RECOVERY_ALREADY_SPENT",
    )
    assert spent.metadata == {"recovery_id": "rec-2", "spent_by_recovery_id": "rec-1"}
    assert "already submitted" not in spent.message and "never submitted" in spent.message
    # the refusal carries the handoff of the state it met: the one action is spent (ADR 0046)
    handoff = spent.detail(common_pb2.HandoffPayload)
    assert handoff is not None
    assert "read_recovery" in {a.action for a in handoff.permitted_next_actions}
    assert [b.request_id for b in handoff.bound_requests] == ["req-1"]
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions("admin-token").RequestInvalidReadRecovery(recovery(candidate)),
        "RECOVERY_ID_OWNED_BY_ANOTHER_IDENTITY",
    )
    # The recovered request is queued: a worker may claim it now, under the original attempt.
    assert claim(stack, ticket).execution_request.lease.generation == 1


def test_a_queued_request_has_not_failed_and_stays_held(stack: Stack, engine: Engine) -> None:
    admit(stack)
    candidate = recovery_candidate(stack)
    assert not candidate.eligible and "CLAIM_OUTSTANDING" in holds(candidate)
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestInvalidReadRecovery(recovery(candidate)),
        "CANDIDATE_HELD",
    )


@pytest.mark.parametrize("then_fail", [False, True])
def test_a_claimed_request_stays_held(stack: Stack, engine: Engine, then_fail: bool) -> None:
    ticket = admit(stack)
    claimed = claim(stack, ticket).execution_request
    if then_fail:
        execution(stack).FailExecutionRequest(
            execution_pb2.FailExecutionRequestRequest(
                execution_request_id=claimed.execution_request_id,
                lease_generation=claimed.lease.generation,
                reason="provider_error",
            )
        )
    candidate = recovery_candidate(stack)
    assert not candidate.eligible and "WORKER_CLAIMED" in holds(candidate)
    assert next(u.alternatives for u in candidate.handoff.unresolved_alternatives) == [
        "failed",
        "committed",
        "in_flight",
    ]
    assert "request_invalid_read_recovery" not in {
        a.action for a in candidate.handoff.permitted_next_actions
    }
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestInvalidReadRecovery(recovery(candidate)),
        "CANDIDATE_HELD",
    )


def test_a_startup_annotation_is_allowed_unrelated_activity_holds(stack: Stack) -> None:
    ticket = admit(stack)
    fail_unclaimed(stack, ticket)
    writer = stack.ledger_stub()
    head = recovery_candidate(stack).journal_head.hash
    annotated = writer.AppendJournalEntry(
        ledger_pb2.AppendJournalEntryRequest(
            run_id="run-1",
            expected_head_hash=head,
            kind=common_pb2.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
            payload_json='{"annotation":"worker pool restarted"}',
        )
    )
    assert recovery_candidate(stack).eligible
    writer.AppendJournalEntry(
        ledger_pb2.AppendJournalEntryRequest(
            run_id="run-1",
            expected_head_hash=annotated.entry.hash,
            kind=common_pb2.JOURNAL_ENTRY_KIND_RUN_HELD,
            payload_json='{"reason":"operator hold"}',
        )
    )
    candidate = recovery_candidate(stack)
    assert not candidate.eligible and "UNACCOUNTED_EFFECTS" in holds(candidate)


def test_only_the_original_operator_with_current_authority_recovers(
    stack: Stack, engine: Engine, authority: Authority
) -> None:
    ticket = admit(stack)
    fail_unclaimed(stack, ticket)
    # Another administrator sees the authority hold and cannot commit.
    other = recovery_candidate(stack, "admin-token")
    assert holds(other) == {"AUTHORITY_MISSING"}
    candidate = recovery_candidate(stack)
    assert candidate.eligible and candidate.candidate_digest == other.candidate_digest
    error = refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions("admin-token").RequestInvalidReadRecovery(recovery(candidate)),
        "RECOVERY_UNRESOLVED",
    )
    assert "AUTHORITY_MISSING" in error.metadata["holds"]
    assert_carries_handoff(error, "obtain_authority")
    # Authority revoked between the candidate and the submission: the commit re-checks it.
    authority.revoke(ADA_IDENTITY, "factory_administrator")
    error = refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestInvalidReadRecovery(recovery(candidate)),
        "RECOVERY_UNRESOLVED",
    )
    assert "AUTHORITY_MISSING" in error.metadata["holds"]
    # The ledger's check refused the commit; admission relays its handoff unchanged.
    assert_carries_handoff(error, "obtain_authority")


def assert_carries_handoff(error: DomainError, action: str) -> common_pb2.HandoffPayload:
    """The refusal carries the handoff payload as a status detail: the bound request, the
    obligation it blocks and what the operator may do next."""
    handoff = error.detail(common_pb2.HandoffPayload)
    assert handoff is not None, "the refusal carries no handoff"
    assert [b.request_id for b in handoff.bound_requests] == ["req-1"]
    assert "AUTHORITY_MISSING" in handoff.remaining_obligations[0].blocked_by
    assert action in [a.action for a in handoff.permitted_next_actions]
    assert handoff.consumed_resources.command_limit > 0
    return handoff


def test_input_stale_digest_and_policy_refusals_write_nothing(stack: Stack, engine: Engine) -> None:
    ticket = admit(stack)
    fail_unclaimed(stack, ticket)
    candidate = recovery_candidate(stack)
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestInvalidReadRecovery(
            recovery(candidate, acknowledge_never_claimed=False)
        ),
        "ACKNOWLEDGEMENT_REQUIRED",
    )
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestInvalidReadRecovery(
            recovery(candidate, valid_for_seconds=7201)
        ),
        "FIELD_INVALID",
    )
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestInvalidReadRecovery(
            recovery(candidate, candidate_digest="sha256:" + "0" * 64)
        ),
        "CANDIDATE_DIGEST_STALE",
    )
    expect_error(
        grpc.StatusCode.PERMISSION_DENIED,
        "ROLE_REQUIRED",
        lambda: stack.admissions("operator-token").RequestInvalidReadRecovery(recovery(candidate)),
    )
    stack.set_policy(enabled=False)
    disabled = recovery_candidate(stack)
    assert "POLICY_DISABLED" in holds(disabled)
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestInvalidReadRecovery(recovery(candidate)),
        "CANDIDATE_DIGEST_STALE",
    )
    expect_error(
        grpc.StatusCode.NOT_FOUND,
        "RECOVERY_NOT_FOUND",
        lambda: stack.admissions("reader-token").GetInvalidReadRecovery(
            admission_pb2.GetInvalidReadRecoveryRequest(run_id="run-1", request_id="req-1")
        ),
    )


def test_two_recovery_ids_race_on_one_request_exactly_one_wins(stack: Stack) -> None:
    ticket = admit(stack)
    fail_unclaimed(stack, ticket)
    candidate = recovery_candidate(stack)
    won, lost = race_two_ids(
        lambda action_id: stack.admissions(ADA).RequestInvalidReadRecovery(
            recovery(candidate, action_id)
        ),
        "rec",
    )
    assert all(isinstance(r, admission_pb2.RequestInvalidReadRecoveryResponse) for r in won)
    assert len(won) == 1 and won[0].created
    assert lost == ["RECOVERY_ALREADY_SPENT"]
    assert kinds(stack).count("recovery_witness") == 1


def test_the_requeued_request_counts_against_the_pending_cap(stack: Stack, engine: Engine) -> None:
    ticket = admit(stack)
    fail_unclaimed(stack, ticket)
    stack.set_policy(pending_ticket_limit=1)
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-2")
    other = stack.candidate_of("run-2")
    stack.admissions(ADA).RequestInvalidReadContinuity(submission(other, "req-2"))
    candidate = recovery_candidate(stack)
    assert candidate.eligible  # the cap is a queue bound, judged by the commit
    before = row_counts(engine), kinds(stack)
    expect_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "PENDING_TICKET_LIMIT",
        lambda: stack.admissions(ADA).RequestInvalidReadRecovery(recovery(candidate)),
    )
    assert (row_counts(engine), kinds(stack)) == before


def test_a_claimed_request_cannot_be_failed_as_unclaimed(stack: Stack, engine: Engine) -> None:
    ticket = admit(stack)
    claim(stack, ticket)
    refused = refused_with_nothing_written(
        stack, engine, lambda: fail_unclaimed(stack, ticket), "EXECUTION_REQUEST_NOT_QUEUED"
    )
    assert refused.metadata["state"] == "claimed"
