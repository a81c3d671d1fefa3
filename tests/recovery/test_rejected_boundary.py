"""The provider request refused before admission (rejected-boundary recovery) end to end: four
real services, SQLite and PostgreSQL (part B of the recovery workflows).

The worker's first provider request is the real SDK's, sent to a loopback provider that refuses
it; the retained ``model_request_sent`` describes the bytes that provider received, and the
candidate reproduces the request through reconstruction's sealed transport to compare."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import admission_pb2, candidate_pb2, common_pb2, execution_pb2, ledger_pb2
from services.demo.provider import RefusingProvider, SentRequest, send_refused
from services.demo.seed import seed_held_run
from shared.continuity.canonical import sha256_digest
from shared.continuity.recovery.rejected_boundary.custody import ReviewedRejection
from shared.contract.recovery_proto import reviewed_rejection_to_proto
from tests.admission.conftest import Stack
from tests.admission.conftest import submission as continuity
from tests.errors import expect_error
from tests.recovery.conftest import Authority, race_two_ids
from tests.recovery.test_never_claimed import (
    ADA,
    ADA_IDENTITY,
    FIXTURE,
    admit,
    claim,
    execution,
    fail_unclaimed,
    holds,
    kinds,
    refused_with_nothing_written,
)
from tests.support import row_counts, whole_journal

#: The model of the fixture's checkpoint, so of the request the real SDK sends.
MODEL, PRINCIPAL = "gpt-4o", "svc-forge"


def head_hash(stack: Stack) -> str:
    entries = whole_journal(stack.ledger_stub("reader-token"), "run-1")
    return entries[-1].hash


def append(
    stack: Stack, kind: int, payload: dict[str, object], token: str = "writer-token"
) -> None:
    stack.ledger_stub(token).AppendJournalEntry(
        ledger_pb2.AppendJournalEntryRequest(
            run_id="run-1",
            expected_head_hash=head_hash(stack),
            kind=kind,  # type: ignore[arg-type]
            payload_json=json.dumps(payload),
        )
    )


def refused_at_provider(
    stack: Stack,
    ticket: ledger_pb2.AdmissionTicket,
    provider: RefusingProvider,
    alter: Callable[[SentRequest], dict[str, object]] | None = None,
) -> SentRequest:
    """A worker claims, sends the first provider request through the real SDK to ``provider``
    (which refuses it), retains it under its lease (``alter`` overrides entry fields) and
    fails."""
    claimed = claim(stack, ticket).execution_request
    derived = (
        stack.ledger_stub("reader-token")
        .GetBlob(ledger_pb2.GetBlobRequest(digest=claimed.checkpoint_digest))
        .content
    )
    sent = send_refused(derived, provider)
    entry = sent.model_request_sent(
        "req-1", claimed.execution_request_id, PRINCIPAL, lease_generation=claimed.lease.generation
    )
    if alter is not None:
        entry.update(alter(sent))
    append(stack, common_pb2.JOURNAL_ENTRY_KIND_MODEL_REQUEST_SENT, entry, "worker-token")
    execution(stack).FailExecutionRequest(
        execution_pb2.FailExecutionRequestRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=claimed.lease.generation,
            reason="provider_rejected_request",
        )
    )
    return sent


def document(fields: dict[str, object]) -> bytes:
    return json.dumps(fields, sort_keys=True).encode()


def store(stack: Stack, fields: dict[str, object]) -> str:
    """Store a JSON document as a blob; its digest."""
    content = document(fields)
    return (
        stack.ledger_stub()
        .PutBlob(ledger_pb2.PutBlobRequest(content=content, media_type="application/json"))
        .digest
    )


EPOCH, EXECUTABLE = "epoch-7", "forge-worker@sha256:1"


def report(stack: Stack, kind: str, **overrides: object) -> str:
    """A stored report made for the reviewed source revision, executable and provider epoch."""
    run = stack.ledger_stub("reader-token").GetRun(ledger_pb2.GetRunRequest(run_id="run-1")).run
    facts = {
        "kind": kind,
        "source_revision": run.source_revision,
        "executable_identity": EXECUTABLE,
        "provider_epoch": EPOCH,
    }
    return store(stack, {**facts, **overrides})


#: The corrected provider configuration document; ``review`` stores it with the reports.
CORRECTIVE_FIELDS: dict[str, object] = {
    "kind": "corrective_provider_configuration",
    "provider_epoch": "epoch-8",
    "replaces_provider_epoch": EPOCH,
    "model": MODEL,
}
CORRECTIVE = common_pb2.CorrectiveProviderConfigurationV1(
    provider_epoch="epoch-8", configuration_digest=sha256_digest(document(CORRECTIVE_FIELDS))
)


def review(stack: Stack, sent: SentRequest | None = None, **overrides: object) -> ReviewedRejection:
    """The administrator's review, its two reports and the corrective configuration stored."""
    assert store(stack, CORRECTIVE_FIELDS) == CORRECTIVE.configuration_digest
    reports = [
        report(stack, kind) for kind in ("source_validator_report", "executable_probe_report")
    ]
    run = stack.ledger_stub("reader-token").GetRun(ledger_pb2.GetRunRequest(run_id="run-1")).run
    request = sent.request if sent is not None else None
    reviewed = ReviewedRejection(
        provider_epoch=EPOCH,
        wire_digest=request.wire_digest if request else sha256_digest(b"never sent"),
        wire_length=request.wire_length if request else 10,
        endpoint=sent.endpoint if sent else "http://127.0.0.1:1/v1/chat/completions",
        principal=PRINCIPAL,
        model=request.model if request else MODEL,
        source_revision=run.source_revision,
        executable_identity=EXECUTABLE,
        source_validator_report_digest=reports[0],
        executable_probe_report_digest=reports[1],
        admissions=0,
        jobs=0,
        provider_dispatches=0,
        tool_callbacks=0,
    )
    return replace(reviewed, **overrides)  # type: ignore[arg-type]


