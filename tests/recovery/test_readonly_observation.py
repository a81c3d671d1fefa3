"""The read-only observation recovery end to end: four real services, SQLite and PostgreSQL.

The history is the supported one: admission, a provider refusal of the first request and its
reviewed recovery (the real SDK's request to a loopback provider), then a second claim whose same
request is answered and consumed; the list_files result is retained, the evidence result is not.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import (
    admission_pb2,
    candidate_pb2,
    common_pb2,
    execution_pb2,
    ledger_pb2,
)
from services.demo.observation_turn import CASE as FIXTURE_CASE
from services.demo.observation_turn import EVIDENCE_CALL, LIST_CALL, LISTED, consumed_turn
from services.demo.provider import RefusingProvider
from services.demo.seed import seed_held_run
from services.reconstruction.domain import reproduce_pending_request
from services.reconstruction.domain.observation import reconstruct_readonly_observation
from shared.continuity.canonical import canonical_bytes, digest_of, parse_json, sha256_digest
from tests.admission.conftest import Stack, rpc_reason
from tests.admission.conftest import submission as continuity
from tests.recovery.conftest import Authority, race_two_ids
from tests.recovery.test_never_claimed import (
    ADA,
    ADA_IDENTITY,
    FIXTURE,
    claim,
    execution,
    holds,
    kinds,
    refused_with_nothing_written,
)
from tests.recovery.test_rejected_boundary import (
    PRINCIPAL,
    append,
    candidate_of,
    refused_at_provider,
    review,
)
from tests.recovery.test_rejected_boundary import submission as refusal_submission
from tests.support import row_counts, whole_journal

CONSUMED_AT = "2026-12-03T07:00:00.000000Z"
KIND = {
    "model_request_sent": common_pb2.JOURNAL_ENTRY_KIND_MODEL_REQUEST_SENT,
    "response_consumed": common_pb2.JOURNAL_ENTRY_KIND_RESPONSE_CONSUMED,
    "tool_call_granted": common_pb2.JOURNAL_ENTRY_KIND_TOOL_CALL_GRANTED,
    "tool_intent": common_pb2.JOURNAL_ENTRY_KIND_TOOL_INTENT,
    "tool_outcome": common_pb2.JOURNAL_ENTRY_KIND_TOOL_OUTCOME,
    "command_executed": common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED,
}


def store(stack: Stack, content: bytes) -> str:
    return (
        stack.ledger_stub()
        .PutBlob(ledger_pb2.PutBlobRequest(content=content, media_type="application/json"))
        .digest
    )


def refusal_recovered(
    stack: Stack, provider: RefusingProvider
) -> tuple[ledger_pb2.AdmissionTicket, Any]:
    """Admission, the refused first request and its reviewed recovery (part 1, B)."""
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy(allow_pre_admission_recovery=True, allow_readonly_observation_recovery=True)
    candidate = stack.candidate_of("run-1")
    ticket = stack.admissions(ADA).RequestInvalidReadContinuity(continuity(candidate)).ticket
    sent = refused_at_provider(stack, ticket, provider)
    reviewed = review(stack, sent)
    refusal = candidate_of(stack, reviewed)
    assert refusal.eligible, refusal.holds
    stack.admissions(ADA).RequestRejectedBoundaryRecovery(refusal_submission(refusal, reviewed))
    return ticket, sent


def consumed(
    stack: Stack,
    ticket: ledger_pb2.AdmissionTicket,
    sent: Any,
    *,
    listing: bool = True,
    alter: Callable[[list[tuple[str, dict[str, object]]]], None] | None = None,
    store_blobs: bool = True,
) -> None:
    """The second claim sends the same request; its answer is consumed and its reads granted;
    the list result is retained, the evidence result is not; the request fails under the claim.
    ``alter`` changes the retained custody before it is appended."""
    claimed = claim(stack, ticket).execution_request
    run = stack.ledger_stub("reader-token").GetRun(ledger_pb2.GetRunRequest(run_id="run-1")).run
    turn = consumed_turn("req-2", CONSUMED_AT, source_revision=run.source_revision, listing=listing)
    assert run.run_id == "run-1"
    # The request the worker retains is the one the fixture's real SDK run sent.
    assert sent.request.wire_digest == FIXTURE_CASE["wire_digest"]
    if store_blobs:
        store(stack, turn.raw_response)
        store(stack, turn.retained_result)
    entries: list[tuple[str, dict[str, object]]] = [
        (
            "model_request_sent",
            sent.model_request_sent(
                "req-2",
                claimed.execution_request_id,
                PRINCIPAL,
                lease_generation=claimed.lease.generation,
            ),
        ),
        *turn.entries,
    ]
    if alter is not None:
        alter(entries)
    lease = {
        "execution_request_id": claimed.execution_request_id,
        "lease_generation": claimed.lease.generation,
    }

    def fail() -> None:
        execution(stack).FailExecutionRequest(
            execution_pb2.FailExecutionRequestRequest(
                execution_request_id=claimed.execution_request_id,
                lease_generation=claimed.lease.generation,
                reason="agentic_tool_unknown",
            )
        )

    # The turn is the lease holder's records (a native resume is refused while the request is
    # claimed, ADR 0014 rule 3b). A record after an unknown outcome is refused to the holder
    # (rule 2c): the worker stops and fails the request, and the platform records the rest of
    # the shape under test natively after it.
    stopped = False
    for kind, payload in entries:
        if stopped:
            append(stack, KIND[kind], payload, "writer-token")
        elif kind == "command_executed":
            # While the request is claimed a command is charged only under its lease.
            execution(stack).RecordCommand(
                execution_pb2.RecordCommandRequest(
                    execution_request_id=claimed.execution_request_id,
                    lease_generation=claimed.lease.generation,
                    command_id=str(payload["command_id"]),
                    command_digest=sha256_digest(b"late command"),
                )
            )
        else:
            try:
                append(stack, KIND[kind], {**payload, **lease}, "worker-token")
            except grpc.RpcError as refused:
                if rpc_reason(refused) != "UNKNOWN_EFFECT_OUTSTANDING":
                    raise
                fail()
                stopped = True
                append(stack, KIND[kind], payload, "writer-token")
    if not stopped:
        fail()


def observation_candidate(stack: Stack, token: str = ADA) -> candidate_pb2.RecoveryCandidate:
    return (
        stack.candidates(token)
        .GetReadonlyObservationCandidate(
            candidate_pb2.GetReadonlyObservationCandidateRequest(run_id="run-1", request_id="req-1")
        )
        .candidate
    )


def observation(
    candidate: candidate_pb2.RecoveryCandidate, recovery_id: str = "obs-1", **overrides: object
) -> admission_pb2.RequestReadonlyObservationRecoveryRequest:
    fields: dict[str, object] = {
        "run_id": "run-1",
        "request_id": "req-1",
        "recovery_id": recovery_id,
        "candidate_digest": candidate.candidate_digest,
        "valid_for_seconds": 900,
        "acknowledge_unavailable_observation": True,
        "acknowledge_no_original_callback_replay": True,
        "acknowledge_same_request_attempt_and_budgets": True,
        "acknowledge_finite_ownership_lease": True,
    }
    fields.update(overrides)
    return admission_pb2.RequestReadonlyObservationRecoveryRequest(**fields)  # type: ignore[arg-type]


def entries_of(stack: Stack) -> list[common_pb2.JournalEntry]:
    return list(whole_journal(stack.ledger_stub("reader-token"), "run-1"))


def test_recover_read_back_resubmit_and_continue_from_the_separate_checkpoint(
    stack: Stack, engine: Engine, provider: RefusingProvider
) -> None:
    ticket, sent = refusal_recovered(stack, provider)
    consumed(stack, ticket, sent)
    candidate = observation_candidate(stack)
    assert candidate.eligible, candidate.holds
    assert [a.action for a in candidate.handoff.permitted_next_actions] == [
        "request_readonly_observation_recovery"
    ]
    proof = candidate.observation
    assert proof.evidence_call_id == EVIDENCE_CALL
    assert set(proof.retained_result_digests) == {LIST_CALL}
    before_entries = entries_of(stack)
    unknown = [e for e in before_entries if '"unknown"' in e.payload_json]
    counts = row_counts(engine)
    usage = execution(stack, "reader-token").GetCommandUsage(
        execution_pb2.GetCommandUsageRequest(run_id="run-1")
    )
    first = stack.admissions(ADA).RequestReadonlyObservationRecovery(observation(candidate))
    assert first.created
    outcome = first.outcome
    assert outcome.workflow == common_pb2.RECOVERY_WORKFLOW_READONLY_OBSERVATION
    assert outcome.actor == ADA_IDENTITY
    assert outcome.derived_checkpoint_digest == proof.derived_checkpoint_digest
    requeued = outcome.execution_request
    # The same request and attempt, a separate derived checkpoint, a new finite lease.
    assert requeued.execution_request_id == ticket.execution_request.execution_request_id
    assert requeued.attempt_id == ticket.execution_request.attempt_id
    assert requeued.checkpoint_digest == proof.derived_checkpoint_digest
    assert requeued.checkpoint_digest != ticket.execution_request.checkpoint_digest
    assert requeued.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED
    assert 0 < requeued.lease.seconds <= 900
    # One witness and one event appended; everything before unchanged, the unknown record too.
    after_entries = entries_of(stack)
    assert after_entries[: len(before_entries)] == before_entries
    assert [e for e in after_entries if '"unknown"' in e.payload_json] == unknown
    assert kinds(stack)[len(before_entries) :] == ["readonly_observation_recovery", "request_event"]
    witness = parse_json(after_entries[-2].payload_json)
    assert witness["unavailable_call_id"] == EVIDENCE_CALL
    assert witness["appended_result"] == {
        "status": "observation_unavailable",
        "reason": "original_read_result_not_retained",
    }
    event = parse_json(after_entries[-1].payload_json)
    assert event["invocation_binding"]["checkpoint_digest"] == proof.derived_checkpoint_digest
    after = row_counts(engine)
    assert after["recovery_actions"] == counts["recovery_actions"] + 1
    assert after["admission_tickets"] == counts["admission_tickets"]
    assert after["execution_requests"] == counts["execution_requests"]
    assert after["blobs"] == counts["blobs"] + 1  # the separate derived checkpoint only
    # No command charge: the run's command usage is unchanged (11 of 22 stays 11).
    assert (usage.usage.used, usage.usage.limit) == (11, 22)
    assert (
        execution(stack, "reader-token").GetCommandUsage(
            execution_pb2.GetCommandUsageRequest(run_id="run-1")
        )
        == usage
    )
    # The derived history: the raw response once, the exact retained list result, the fixed
    # unavailable observation; usage charges the response and each call once.
    stored = (
        stack.ledger_stub("reader-token")
        .GetBlob(ledger_pb2.GetBlobRequest(digest=requeued.checkpoint_digest))
        .content
    )
    derived = json.loads(stored)
    results = {p["tool_call_id"]: p["content"] for p in derived["state"]["messages"][-1]["parts"]}
    assert results == {
        EVIDENCE_CALL: {
            "status": "observation_unavailable",
            "reason": "original_read_result_not_retained",
        },
        LIST_CALL: LISTED,
    }
    # Read back, identical resubmit, a different action refused.
    read_back = stack.admissions("reader-token").GetReadonlyObservationRecovery(
        admission_pb2.GetReadonlyObservationRecoveryRequest(run_id="run-1", request_id="req-1")
    )
    assert read_back.outcome == outcome
    again = stack.admissions(ADA).RequestReadonlyObservationRecovery(observation(candidate))
    assert not again.created and again.outcome == outcome
    assert row_counts(engine) == after
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestReadonlyObservationRecovery(
            observation(candidate, "obs-2")
        ),
        "RECOVERY_ALREADY_SPENT",
    )
    # The next claim continues from the separate checkpoint; the pinned SDK builds the next
    # request from it (sealed: nothing is sent).
    claimed = claim(stack, ticket).execution_request
    assert claimed.checkpoint_digest == proof.derived_checkpoint_digest
    reproduced = reproduce_pending_request(stored)
    assert b"original_read_result_not_retained" in reproduced.wire


def test_the_policy_flag_off_holds_and_submitting_is_refused(
    stack: Stack, engine: Engine, provider: RefusingProvider
) -> None:
    ticket, sent = refusal_recovered(stack, provider)
    consumed(stack, ticket, sent)
    stack.set_policy(allow_pre_admission_recovery=True)  # the observation flag is off again
    candidate = observation_candidate(stack)
    assert holds(candidate) == {"POLICY_DISABLED"}
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestReadonlyObservationRecovery(observation(candidate)),
        "CANDIDATE_HELD",
    )


def _replace_outcome(status: str) -> Callable[[list[tuple[str, dict[str, object]]]], None]:
    def alter(entries: list[tuple[str, dict[str, object]]]) -> None:
        for kind, payload in entries:
            if kind == "tool_outcome" and payload["call_id"] == LIST_CALL:
                payload["status"] = status

    return alter


def _add(kind: str, payload: dict[str, object]) -> Callable[[list[Any]], None]:
    def alter(entries: list[Any]) -> None:
        entries.append((kind, payload))

    return alter


def _command_after_consume(entries: list[Any]) -> None:
    """A command charged under the claim right after the consumed response (before the turn's
    tool outcomes, whose unknown evidence outcome would stop any later command)."""
    at = next(i for i, (kind, _) in enumerate(entries) if kind == "response_consumed")
    entries.insert(at + 1, ("command_executed", {"command_id": "cmd-late"}))


def _writable_sibling(entries: list[Any]) -> None:
    for kind, payload in entries:
        if kind == "tool_call_granted" and payload["call_id"] == LIST_CALL:
            payload["tool_name"] = "run_command"
            payload["grant"] = "command"


def _grant(call_id: str, **change: object) -> Callable[[list[Any]], None]:
    """The grant of ``call_id`` with ``change`` (a None value removes the field)."""

    def alter(entries: list[Any]) -> None:
        for kind, payload in entries:
            if kind == "tool_call_granted" and payload["call_id"] == call_id:
                for key, value in change.items():
                    if value is None:
                        del payload[key]
                    else:
                        payload[key] = value

    return alter


@pytest.mark.parametrize(
    "alter, expected",
    [
        # a grant that records none is no read grant (never defaulted to one)
        (_grant(LIST_CALL, grant=None), {"OBSERVATION_NOT_PROVEN", "WORKER_CLAIMED"}),
        (_grant(EVIDENCE_CALL, grant=None), {"OBSERVATION_NOT_PROVEN", "WORKER_CLAIMED"}),
        # the read observed no recorded source cut, or another source than the run's
        (_grant(LIST_CALL, source_cut=None), {"OBSERVATION_NOT_PROVEN", "WORKER_CLAIMED"}),
        (
            _grant(EVIDENCE_CALL, source_cut="git:elsewhere"),
            {"OBSERVATION_NOT_PROVEN", "WORKER_CLAIMED"},
        ),
        # the granted arguments are not the consumed response's (the sealed reconstruction
        # rebuilds the response's own; the candidate compares them as the commit will)
        (
            _grant(LIST_CALL, args_digest=digest_of({"path": "elsewhere"})),
            {"OBSERVATION_NOT_PROVEN"},
        ),
        # the list result was not retained: its outcome is not a retained success
        (_replace_outcome("unknown"), {"OBSERVATION_NOT_PROVEN", "WORKER_CLAIMED"}),
        # a command after the consumed turn: an unaccounted later effect
        (_command_after_consume, {"OBSERVATION_NOT_PROVEN", "WORKER_CLAIMED"}),
        # a writable / command sibling is no pure read
        (_writable_sibling, {"OBSERVATION_NOT_PROVEN", "WORKER_CLAIMED"}),
        # an unknown call outside the consumed turn stays uncertain
        (
            _add("tool_outcome", {"call_id": "call-other", "status": "unknown"}),
            {"OBSERVATION_NOT_PROVEN", "WORKER_CLAIMED"},
        ),
    ],
    ids=[
        "list-no-grant",
        "evidence-no-grant",
        "list-no-source-cut",
        "evidence-other-source-cut",
        "list-other-args",
        "list-not-retained",
        "late-command",
        "command-sibling",
        "other-unknown",
    ],
)
def test_custody_that_is_not_exact_pure_read_stays_held(
    stack: Stack,
    engine: Engine,
    provider: RefusingProvider,
    alter: Callable[[list[Any]], None],
    expected: set[str],
) -> None:
    ticket, sent = refusal_recovered(stack, provider)
    consumed(stack, ticket, sent, alter=alter)
    candidate = observation_candidate(stack)
    assert not candidate.eligible
    # a custody hold keeps the claim unresolved (WORKER_CLAIMED): the turn may not be continued
    assert expected <= holds(candidate), candidate.holds
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestReadonlyObservationRecovery(observation(candidate)),
        "CANDIDATE_HELD",
    )


def test_a_lost_retained_result_holds(
    stack: Stack, engine: Engine, provider: RefusingProvider
) -> None:
    ticket, sent = refusal_recovered(stack, provider)
    consumed(stack, ticket, sent, store_blobs=False)
    candidate = observation_candidate(stack)
    assert holds(candidate) == {"CLOSURE_INCOMPLETE"}


def test_without_the_refusal_recovery_nothing_qualifies(
    stack: Stack, engine: Engine, provider: RefusingProvider
) -> None:
    """The spent provider-refusal action cannot authorize this one, nor can its absence."""
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy(allow_pre_admission_recovery=True, allow_readonly_observation_recovery=True)
    ticket = (
        stack.admissions(ADA)
        .RequestInvalidReadContinuity(continuity(stack.candidate_of("run-1")))
        .ticket
    )
    refused_at_provider(stack, ticket, provider)
    candidate = observation_candidate(stack)
    assert "OBSERVATION_NOT_PROVEN" in holds(candidate)


@pytest.mark.parametrize("role", ["factory_administrator", "execution_operator"])
def test_authority_revoked_between_candidate_and_submit(
    stack: Stack, engine: Engine, authority: Authority, role: str, provider: RefusingProvider
) -> None:
    ticket, sent = refusal_recovered(stack, provider)
    consumed(stack, ticket, sent)
    candidate = observation_candidate(stack)
    assert candidate.eligible
    authority.revoke(ADA_IDENTITY, role)
    error = refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestReadonlyObservationRecovery(observation(candidate)),
        "RECOVERY_UNRESOLVED",
    )
    assert "AUTHORITY_MISSING" in error.metadata["holds"]


@pytest.mark.parametrize(
    "overrides, reason",
    [
        ({"acknowledge_unavailable_observation": False}, "ACKNOWLEDGEMENT_REQUIRED"),
        ({"acknowledge_finite_ownership_lease": False}, "ACKNOWLEDGEMENT_REQUIRED"),
        ({"valid_for_seconds": 7201}, "FIELD_INVALID"),
        ({"valid_for_seconds": 0}, "FIELD_INVALID"),
        ({"recovery_id": "bad id"}, "FIELD_INVALID"),
        ({"candidate_digest": "sha256:" + "0" * 64}, "CANDIDATE_DIGEST_STALE"),
    ],
)
def test_bad_submissions_are_refused_and_write_nothing(
    stack: Stack,
    engine: Engine,
    provider: RefusingProvider,
    overrides: dict[str, object],
    reason: str,
) -> None:
    ticket, sent = refusal_recovered(stack, provider)
    consumed(stack, ticket, sent)
    candidate = observation_candidate(stack)
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.admissions(ADA).RequestReadonlyObservationRecovery(
            observation(candidate, **overrides)
        ),
        reason,
    )


def test_two_recovery_ids_race_on_one_request_exactly_one_wins(
    stack: Stack, provider: RefusingProvider
) -> None:
    ticket, sent = refusal_recovered(stack, provider)
    consumed(stack, ticket, sent)
    candidate = observation_candidate(stack)
    won, lost = race_two_ids(
        lambda action_id: stack.admissions(ADA).RequestReadonlyObservationRecovery(
            observation(candidate, action_id)
        ),
        "obs",
    )
    assert all(isinstance(r, admission_pb2.RequestReadonlyObservationRecoveryResponse) for r in won)
    assert len(won) == 1 and won[0].created
    assert lost == ["RECOVERY_ALREADY_SPENT"]
    assert kinds(stack).count("readonly_observation_recovery") == 1


@pytest.mark.parametrize(
    "retained, reason",
    [
        # a valid reconstruction, but of a listing the journal did not retain
        ({LIST_CALL: ["src/other.py"]}, "RECONSTRUCTION_MISMATCH"),
        # the evidence call answered by a "retained" result: no reconstruction makes it
        (None, "RECONSTRUCTION_MISMATCH"),
    ],
)
def test_the_ledger_binds_the_derived_checkpoint_to_the_journals_turn(
    stack: Stack,
    engine: Engine,
    provider: RefusingProvider,
    retained: dict[str, object] | None,
    reason: str,
) -> None:
    """The ledger cannot reach reconstruction: inside its transaction it checks the derived
    checkpoint's source, consumed response and appended results against the journal and the
    stored retained results."""
    ticket, sent = refusal_recovered(stack, provider)
    consumed(stack, ticket, sent)
    candidate = observation_candidate(stack)
    proof = candidate.observation
    reader = stack.ledger_stub("reader-token")

    def blob(digest: str) -> bytes:
        return reader.GetBlob(ledger_pb2.GetBlobRequest(digest=digest)).content

    checkpoint = blob(proof.pending_checkpoint_digest)
    response = blob(proof.consumed_response_digest)
    if retained is not None:
        derived = reconstruct_readonly_observation(
            checkpoint, response, proof.consumed_at, retained
        )
        content = derived.derived_checkpoint
    else:
        genuine = reconstruct_readonly_observation(
            checkpoint, response, proof.consumed_at, {LIST_CALL: LISTED}
        )
        envelope = json.loads(genuine.derived_checkpoint)
        for item in envelope["reconstruction"]["appended_results"]:
            if item["tool_call_id"] == EVIDENCE_CALL:
                item["content"] = {"status": "ok", "items": []}
        content = canonical_bytes(envelope)
    witness = json.loads(content)["witness_digest"]
    commit = ledger_pb2.CommitRecoveryRequest(
        run_id="run-1",
        request_id="req-1",
        recovery_id="obs-forged",
        actor=ADA_IDENTITY,
        request_content_digest="sha256:" + "9" * 64,
        candidate_digest=candidate.candidate_digest,
        expected_head_hash=candidate.journal_head.hash,
        policy_revision=candidate.policy_revision,
        valid_for_seconds=600,
        workflow=common_pb2.RECOVERY_WORKFLOW_READONLY_OBSERVATION,
        derived_checkpoint=content,
        derived_checkpoint_digest=sha256_digest(content),
        observation_witness_digest=witness,
    )
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.ledger_stub("service-token").CommitRecovery(commit),
        reason,
    )


def test_the_ledger_binds_each_granted_argument_digest_to_the_consumed_response(
    stack: Stack, engine: Engine, provider: RefusingProvider
) -> None:
    """The genuine reconstruction of the consumed response, committed over a journal whose list
    grant records other arguments: the ledger compares each grant's argument digest with the
    arguments the derived checkpoint carries, and refuses."""
    ticket, sent = refusal_recovered(stack, provider)
    consumed(stack, ticket, sent, alter=_grant(LIST_CALL, args_digest=digest_of({"path": "x"})))
    candidate = observation_candidate(stack)
    assert "OBSERVATION_NOT_PROVEN" in holds(candidate)
    proof = candidate.observation
    reader = stack.ledger_stub("reader-token")

    def blob(digest: str) -> bytes:
        return reader.GetBlob(ledger_pb2.GetBlobRequest(digest=digest)).content

    derived = reconstruct_readonly_observation(
        blob(proof.pending_checkpoint_digest),
        blob(proof.consumed_response_digest),
        proof.consumed_at,
        {LIST_CALL: LISTED},
    )
    content = derived.derived_checkpoint
    commit = ledger_pb2.CommitRecoveryRequest(
        run_id="run-1",
        request_id="req-1",
        recovery_id="obs-unbound",
        actor=ADA_IDENTITY,
        request_content_digest="sha256:" + "9" * 64,
        candidate_digest=candidate.candidate_digest,
        expected_head_hash=candidate.journal_head.hash,
        policy_revision=candidate.policy_revision,
        valid_for_seconds=600,
        workflow=common_pb2.RECOVERY_WORKFLOW_READONLY_OBSERVATION,
        derived_checkpoint=content,
        derived_checkpoint_digest=sha256_digest(content),
        observation_witness_digest=derived.witness_digest,
    )
    refused_with_nothing_written(
        stack,
        engine,
        lambda: stack.ledger_stub("service-token").CommitRecovery(commit),
        "RECONSTRUCTION_MISMATCH",
    )


def test_a_revoked_policy_stops_the_next_claim(
    stack: Stack, engine: Engine, provider: RefusingProvider
) -> None:
    """Admission confirms the queue only; revoking the workflow's policy before the claim stops
    dispatch (the claim repeats the policy revision it was queued under)."""
    ticket, sent = refusal_recovered(stack, provider)
    consumed(stack, ticket, sent)
    candidate = observation_candidate(stack)
    stack.admissions(ADA).RequestReadonlyObservationRecovery(observation(candidate))
    stack.set_policy(allow_pre_admission_recovery=True)  # the observation flag revoked
    before = row_counts(engine), kinds(stack)
    with pytest.raises(grpc.RpcError) as refused:
        claim(stack, ticket)
    assert rpc_reason(refused.value) == "POLICY_REVOKED"
    # Refused while entering its policy epoch: one native admission-refusal record, nothing else.
    counts, journal = before
    assert row_counts(engine) == {**counts, "journal_entries": counts["journal_entries"] + 1}
    assert kinds(stack) == [*journal, "admission_refusal"]
