"""`make demo`, part four: after the provider-refusal recovery the worker's request is answered
and consumed; the answer asks for an evidence read whose result could not be retained and a file
listing whose result was. An administrator continues the same request once (the read-only
observation recovery): the evidence observation stays explicitly unavailable, the listing is
reused exactly, nothing is replayed, and no command is charged."""

from __future__ import annotations

import json
from collections.abc import Callable

from forge.continuity.v1 import (
    admission_pb2,
    candidate_pb2,
    common_pb2,
    execution_pb2,
    ledger_pb2,
)
from services.demo.observation_turn import consumed_turn
from services.demo.provider import RefusingProvider
from services.demo.recovery_story import refused, story_stubs, worker_journal
from services.demo.refusal_story import (
    PRINCIPAL,
    _admitted_with_recovery_enabled,
    _pinned_evidence,
    _worker_refused,
    refusal_candidate,
    submit_refusal,
)

CONSUMED_AT = "2026-12-03T07:00:00.000000Z"


def observation_story(
    targets: dict[str, str],
    run_id: str,
    tokens: dict[str, str],
    check: Callable[[bool, str], None],
    step: Callable[[str], None],
) -> None:
    writer, reader, _policy, candidates, admission, worker = story_stubs(targets, tokens)
    journal = worker_journal(targets, tokens)
    request_id = f"{run_id}-request-1"
    step(f"Run {run_id}: admitted; its first request is refused and recovered once (part three)")
    queued, run = _admitted_with_recovery_enabled(
        targets, tokens, run_id, request_id, observation=True
    )
    provider = RefusingProvider()
    try:
        sent = _worker_refused((journal, reader, worker), queued, run, request_id, provider)
    finally:
        provider.close()
    review, corrective = _pinned_evidence(writer, run.source_revision, sent)
    refusal = refusal_candidate(candidates, run_id, request_id, review)
    submit_refusal(
        admission,
        run_id,
        request_id,
        f"{run_id}-refusal",
        refusal.candidate_digest,
        review,
        corrective,
    )

    step("The worker claims again; the same request is answered, consumed and its reads granted")
    claimed = worker.ClaimExecutionRequest(
        execution_pb2.ClaimExecutionRequestRequest(
            execution_request_id=queued.execution_request_id,
            attempt_id=run.attempt_id,
            source_revision=run.source_revision,
            configuration_digest=run.configuration_digest,
            source_profile=run.source_profile,
        )
    ).execution_request
    turn = consumed_turn(f"{request_id}-2", CONSUMED_AT, source_revision=run.source_revision)
    for content in (turn.raw_response, turn.retained_result):
        writer.PutBlob(ledger_pb2.PutBlobRequest(content=content, media_type="application/json"))
    # The worker retains the request and the turn under its lease: while the request is claimed
    # no native resume is accepted (ADR 0014, rule 3b).
    request = sent.model_request_sent(
        f"{request_id}-2",
        claimed.execution_request_id,
        PRINCIPAL,
        lease_generation=claimed.lease.generation,
    )
    lease = {
        "execution_request_id": claimed.execution_request_id,
        "lease_generation": claimed.lease.generation,
    }
    payloads = [(journal, "model_request_sent", request)]
    payloads += [(journal, kind, {**payload, **lease}) for kind, payload in turn.entries]
    for appender, kind, payload in payloads:
        head = reader.ReadJournal(
            ledger_pb2.ReadJournalRequest(run_id=run_id, page_size=1000)
        ).entries[-1]
        appender.AppendJournalEntry(
            ledger_pb2.AppendJournalEntryRequest(
                run_id=run_id,
                expected_head_hash=head.hash,
                kind=common_pb2.JournalEntryKind.Value(f"JOURNAL_ENTRY_KIND_{kind.upper()}"),
                payload_json=json.dumps(payload),
            )
        )
    print("    the list result is retained; the evidence result is not (outcome unknown)")
    worker.FailExecutionRequest(
        execution_pb2.FailExecutionRequestRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=claimed.lease.generation,
            reason="agentic_tool_unknown",
        )
    )
    usage = worker.GetCommandUsage(execution_pb2.GetCommandUsageRequest(run_id=run_id))

    step("The administrator reads the read-only observation candidate")
    candidate = candidates.GetReadonlyObservationCandidate(
        candidate_pb2.GetReadonlyObservationCandidateRequest(run_id=run_id, request_id=request_id)
    ).candidate
    for hold in candidate.holds:
        print(f"    hold {common_pb2.HoldReason.Name(hold.reason)}: {hold.detail}")
    check(
        candidate.eligible,
        "eligible: exact read custody; the sealed SDK reconstructs the consumed turn",
    )

    def submit(recovery_id: str) -> admission_pb2.RequestReadonlyObservationRecoveryResponse:
        response: admission_pb2.RequestReadonlyObservationRecoveryResponse = (
            admission.RequestReadonlyObservationRecovery(
                admission_pb2.RequestReadonlyObservationRecoveryRequest(
                    run_id=run_id,
                    request_id=request_id,
                    recovery_id=recovery_id,
                    candidate_digest=candidate.candidate_digest,
                    valid_for_seconds=900,
                    acknowledge_unavailable_observation=True,
                    acknowledge_no_original_callback_replay=True,
                    acknowledge_same_request_attempt_and_budgets=True,
                    acknowledge_finite_ownership_lease=True,
                )
            )
        )
        return response

    step("The administrator submits the action, and the response is lost")
    submit(f"{run_id}-observation-1")
    print("    (response discarded)")
    outcome = admission.GetReadonlyObservationRecovery(
        admission_pb2.GetReadonlyObservationRecoveryRequest(run_id=run_id, request_id=request_id)
    ).outcome
    requeued = outcome.execution_request
    check(
        requeued.execution_request_id == queued.execution_request_id
        and requeued.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED
        and requeued.checkpoint_digest
        == outcome.derived_checkpoint_digest
        != queued.checkpoint_digest,
        "the same request is queued again from a separate derived checkpoint",
    )
    derived = json.loads(
        reader.GetBlob(ledger_pb2.GetBlobRequest(digest=requeued.checkpoint_digest)).content
    )
    appended = {p["tool_name"]: p["content"] for p in derived["state"]["messages"][-1]["parts"]}
    print(f"    appended: {json.dumps(appended, sort_keys=True)}")
    check(
        appended["read_run_evidence"]["status"] == "observation_unavailable",
        "the evidence observation is explicitly unavailable; the listing is reused exactly",
    )
    check(
        worker.GetCommandUsage(execution_pb2.GetCommandUsageRequest(run_id=run_id)) == usage,
        "no command is charged",
    )

    step("An identical resubmit returns the saved action; a different action is refused")
    again = submit(f"{run_id}-observation-1")
    check(not again.created and again.outcome == outcome, "idempotent: no second witness")
    reason = refused(lambda: submit(f"{run_id}-observation-2"))
    check(reason == "RECOVERY_ALREADY_SPENT", "another action cannot replace the witness")