def candidate_of(
    stack: Stack, reviewed: ReviewedRejection, token: str = ADA
) -> candidate_pb2.RecoveryCandidate:
    return (
        stack.candidates(token)
        .GetRejectedBoundaryCandidate(
            candidate_pb2.GetRejectedBoundaryCandidateRequest(
                run_id="run-1",
                request_id="req-1",
                reviewed_rejection=reviewed_rejection_to_proto(reviewed),
            )
        )
        .candidate
    )


def submission(
    candidate: candidate_pb2.RecoveryCandidate,
    reviewed: ReviewedRejection,
    recovery_id: str = "rec-1",
    **overrides: object,
) -> admission_pb2.RequestRejectedBoundaryRecoveryRequest:
    fields: dict[str, object] = {
        "run_id": "run-1",
        "request_id": "req-1",
        "recovery_id": recovery_id,
        "candidate_digest": candidate.candidate_digest,
        "reviewed_rejection": reviewed_rejection_to_proto(reviewed),
        "valid_for_seconds": 900,
        "acknowledge_reviewed_provider_epoch": True,
        "acknowledge_no_response_or_tool_replay": True,
        "acknowledge_same_request_and_budgets": True,
        "acknowledge_finite_ownership_lease": True,
        "corrective_provider": CORRECTIVE,
    }
    fields.update(overrides)
    return admission_pb2.RequestRejectedBoundaryRecoveryRequest(**fields)  # type: ignore[arg-type]


def admit_enabled(stack: Stack) -> ledger_pb2.AdmissionTicket:
    """Admit under a policy that enables the workflow (a claim needs the ticket's revision)."""
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy(allow_pre_admission_recovery=True)
    candidate = stack.candidate_of("run-1")
    assert candidate.eligible, candidate.holds
    return stack.admissions(ADA).RequestInvalidReadContinuity(continuity(candidate)).ticket


def test_recover_read_back_resubmit_and_a_second_refusal_stays_held(
    stack: Stack, engine: Engine, provider: RefusingProvider
) -> None:
    ticket = admit_enabled(stack)
    sent = refused_at_provider(stack, ticket, provider)
    reviewed = review(stack, sent)
    candidate = candidate_of(stack, reviewed)
    assert candidate.eligible, candidate.holds
    assert [a.action for a in candidate.handoff.permitted_next_actions] == [
        "request_rejected_boundary_recovery"
    ]
    counts = row_counts(engine)
    first = stack.admissions(ADA).RequestRejectedBoundaryRecovery(submission(candidate, reviewed))
    assert first.created
    outcome = first.outcome
    assert outcome.workflow == common_pb2.RECOVERY_WORKFLOW_REJECTED_BOUNDARY
    assert outcome.actor == ADA_IDENTITY
    assert outcome.reviewed_rejection_digest == reviewed.digest
    requeued = outcome.execution_request
    # The same request, attempt and checkpoint, queued again under a new finite lease.
    assert requeued.execution_request_id == ticket.execution_request.execution_request_id
    assert requeued.attempt_id == ticket.execution_request.attempt_id
    assert requeued.checkpoint_digest == ticket.execution_request.checkpoint_digest
    assert requeued.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED
    assert requeued.lease.generation == 1 and 0 < requeued.lease.seconds <= 900
    # Ticket, seal, failed claim and checkpoint preserved; a distinct settlement and receipt.
    journal = kinds(stack)
    assert journal[-7:] == [
        "ownership_claim",
        "worker_claimed",
        "model_request_sent",
        "request_failed",
        "refusal_settlement",
        "recovery_witness",
        "request_event",
    ]
    assert outcome.settlement_sequence == len(journal) - 2
    after = row_counts(engine)
    assert after["recovery_actions"] == counts["recovery_actions"] + 1
    assert after["admission_tickets"] == counts["admission_tickets"]
    assert after["execution_requests"] == counts["execution_requests"]
    # A lost response: read it back; an identical resubmit writes nothing.
    read_back = stack.admissions("reader-token").GetRejectedBoundaryRecovery(
        admission_pb2.GetRejectedBoundaryRecoveryRequest(run_id="run-1", request_id="req-1")
    )
    assert read_back.outcome == outcome
    again = stack.admissions(ADA).RequestRejectedBoundaryRecovery(submission(candidate, reviewed))
    assert not again.created and again.outcome == outcome
    assert row_counts(engine) == after
    # A different action is refused and writes nothing.
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestRejectedBoundaryRecovery(
            submission(candidate, reviewed, "rec-2")
        ),
        "RECOVERY_ALREADY_SPENT",
    )
    # A second failure stays held: the spent action identity refuses a retry loop. The worker
    # sends the very same bytes again.
    assert refused_at_provider(stack, ticket, provider).request.wire == sent.request.wire
    second = candidate_of(stack, reviewed)
    assert not second.eligible
    assert {"RECOVERY_SPENT", "REFUSAL_NOT_PROVEN"} <= holds(second)
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestRejectedBoundaryRecovery(
            submission(second, reviewed, "rec-3")
        ),
        "RECOVERY_ALREADY_SPENT",
    )


