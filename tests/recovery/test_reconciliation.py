"""Reconciliation of a claimed request whose owner was lost, end to end: four real services,
SQLite and PostgreSQL (ADR 0010)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import (
    common_pb2,
    execution_pb2,
    ledger_pb2,
    reconciliation_pb2,
    reconciliation_pb2_grpc,
)
from services.demo.seed import load_fixture, seed_held_run
from services.ledger.domain.verifier import VerificationProof, VerificationSubject
from services.ledger.service import Ledger
from shared.runtime.errors import DomainError
from tests.admission.conftest import Stack, submission
from tests.errors import expect_error
from tests.recovery.conftest import Authority
from tests.recovery.test_never_claimed import ADA, claim, execution, kinds
from tests.support import row_counts, whole_journal

FIXTURE = load_fixture("v1_basic")
ADMIN = "admin-token"
DIGEST = "sha256:" + "c" * 64
FP, IA, AE, PD = (
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.PERMISSION_DENIED,
)
RETRY = reconciliation_pb2.RECONCILIATION_DECISION_RETRY_STAGE
MARK = reconciliation_pb2.RECONCILIATION_DECISION_MARK_UNRESOLVED
CLAIMED = common_pb2.EXECUTION_REQUEST_STATE_CLAIMED
#: MARK_UNRESOLVED without a recorded proof of cessation releases the claim only on this (ADR 0045).
ACK: dict[str, object] = {"cessation_unproven_acknowledged": True}


class EvidenceVerifier:
    """A deployment verifier whose observations are the evidence reference itself: "stopped"
    proves everything for an hour, "stopped-briefly" for one second, "running" proves no
    cessation, "timeout" raises as a verifier that answers late would."""

    name = "evidence-test"

    def __init__(self) -> None:
        self.asked: list[VerificationSubject] = []

    def verify(self, subject: VerificationSubject) -> VerificationProof:
        self.asked.append(subject)
        reference = subject.evidence_reference
        if reference == "timeout":
            raise TimeoutError("no answer")
        stopped = reference.startswith("stopped")
        return VerificationProof(
            cessation_verified=stopped,
            exposure_within_reservation=stopped,
            effect="no_effect" if stopped else "unknown",
            valid_for_seconds=1 if reference == "stopped-briefly" else 3600,
            detail=f"observed {reference}",
        )


@pytest.fixture
def ledger(engine: Engine, authority: Authority) -> Ledger:
    return Ledger(engine, authority=authority, verifier=EvidenceVerifier())


def reconciliations(
    stack: Stack, token: str = ADMIN
) -> reconciliation_pb2_grpc.ReconciliationServiceStub:
    return reconciliation_pb2_grpc.ReconciliationServiceStub(stack.ledger.channel(token))


def claimed_request(stack: Stack, commands: int = 2) -> common_pb2.ExecutionRequest:
    """Admit run-1, claim it as wanda-worker and charge ``commands`` commands (11 -> 11+n)."""
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    candidate = stack.candidate_of("run-1")
    ticket = stack.admissions(ADA).RequestInvalidReadContinuity(submission(candidate)).ticket
    owned = claim(stack, ticket).execution_request
    for n in range(commands):
        record(stack, owned, f"cmd-new-{n}")
    return owned


def record(
    stack: Stack, request: common_pb2.ExecutionRequest, command_id: str, token: str = "worker-token"
) -> execution_pb2.RecordCommandResponse:
    return execution(stack, token).RecordCommand(
        execution_pb2.RecordCommandRequest(
            execution_request_id=request.execution_request_id,
            lease_generation=request.lease.generation,
            command_id=command_id,
            command_digest="sha256:" + "d" * 64,
        )
    )


def inspect(
    stack: Stack, request: common_pb2.ExecutionRequest, reconciliation_id: str = "rcn-1"
) -> reconciliation_pb2.ReconciliationSnapshot:
    return (
        reconciliations(stack)
        .InspectReconciliation(
            reconciliation_pb2.InspectReconciliationRequest(
                run_id="run-1",
                execution_request_id=request.execution_request_id,
                reconciliation_id=reconciliation_id,
            )
        )
        .snapshot
    )


def verify(
    stack: Stack,
    snapshot: reconciliation_pb2.ReconciliationSnapshot,
    evidence: str = "stopped",
    token: str = ADMIN,
) -> reconciliation_pb2.ReconciliationVerification:
    return (
        reconciliations(stack, token)
        .VerifyReconciliation(
            reconciliation_pb2.VerifyReconciliationRequest(
                run_id="run-1",
                execution_request_id=snapshot.execution_request.execution_request_id,
                reconciliation_id=snapshot.reconciliation_id,
                reconciliation_digest=snapshot.reconciliation_digest,
                evidence_reference=evidence,
            )
        )
        .verification
    )


def decision(
    snapshot: reconciliation_pb2.ReconciliationSnapshot, kind: int = RETRY, **overrides: object
) -> reconciliation_pb2.ReconcileExecutionRequestRequest:
    fields: dict[str, object] = {
        "run_id": "run-1",
        "execution_request_id": snapshot.execution_request.execution_request_id,
        "reconciliation_id": snapshot.reconciliation_id,
        "expected_state": snapshot.execution_request.state,
        "expected_lease_generation": snapshot.execution_request.lease.generation,
        "evidence_reference": "incident-42: node drained, process table checked",
        "decision": kind,
        "reconciliation_digest": snapshot.reconciliation_digest,
    }
    fields.update(overrides)
    return reconciliation_pb2.ReconcileExecutionRequestRequest(**fields)  # type: ignore[arg-type]


def hold_names(snapshot: reconciliation_pb2.ReconciliationSnapshot) -> set[str]:
    return {
        common_pb2.HoldReason.Name(h.reason).removeprefix("HOLD_REASON_") for h in snapshot.holds
    }


def nothing_written(
    stack: Stack, engine: Engine, code: grpc.StatusCode, reason: str, call: Callable[[], object]
) -> DomainError:
    before = row_counts(engine), kinds(stack)
    error = expect_error(code, reason, call)
    assert (row_counts(engine), kinds(stack)) == before
    return error


def usage(stack: Stack) -> int:
    return int(
        execution(stack, "reader-token")
        .GetCommandUsage(execution_pb2.GetCommandUsageRequest(run_id="run-1"))
        .usage.used
    )


def test_retry_stage_fences_the_old_owner_and_queues_a_new_request(
    stack: Stack, engine: Engine
) -> None:
    owned = claimed_request(stack)
    assert usage(stack) == 13
    snapshot = inspect(stack, owned)
    assert [c.lease_generation for c in snapshot.claims] == [1]
    assert snapshot.commands.used == 13 and list(snapshot.commands.charged_under_request) == [
        "cmd-new-0",
        "cmd-new-1",
    ]
    assert "RECONCILIATION_NOT_VERIFIED" in hold_names(snapshot)
    assert [a.action for a in snapshot.handoff.permitted_next_actions] == [
        "mark_unresolved",
        "verify_reconciliation",
    ]
    admin = reconciliations(stack)
    # without a recorded verification a retry is refused, and a refusing verifier records nothing
    refused = nothing_written(
        stack,
        engine,
        FP,
        "RECONCILIATION_UNRESOLVED",
        lambda: admin.ReconcileExecutionRequest(decision(snapshot)),
    )
    # the refusal carries the check's handoff: what the snapshot permitted, still permitted
    handoff = refused.detail(common_pb2.HandoffPayload)
    assert handoff is not None
    assert [a.action for a in handoff.permitted_next_actions] == [
        "mark_unresolved",
        "verify_reconciliation",
    ]
    assert [b.execution_request_id for b in handoff.bound_requests] == [owned.execution_request_id]
    assert handoff.unresolved_alternatives[0].subject == owned.execution_request_id
    for evidence in ("running", "timeout"):
        nothing_written(
            stack,
            engine,
            FP,
            "RECONCILIATION_NOT_VERIFIED",
            lambda evidence=evidence: verify(stack, snapshot, evidence),
        )
    verification = verify(stack, snapshot)
    assert (
        verification.cessation_verified
        and verification.effect == reconciliation_pb2.VERIFIED_EFFECT_NO_EFFECT
    )
    again = inspect(stack, owned)
    assert (
        again.reconciliation_digest == snapshot.reconciliation_digest
    )  # verifications not digested
    assert not again.holds and [a.action for a in again.handoff.permitted_next_actions] == [
        "retry_stage"
    ]

    done = admin.ReconcileExecutionRequest(decision(snapshot))
    saved = done.reconciliation
    assert done.created
    assert saved.reconciled_request.state == common_pb2.EXECUTION_REQUEST_STATE_RECONCILED
    retry = saved.retry_request
    assert retry.execution_request_id != owned.execution_request_id
    assert (retry.attempt_id, retry.request_id, retry.checkpoint_digest) == (
        owned.attempt_id,
        owned.request_id,
        owned.checkpoint_digest,
    )
    assert retry.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED and retry.lease.generation == 0
    # The retry's lease asks for the interrupted one's length; the bounds say what won.
    bounds = saved.lease_bounds
    assert bounds.requested_seconds == owned.lease.seconds
    assert bounds.granted_seconds == retry.lease.seconds
    assert bounds.limited_by != common_pb2.LEASE_BOUND_UNSPECIFIED
    assert [b.state for b in saved.handoff.bound_requests] == ["reconciled"]
    assert [a.action for a in saved.handoff.permitted_next_actions] == ["read_reconciliation"]
    assert not saved.handoff.unresolved_alternatives  # cessation was verified
    assert (
        saved.fenced_lease_generation == 1
        and saved.verification_sequence == verification.journal_sequence
    )
    assert usage(stack) == 13  # prior reservations stay charged, nothing refunded
    assert kinds(stack)[-3:] == [
        "reconciliation_verification",
        "reconciliation_settlement",
        "request_event",
    ]

    # the old owner's late writes are fenced for ever
    old = execution(stack)
    for late in (
        lambda: old.CompleteExecutionRequest(
            execution_pb2.CompleteExecutionRequestRequest(
                execution_request_id=owned.execution_request_id, lease_generation=1
            )
        ),
        lambda: old.FailExecutionRequest(
            execution_pb2.FailExecutionRequestRequest(
                execution_request_id=owned.execution_request_id, lease_generation=1, reason="late"
            )
        ),
        lambda: record(stack, owned, "cmd-late"),
    ):
        nothing_written(stack, engine, FP, "LEASE_FENCED_BY_RECONCILIATION", late)

    # an identical repeat reads back; another decision or different content is refused
    repeat = admin.ReconcileExecutionRequest(decision(snapshot))
    assert not repeat.created and repeat.reconciliation == saved
    nothing_written(
        stack,
        engine,
        AE,
        "RECONCILIATION_ID_CONFLICT",
        lambda: admin.ReconcileExecutionRequest(decision(snapshot, MARK)),
    )
    nothing_written(
        stack,
        engine,
        FP,
        "RECONCILIATION_STATE_CHANGED",
        lambda: admin.ReconcileExecutionRequest(
            decision(snapshot, MARK, reconciliation_id="rcn-2")
        ),
    )
    # prior results stay readable: the old request's claim and commands are still in its snapshot
    fresh = inspect(stack, owned, "rcn-3")
    assert fresh.execution_request.state == common_pb2.EXECUTION_REQUEST_STATE_RECONCILED
    assert [c.lease_generation for c in fresh.claims] == [1]
    assert list(fresh.commands.charged_under_request) == ["cmd-new-0", "cmd-new-1"]
    assert [r.execution_request_id for r in fresh.request_chain] == [
        owned.execution_request_id,
        retry.execution_request_id,
    ]
    nothing_written(
        stack,
        engine,
        FP,
        "RECONCILIATION_UNRESOLVED",
        lambda: admin.ReconcileExecutionRequest(decision(fresh, MARK)),
    )
    read = reconciliations(stack, "reader-token").GetReconciliation(
        reconciliation_pb2.GetReconciliationRequest(
            run_id="run-1", execution_request_id=owned.execution_request_id
        )
    )
    assert read.reconciliation == saved

    # a new worker claims the retry; the old owner's generation cannot complete it
    run = stack.ledger_stub("reader-token").GetRun(ledger_pb2.GetRunRequest(run_id="run-1")).run
    new = (
        execution(stack, "worker2-token")
        .ClaimExecutionRequest(
            execution_pb2.ClaimExecutionRequestRequest(
                execution_request_id=retry.execution_request_id,
                attempt_id=owned.attempt_id,
                source_revision=run.source_revision,
                configuration_digest=run.configuration_digest,
                source_profile=run.source_profile,
            )
        )
        .execution_request
    )
    assert new.lease.generation == 1 and new.owner == "walt-worker"
    nothing_written(
        stack,
        engine,
        PD,
        "NOT_LEASE_OWNER",
        lambda: old.CompleteExecutionRequest(
            execution_pb2.CompleteExecutionRequestRequest(
                execution_request_id=retry.execution_request_id, lease_generation=1
            )
        ),
    )
    assert record(stack, new, "cmd-retry-0", "worker2-token").usage.used == 14


def test_mark_unresolved_is_terminal_with_the_handoff(stack: Stack, engine: Engine) -> None:
    owned = claimed_request(stack, commands=1)
    snapshot = inspect(stack, owned)
    done = (
        reconciliations(stack)
        .ReconcileExecutionRequest(decision(snapshot, MARK, **ACK))
        .reconciliation
    )
    assert done.reconciled_request.state == common_pb2.EXECUTION_REQUEST_STATE_UNRESOLVED
    assert not done.HasField("retry_request") and done.verification_sequence == 0
    assert not done.HasField("lease_bounds")  # no lease was granted
    # The handoff is the post-decision state's: the request is unresolved, the only permitted
    # action reads the decision back, and nothing speaks of a candidate or acknowledgements.
    assert [b.state for b in done.handoff.bound_requests] == ["unresolved"]
    # nothing proved the owner stopped: the decision says the claim went on the acknowledgement
    assert done.cessation_unproven_acknowledged and done.verification_sequence == 0
    assert settlement_payload(stack, done)["cessation"] == "unproven_acknowledged"
    # what blocks it now is the spent decision, not a claim it never had (issue 47)
    assert [o.blocked_by for o in done.handoff.remaining_obligations] == ["RECOVERY_SPENT"]
    permitted = done.handoff.permitted_next_actions
    assert [a.action for a in permitted] == ["read_reconciliation"]
    assert not any(
        "candidate" in a.description or "acknowledge" in a.description for a in permitted
    )
    unresolved = {u.subject: list(u.alternatives) for u in done.handoff.unresolved_alternatives}
    assert unresolved == {owned.execution_request_id: ["failed", "committed", "in_flight"]}
    assert done.handoff.consumed_resources.commands_used == 12
    listed = execution(stack, "reader-token").ListExecutionRequests(
        execution_pb2.ListExecutionRequestsRequest(run_id="run-1")
    )
    assert [r.execution_request_id for r in listed.execution_requests] == [
        owned.execution_request_id
    ]
    nothing_written(
        stack,
        engine,
        FP,
        "LEASE_FENCED_BY_RECONCILIATION",
        lambda: record(stack, owned, "cmd-late"),
    )


def settlement_payload(
    stack: Stack, decided: reconciliation_pb2.Reconciliation
) -> dict[str, object]:
    (entry,) = [
        e
        for e in whole_journal(stack.ledger_stub("reader-token"), decided.run_id)
        if e.sequence == decided.settlement_sequence
    ]
    payload: dict[str, object] = json.loads(entry.payload_json)
    return payload


def test_mark_unresolved_releases_the_claim_only_after_verified_cessation(
    stack: Stack, engine: Engine
) -> None:
    """Spec 002: the active claim is released only after verified cessation. Marking a claimed
    request unresolved without a recorded proof, and without the administrator's acknowledgement
    that cessation is unproven, is refused and writes nothing: the claim and its pending slot
    stay, and its owner still writes under its lease (ADR 0045)."""
    owned = claimed_request(stack, commands=0)
    snapshot = inspect(stack, owned)
    submit = reconciliations(stack).ReconcileExecutionRequest
    error = nothing_written(
        stack, engine, FP, "RECONCILIATION_UNRESOLVED", lambda: submit(decision(snapshot, MARK))
    )
    assert error.metadata["holds"] == "RECONCILIATION_NOT_VERIFIED"
    (violation,) = error.precondition_violations
    assert "cessation of the prior owner is not verified" in violation.description
    # the handoff offers the two ways on: verify, or mark unresolved on the acknowledgement
    permitted = {a.action: a.description for a in snapshot.handoff.permitted_next_actions}
    assert "cessation_unproven_acknowledged" in permitted["mark_unresolved"]
    assert "verify_reconciliation" in permitted
    still = execution(stack, "reader-token").GetExecutionRequest(
        execution_pb2.GetExecutionRequestRequest(execution_request_id=owned.execution_request_id)
    )
    assert still.execution_request.state == CLAIMED
    record(stack, owned, "cmd-owner-still-runs")  # the claim holds: its owner may still write
    # once a verifier proves cessation, marking it unresolved needs no acknowledgement
    snapshot = inspect(stack, owned)
    proof = verify(stack, snapshot, "stopped")
    done = submit(decision(snapshot, MARK)).reconciliation
    assert done.reconciled_request.state == common_pb2.EXECUTION_REQUEST_STATE_UNRESOLVED
    assert done.verification_sequence == proof.journal_sequence
    assert not done.cessation_unproven_acknowledged
    assert settlement_payload(stack, done)["cessation"] == "verified"


def test_refusals_write_nothing(stack: Stack, engine: Engine, authority: Authority) -> None:
    owned = claimed_request(stack, commands=0)
    snapshot = inspect(stack, owned)
    admin = reconciliations(stack)
    submit = admin.ReconcileExecutionRequest
    for bad in (
        decision(snapshot, reconciliation_pb2.RECONCILIATION_DECISION_UNSPECIFIED),
        decision(snapshot, MARK, evidence_reference="x" * 1025),
        decision(snapshot, MARK, evidence_reference=""),
        decision(snapshot, MARK, reconciliation_digest="not-a-digest"),
        decision(snapshot, MARK, expected_state=common_pb2.EXECUTION_REQUEST_STATE_UNSPECIFIED),
        decision(snapshot, RETRY, **ACK),  # a retry needs the proof, never an acknowledgement
    ):
        nothing_written(stack, engine, IA, "RECONCILIATION_INVALID", lambda bad=bad: submit(bad))
    nothing_written(
        stack,
        engine,
        IA,
        "FIELD_INVALID",
        lambda: submit(decision(snapshot, MARK, reconciliation_id="x" * 129)),
    )
    nothing_written(
        stack,
        engine,
        FP,
        "RECONCILIATION_DIGEST_STALE",
        lambda: submit(decision(snapshot, MARK, reconciliation_digest=DIGEST)),
    )
    nothing_written(
        stack,
        engine,
        FP,
        "RECONCILIATION_STATE_CHANGED",
        lambda: submit(decision(snapshot, MARK, expected_lease_generation=2)),
    )
    nothing_written(
        stack,
        engine,
        PD,
        "ROLE_REQUIRED",
        lambda: reconciliations(stack, "operator-token").ReconcileExecutionRequest(
            decision(snapshot, MARK)
        ),
    )
    # a late write of the old owner after the inspection moves the digest: fresh review needed
    record(stack, owned, "cmd-after-inspection")
    nothing_written(
        stack, engine, FP, "RECONCILIATION_DIGEST_STALE", lambda: submit(decision(snapshot, MARK))
    )
    nothing_written(
        stack, engine, FP, "RECONCILIATION_DIGEST_STALE", lambda: verify(stack, snapshot)
    )
    snapshot = inspect(stack, owned)
    # authority is asked again inside the transaction
    authority.revoke("alice-admin", "factory_administrator")
    error = nothing_written(
        stack,
        engine,
        FP,
        "RECONCILIATION_UNRESOLVED",
        lambda: submit(decision(snapshot, MARK, **ACK)),
    )
    assert error.metadata["holds"] == "AUTHORITY_MISSING"


def test_an_expired_or_other_verification_proves_nothing(stack: Stack, engine: Engine) -> None:
    owned = claimed_request(stack, commands=0)
    snapshot = inspect(stack, owned)
    verify(stack, snapshot, "stopped-briefly")
    other = inspect(stack, owned, "rcn-other")
    verify(stack, other, "stopped")  # recorded for another reconciliation id
    time.sleep(1.2)
    error = nothing_written(
        stack,
        engine,
        FP,
        "RECONCILIATION_UNRESOLVED",
        lambda: reconciliations(stack).ReconcileExecutionRequest(decision(snapshot)),
    )
    assert error.metadata["holds"] == "RECONCILIATION_NOT_VERIFIED"


def test_an_exhausted_budget_still_blocks_the_retry(stack: Stack, engine: Engine) -> None:
    owned = claimed_request(stack, commands=11)
    assert usage(stack) == 22
    snapshot = inspect(stack, owned)
    verify(stack, snapshot)
    error = nothing_written(
        stack,
        engine,
        FP,
        "RECONCILIATION_UNRESOLVED",
        lambda: reconciliations(stack).ReconcileExecutionRequest(decision(snapshot)),
    )
    assert error.metadata["holds"] == "BUDGET_EXHAUSTED"


def test_a_queued_request_is_not_reconciled(stack: Stack, engine: Engine) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    ticket = (
        stack.admissions(ADA)
        .RequestInvalidReadContinuity(submission(stack.candidate_of("run-1")))
        .ticket
    )
    snapshot = inspect(stack, ticket.execution_request)
    error = nothing_written(
        stack,
        engine,
        FP,
        "RECONCILIATION_UNRESOLVED",
        lambda: reconciliations(stack).ReconcileExecutionRequest(decision(snapshot, MARK)),
    )
    assert "REQUEST_NOT_CLAIMED" in error.metadata["holds"]
    error = nothing_written(
        stack, engine, FP, "RECONCILIATION_UNRESOLVED", lambda: verify(stack, snapshot)
    )
    assert error.metadata["holds"] == "REQUEST_NOT_CLAIMED"
