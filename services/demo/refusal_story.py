"""`make demo`, part three: the first provider request of an admitted continuation is refused
before the provider admitted it; an administrator-reviewed rejection recovers it once, and a
second refusal stays held (the rejected-boundary recovery).

The worker is simulated, its request is not: it resumes the ticket's derived checkpoint through
the real pinned SDK against a loopback provider that refuses with HTTP 400, and retains what that
provider received. Forge's sealed reproduction must give the very same bytes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from forge.continuity.v1 import (
    admission_pb2,
    admission_pb2_grpc,
    candidate_pb2,
    candidate_pb2_grpc,
    common_pb2,
    execution_pb2,
    ledger_pb2,
    ledger_pb2_grpc,
    policy_pb2,
)
from services.demo.provider import RefusingProvider, SentRequest, send_refused
from services.demo.recovery_story import refused, story_stubs, worker_journal
from services.demo.seed import load_fixture, seed_held_run

PRINCIPAL = "forge-demo"


def refusal_story(
    targets: dict[str, str],
    run_id: str,
    tokens: dict[str, str],
    check: Callable[[bool, str], None],
    step: Callable[[str], None],
) -> None:
    writer, reader, _policy, candidates, admission, worker = story_stubs(targets, tokens)
    # the worker retains its request itself, under its lease: only the lease holder may
    stubs = (worker_journal(targets, tokens), reader, worker)

    step(f"Run {run_id}: the policy enables the provider-refusal recovery; the run is admitted")
    request_id = f"{run_id}-request-1"
    queued, run = _admitted_with_recovery_enabled(targets, tokens, run_id, request_id)

    def refused_at_provider(provider: RefusingProvider) -> SentRequest:
        return _worker_refused(stubs, queued, run, request_id, provider)

    step("A worker claims it; the provider refuses its first request before admitting it")
    provider = RefusingProvider()  # a daemon thread: it cannot keep a failed demo alive
    sent = refused_at_provider(provider)
    print(f"    the provider refused {sent.request.wire_length} bytes at {sent.endpoint}")

    step("The administrator reviews the rejection with pinned reports and reads the candidate")
    review, corrective = _pinned_evidence(writer, run.source_revision, sent)

    def read_candidate() -> candidate_pb2.RecoveryCandidate:
        return refusal_candidate(candidates, run_id, request_id, review)

    recovery = read_candidate()
    for hold in recovery.holds:
        print(f"    hold {common_pb2.HoldReason.Name(hold.reason)}: {hold.detail}")
    check(
        recovery.eligible,
        "eligible: the sealed reproduction gives the bytes the provider refused, as retained",
    )

    def submit(
        recovery_id: str,
        digest: str = recovery.candidate_digest,
        corrective: common_pb2.CorrectiveProviderConfigurationV1 = corrective,
    ) -> admission_pb2.RequestRejectedBoundaryRecoveryResponse:
        return submit_refusal(
            admission, run_id, request_id, recovery_id, digest, review, corrective
        )

    step("Submitting under the rejected provider epoch again is refused: it names no correction")
    unchanged = common_pb2.CorrectiveProviderConfigurationV1(
        provider_epoch=review.provider_epoch,
        configuration_digest=corrective.configuration_digest,
    )
    reason = refused(lambda: submit(f"{run_id}-recovery-1", corrective=unchanged))
    check(reason == "CORRECTIVE_PROVIDER_INVALID", "the corrective configuration must differ")

    step("The administrator submits the recovery, and the response is lost")
    submit(f"{run_id}-recovery-1")  # the reply is discarded on purpose
    print("    (response discarded)")

    step("The administrator reads the saved recovery back")
    outcome = admission.GetRejectedBoundaryRecovery(
        admission_pb2.GetRejectedBoundaryRecoveryRequest(run_id=run_id, request_id=request_id)
    ).outcome
    requeued = outcome.execution_request
    check(
        requeued.execution_request_id == queued.execution_request_id
        and requeued.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED
        and outcome.settlement_sequence > 0,
        "a refusal settlement is recorded and the same request is queued again",
    )
    print(f"    new lease {requeued.lease.seconds}s at generation {requeued.lease.generation}")

    step("An identical resubmit returns the saved recovery; a different action is refused")
    again = submit(f"{run_id}-recovery-1")
    check(not again.created and again.outcome == outcome, "idempotent: no second settlement")
    reason = refused(lambda: submit(f"{run_id}-recovery-2"))
    check(reason == "RECOVERY_ALREADY_SPENT", "another recovery id cannot replace the settlement")

    step("The provider refuses the request a second time")
    try:
        refused_at_provider(provider)
    finally:
        provider.close()
    second = read_candidate()
    names = {
        common_pb2.HoldReason.Name(h.reason).removeprefix("HOLD_REASON_") for h in second.holds
    }
    check(not second.eligible and "RECOVERY_SPENT" in names, "a second refusal stays held")
    reason = refused(lambda: submit(f"{run_id}-recovery-3", second.candidate_digest))
    check(reason == "RECOVERY_ALREADY_SPENT", "no retry loop: the one action is spent")


def refusal_candidate(
    candidates: candidate_pb2_grpc.CandidateServiceStub,
    run_id: str,
    request_id: str,
    review: common_pb2.ReviewedProviderRejectionV1,
) -> candidate_pb2.RecoveryCandidate:
    """The rejected-boundary candidate of the request under ``review``."""
    return candidates.GetRejectedBoundaryCandidate(
        candidate_pb2.GetRejectedBoundaryCandidateRequest(
            run_id=run_id, request_id=request_id, reviewed_rejection=review
        )
    ).candidate


def submit_refusal(
    admission: admission_pb2_grpc.AdmissionServiceStub,
    run_id: str,
    request_id: str,
    recovery_id: str,
    digest: str,
    review: common_pb2.ReviewedProviderRejectionV1,
    corrective: common_pb2.CorrectiveProviderConfigurationV1,
) -> admission_pb2.RequestRejectedBoundaryRecoveryResponse:
    """Submit the rejected-boundary recovery with every acknowledgement given (parts three and
    four both recover the refusal this way)."""
    response: admission_pb2.RequestRejectedBoundaryRecoveryResponse = (
        admission.RequestRejectedBoundaryRecovery(
            admission_pb2.RequestRejectedBoundaryRecoveryRequest(
                run_id=run_id,
                request_id=request_id,
                recovery_id=recovery_id,
                candidate_digest=digest,
                reviewed_rejection=review,
                valid_for_seconds=900,
                acknowledge_reviewed_provider_epoch=True,
                acknowledge_no_response_or_tool_replay=True,
                acknowledge_same_request_and_budgets=True,
                acknowledge_finite_ownership_lease=True,
                corrective_provider=corrective,
            )
        )
    )
    return response


def _admitted_with_recovery_enabled(
    targets: dict[str, str],
    tokens: dict[str, str],
    run_id: str,
    request_id: str,
    *,
    observation: bool = False,
) -> tuple[common_pb2.ExecutionRequest, ledger_pb2.Run]:
    """Seed the held run, enable the provider-refusal recovery (and, with ``observation``, the
    read-only observation recovery) in the policy, admit the run: the queued request and the
    run."""
    writer, reader, policy, candidates, admission, _ = story_stubs(targets, tokens)
    seed_held_run(writer, load_fixture("v1_basic"), run_id)
    current = policy.GetPolicy(policy_pb2.GetPolicyRequest()).policy
    policy.PutPolicy(
        policy_pb2.PutPolicyRequest(
            expected_revision=current.revision,
            settings=common_pb2.PolicySettings(
                enabled=True,
                window_seconds=3600,
                allow_pre_admission_recovery=True,
                allow_readonly_observation_recovery=observation,
            ),
        )
    )
    candidate = candidates.GetInvalidReadContinuityCandidate(
        candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_id)
    ).candidate
    queued = admission.RequestInvalidReadContinuity(
        admission_pb2.RequestInvalidReadContinuityRequest(
            run_id=run_id,
            request_id=request_id,
            digests=candidate.digests,
            version=1,
            valid_for_seconds=1800,
            acknowledge_no_new_grant=True,
            acknowledge_original_consumption=True,
            acknowledge_renewed_same_attempt_lease=True,
        )
    ).ticket.execution_request
    run = reader.GetRun(ledger_pb2.GetRunRequest(run_id=run_id)).run
    return queued, run


def _pinned_evidence(
    writer: ledger_pb2_grpc.LedgerServiceStub, source_revision: str, sent: SentRequest
) -> tuple[common_pb2.ReviewedProviderRejectionV1, common_pb2.CorrectiveProviderConfigurationV1]:
    """The administrator's review with its two stored reports, and the corrective provider
    configuration the action names."""
    # Each pinned report names the source revision, executable and provider epoch it was made for.
    made_for = {
        "source_revision": source_revision,
        "executable_identity": "forge-worker@demo",
        "provider_epoch": "demo-epoch-1",
    }

    def stored(document: dict[str, object]) -> str:
        content = json.dumps(document, sort_keys=True).encode()
        return writer.PutBlob(
            ledger_pb2.PutBlobRequest(content=content, media_type="application/json")
        ).digest

    reports = [
        stored({"kind": kind, **made_for})
        for kind in ("source_validator_report", "executable_probe_report")
    ]
    review = common_pb2.ReviewedProviderRejectionV1(
        provider_epoch="demo-epoch-1",
        wire_digest=sent.request.wire_digest,
        wire_length=sent.request.wire_length,
        endpoint=sent.endpoint,
        principal=PRINCIPAL,
        model=sent.request.model,
        source_revision=source_revision,
        executable_identity="forge-worker@demo",
        source_validator_report_digest=reports[0],
        executable_probe_report_digest=reports[1],
    )
    # The rejected epoch's evidence does not show the provider accepts the request now: the
    # action names the corrected configuration, stored as a document the ledger checks at commit.
    corrective = common_pb2.CorrectiveProviderConfigurationV1(
        provider_epoch="demo-epoch-2",
        configuration_digest=stored(
            {
                "kind": "corrective_provider_configuration",
                "provider_epoch": "demo-epoch-2",
                "replaces_provider_epoch": "demo-epoch-1",
                "model": sent.request.model,
            }
        ),
    )
    return review, corrective


def _worker_refused(
    stubs: tuple[Any, ...],
    queued: common_pb2.ExecutionRequest,
    run: ledger_pb2.Run,
    request_id: str,
    provider: RefusingProvider,
) -> SentRequest:
    """The simulated worker: claim, send the pending request through the real SDK to the
    refusing provider, retain what it received, and record the failure."""
    journal, reader, worker = stubs
    run_id = run.run_id
    claimed = worker.ClaimExecutionRequest(
        execution_pb2.ClaimExecutionRequestRequest(
            execution_request_id=queued.execution_request_id,
            attempt_id=run.attempt_id,
            source_revision=run.source_revision,
            configuration_digest=run.configuration_digest,
            source_profile=run.source_profile,
        )
    ).execution_request
    derived = reader.GetBlob(ledger_pb2.GetBlobRequest(digest=claimed.checkpoint_digest))
    sent = send_refused(derived.content, provider)
    head = reader.ReadJournal(ledger_pb2.ReadJournalRequest(run_id=run_id, page_size=1000)).entries[
        -1
    ]
    journal.AppendJournalEntry(
        ledger_pb2.AppendJournalEntryRequest(
            run_id=run_id,
            expected_head_hash=head.hash,
            kind=common_pb2.JOURNAL_ENTRY_KIND_MODEL_REQUEST_SENT,
            payload_json=json.dumps(
                sent.model_request_sent(
                    request_id,
                    claimed.execution_request_id,
                    PRINCIPAL,
                    lease_generation=claimed.lease.generation,
                )
            ),
        )
    )
    worker.FailExecutionRequest(
        execution_pb2.FailExecutionRequestRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=claimed.lease.generation,
            reason="provider_rejected_request",
        )
    )
    return sent