def test_the_policy_flag_off_holds(
    stack: Stack, engine: Engine, provider: RefusingProvider
) -> None:
    ticket = admit(stack)
    sent = refused_at_provider(stack, ticket, provider)
    reviewed = review(stack, sent)
    candidate = candidate_of(stack, reviewed)
    assert holds(candidate) == {"POLICY_DISABLED"}
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestRejectedBoundaryRecovery(
            submission(candidate, reviewed)
        ),
        "CANDIDATE_HELD",
    )


def test_a_never_claimed_failure_is_not_this_workflow(stack: Stack, engine: Engine) -> None:
    ticket = admit_enabled(stack)
    fail_unclaimed(stack, ticket)
    reviewed = review(stack)
    candidate = candidate_of(stack, reviewed)
    assert "REFUSAL_NOT_PROVEN" in holds(candidate)
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestRejectedBoundaryRecovery(
            submission(candidate, reviewed)
        ),
        "CANDIDATE_HELD",
    )


def test_a_claimed_request_still_running_stays_held(stack: Stack) -> None:
    ticket = admit_enabled(stack)
    claim(stack, ticket)
    candidate = candidate_of(stack, review(stack))
    assert {"WORKER_CLAIMED", "REFUSAL_NOT_PROVEN"} <= holds(candidate)


@pytest.mark.parametrize(
    "field, value, reproduced",
    [
        ("wire_digest", sha256_digest(b"another request"), True),
        ("wire_length", -1, True),
        ("model", "another-model", False),
        ("source_revision", "another-revision", False),
    ],
)
def test_a_review_that_does_not_name_the_retained_request_holds(
    stack: Stack,
    engine: Engine,
    provider: RefusingProvider,
    field: str,
    value: object,
    reproduced: bool,
) -> None:
    ticket = admit_enabled(stack)
    sent = refused_at_provider(stack, ticket, provider)
    if field == "wire_length":
        value = sent.request.wire_length + 1
    reviewed = review(stack, sent, **{field: value})
    candidate = candidate_of(stack, reviewed)
    # unproven, the worker's claim stays an unresolved residual effect; a review naming other
    # bytes is not the reproduced request either
    expected = {"REFUSAL_NOT_PROVEN", "WORKER_CLAIMED"}
    assert holds(candidate) == expected | ({"REQUEST_NOT_REPRODUCED"} if reproduced else set())
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestRejectedBoundaryRecovery(
            submission(candidate, reviewed)
        ),
        "CANDIDATE_HELD",
    )


def _one_byte_other(sent: SentRequest) -> bytes:
    wire = bytearray(sent.request.wire)
    wire[len(wire) // 2] ^= 0x01
    return bytes(wire)


@pytest.mark.parametrize(
    "retained",
    [
        lambda sent: {"wire_digest": sha256_digest(_one_byte_other(sent))},
        lambda sent: {"wire_length": sent.request.wire_length + 1},
        lambda sent: {"history_digest": sha256_digest(b"another history")},
        lambda sent: {"tool_definitions_digest": sha256_digest(b"other tools")},
        lambda sent: {"usage_digest": sha256_digest(b"other usage")},
        lambda sent: {"limits_digest": sha256_digest(b"other limits")},
        lambda sent: {"model": "another-model"},
    ],
    ids=["one-byte", "length", "history", "tools", "usage", "limits", "model"],
)
def test_a_retained_request_that_is_not_the_reproduced_one_holds(
    stack: Stack, engine: Engine, provider: RefusingProvider, retained: Any
) -> None:
    """The review names the retained entry exactly, so only the sealed reproduction can tell
    that the entry does not describe the request the ticket's checkpoint gives."""
    ticket = admit_enabled(stack)
    sent = refused_at_provider(stack, ticket, provider, retained)
    entry = [
        json.loads(e.payload_json)
        for e in whole_journal(stack.ledger_stub("reader-token"), "run-1")
        if e.kind == common_pb2.JOURNAL_ENTRY_KIND_MODEL_REQUEST_SENT
    ][-1]
    reviewed = review(
        stack,
        sent,
        wire_digest=entry["wire_digest"],
        wire_length=entry["wire_length"],
        model=entry["model"],
    )
    candidate = candidate_of(stack, reviewed)
    assert holds(candidate) == {"REQUEST_NOT_REPRODUCED"}
    assert not candidate.eligible and not candidate.handoff.permitted_next_actions
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestRejectedBoundaryRecovery(
            submission(candidate, reviewed)
        ),
        "CANDIDATE_HELD",
    )


def test_an_intervening_tool_outcome_holds(stack: Stack) -> None:
    ticket = admit_enabled(stack)
    claimed = claim(stack, ticket).execution_request
    # the lease holder's record (a native one is refused while the request is claimed)
    append(
        stack,
        common_pb2.JOURNAL_ENTRY_KIND_TOOL_OUTCOME,
        {
            "call_id": "call-9",
            "status": "succeeded",
            "execution_request_id": claimed.execution_request_id,
            "lease_generation": claimed.lease.generation,
        },
        "worker-token",
    )
    execution(stack).FailExecutionRequest(
        execution_pb2.FailExecutionRequestRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=claimed.lease.generation,
            reason="provider_rejected_request",
        )
    )
    assert "REFUSAL_NOT_PROVEN" in holds(candidate_of(stack, review(stack)))


def test_a_malformed_review_is_refused_field_by_field(
    stack: Stack, engine: Engine, provider: RefusingProvider
) -> None:
    ticket = admit_enabled(stack)
    sent = refused_at_provider(stack, ticket, provider)
    good = review(stack, sent)
    candidate = candidate_of(stack, good)
    for bad in (replace(good, jobs=1), replace(good, wire_digest="not-a-digest")):
        expect_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            "REVIEWED_REJECTION_INVALID",
            lambda bad=bad: candidate_of(stack, bad),  # type: ignore[misc]
        )
        before = row_counts(engine), kinds(stack)
        expect_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            "REVIEWED_REJECTION_INVALID",
            lambda bad=bad: stack.admissions(ADA).RequestRejectedBoundaryRecovery(  # type: ignore[misc]
                submission(candidate, bad)
            ),
        )
        assert (row_counts(engine), kinds(stack)) == before
    # A review the candidate was not computed from does not match its digest.
    other = replace(good, executable_identity="forge-worker@sha256:2")
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestRejectedBoundaryRecovery(submission(candidate, other)),
        "CANDIDATE_DIGEST_STALE",
    )


@pytest.mark.parametrize("role", ["factory_administrator", "execution_operator"])
def test_authority_revoked_between_candidate_and_submit(
    stack: Stack, engine: Engine, authority: Authority, role: str, provider: RefusingProvider
) -> None:
    """Factory administrator AND execution authority, asked again inside the commit."""
    ticket = admit_enabled(stack)
    sent = refused_at_provider(stack, ticket, provider)
    reviewed = review(stack, sent)
    candidate = candidate_of(stack, reviewed)
    assert candidate.eligible
    authority.revoke(ADA_IDENTITY, role)
    error = refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestRejectedBoundaryRecovery(
            submission(candidate, reviewed)
        ),
        "RECOVERY_UNRESOLVED",
    )
    assert "AUTHORITY_MISSING" in error.metadata["holds"]


def test_two_recovery_ids_race_on_one_request_exactly_one_wins(
    stack: Stack, provider: RefusingProvider
) -> None:
    ticket = admit_enabled(stack)
    sent = refused_at_provider(stack, ticket, provider)
    reviewed = review(stack, sent)
    candidate = candidate_of(stack, reviewed)
    won, lost = race_two_ids(
        lambda action_id: stack.admissions(ADA).RequestRejectedBoundaryRecovery(
            submission(candidate, reviewed, action_id)
        ),
        "rec",
    )
    assert all(isinstance(r, admission_pb2.RequestRejectedBoundaryRecoveryResponse) for r in won)
    assert len(won) == 1 and won[0].created
    assert lost == ["RECOVERY_ALREADY_SPENT"]
    assert kinds(stack).count("refusal_settlement") == 1
