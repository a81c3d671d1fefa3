"""Admission's ports over gRPC: the ledger, candidate and reconstruction services. Protobuf ↔
domain translation only; downstream refusals arrive as the typed domain errors they carried
(``shared.runtime.client.call``), so a refusal keeps its reason on its way back to the operator."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from forge.continuity.v1 import (
    admission_pb2,
    candidate_pb2,
    candidate_pb2_grpc,
    common_pb2,
    ledger_pb2,
    ledger_pb2_grpc,
    reconstruction_pb2,
    reconstruction_pb2_grpc,
)
from services.admission.domain import HoldView
from services.admission.driver import Stored, Submitted
from services.admission.workflows.invalid_read import (
    AdmissionCommit,
    AdmissionKey,
    CandidateProof,
    DerivedCheckpoint,
    InvalidReadCandidate,
)
from services.admission.workflows.readonly_observation import ObservationProofView
from services.admission.workflows.recovery_base import (
    ObservationBinding,
    RecoveryCandidateView,
    RecoveryCommit,
    RecoveryKey,
)
from shared.continuity.idempotency import StoredAction
from shared.continuity.rejected_boundary import ReviewedRejection
from shared.contract.rejected_boundary_proto import (
    corrective_provider_to_proto,
    reviewed_rejection_to_proto,
)
from shared.contract.terms import DIGEST_NAMES, enum_short_name
from shared.runtime.client import call


def _digests(message: common_pb2.ContinuityDigests) -> dict[str, str]:
    return {name: getattr(message, name) for name in DIGEST_NAMES}


def _hold(hold: common_pb2.Hold) -> HoldView:
    return HoldView(
        enum_short_name(common_pb2.HoldReason, hold.reason),
        enum_short_name(common_pb2.HoldRequirement, hold.requirement),
        hold.subject,
        hold.detail,
    )


def _stored_ticket(ticket: ledger_pb2.AdmissionTicket) -> Stored[ledger_pb2.AdmissionTicket]:
    return Stored(ticket, StoredAction(ticket.operator_identity, ticket.request_content_digest))


def _candidate(
    response: candidate_pb2.GetInvalidReadContinuityCandidateResponse,
) -> InvalidReadCandidate:
    candidate, proof = response.candidate, response.candidate.proof
    derived = response.admission_inputs if response.HasField("admission_inputs") else None
    return InvalidReadCandidate(
        run_id=candidate.run_id,
        eligible=candidate.eligible,
        version=candidate.version,
        digests=_digests(candidate.digests),
        holds=tuple(_hold(hold) for hold in candidate.holds),
        policy_revision=candidate.policy_revision,
        journal_head_hash=candidate.journal_head.hash,
        proof=CandidateProof(
            consumed_response_digest=proof.consumed_response_digest,
            derived_checkpoint_digest=proof.derived_checkpoint_digest,
            witness_digest=proof.witness_digest,
        ),
        derived=(
            DerivedCheckpoint(
                derived_checkpoint=derived.derived_checkpoint,
                derived_checkpoint_digest=derived.derived_checkpoint_digest,
                witness_digest=derived.witness_digest,
            )
            if derived is not None
            else None
        ),
    )


#: The ledger's stored workflow names → the contract's RecoveryWorkflow.
RECOVERY_WORKFLOWS = {
    "never_claimed": admission_pb2.RECOVERY_WORKFLOW_NEVER_CLAIMED,
    "rejected_boundary": admission_pb2.RECOVERY_WORKFLOW_REJECTED_BOUNDARY,
    "readonly_observation": admission_pb2.RECOVERY_WORKFLOW_READONLY_OBSERVATION,
}


def recovery_outcome(saved: ledger_pb2.SavedRecovery) -> admission_pb2.RecoveryOutcome:
    return admission_pb2.RecoveryOutcome(
        run_id=saved.run_id,
        request_id=saved.request_id,
        recovery_id=saved.recovery_id,
        workflow=RECOVERY_WORKFLOWS[saved.workflow],
        actor=saved.actor,
        execution_request=saved.execution_request,
        witness_sequence=saved.witness_sequence,
        event_sequence=saved.event_sequence,
        created_at=saved.created_at,
        settlement_sequence=saved.settlement_sequence,
        reviewed_rejection_digest=saved.reviewed_rejection_digest,
        derived_checkpoint_digest=saved.derived_checkpoint_digest,
    )


def _recovery_candidate_view(candidate: candidate_pb2.RecoveryCandidate) -> RecoveryCandidateView:
    return RecoveryCandidateView(
        eligible=candidate.eligible,
        candidate_digest=candidate.candidate_digest,
        holds=tuple(_hold(hold) for hold in candidate.holds),
        policy_revision=candidate.policy_revision,
        journal_head_hash=candidate.journal_head.hash,
        observation=(
            _observation_proof(candidate.observation) if candidate.HasField("observation") else None
        ),
    )


def _observation_proof(proof: candidate_pb2.ObservationProof) -> ObservationProofView:
    return ObservationProofView(
        pending_checkpoint_digest=proof.pending_checkpoint_digest,
        consumed_response_digest=proof.consumed_response_digest,
        consumed_at=proof.consumed_at,
        retained_result_digests=dict(proof.retained_result_digests),
        derived_checkpoint_digest=proof.derived_checkpoint_digest,
        witness_digest=proof.witness_digest,
    )


def _stored_recovery(saved: ledger_pb2.SavedRecovery) -> Stored[admission_pb2.RecoveryOutcome]:
    return Stored(recovery_outcome(saved), StoredAction(saved.actor, saved.request_content_digest))


def _observation_fields(binding: ObservationBinding | None) -> dict[str, object]:
    if binding is None:
        return {}
    return {
        "derived_checkpoint": binding.derived_checkpoint,
        "derived_checkpoint_digest": binding.derived_checkpoint_digest,
        "observation_witness_digest": binding.witness_digest,
    }


def _continuity_digests(digests: Mapping[str, str]) -> common_pb2.ContinuityDigests:
    return common_pb2.ContinuityDigests(**{name: digests[name] for name in DIGEST_NAMES})


@dataclass(frozen=True)
class Downstream:
    """The stubs admission coordinates (each channel carries admission's service identity); the
    invalid-read workflow's port over them."""

    ledger: ledger_pb2_grpc.LedgerServiceStub
    candidate: candidate_pb2_grpc.CandidateServiceStub
    reconstruction: reconstruction_pb2_grpc.ReconstructionServiceStub

    def stored_ticket(self, key: AdmissionKey) -> Stored[ledger_pb2.AdmissionTicket]:
        response: ledger_pb2.GetAdmissionResponse = call(
            self.ledger.GetAdmission,
            ledger_pb2.GetAdmissionRequest(run_id=key.run_id, request_id=key.request_id),
        )
        return _stored_ticket(response.ticket)

    def invalid_read_candidate(self, run_id: str, version: int) -> InvalidReadCandidate:
        # With the candidate comes the derived checkpoint its one reconstruction produced: the
        # admission commits it, nothing is read or reconstructed again.
        response: candidate_pb2.GetInvalidReadContinuityCandidateResponse = call(
            self.candidate.GetInvalidReadContinuityCandidate,
            candidate_pb2.GetInvalidReadContinuityCandidateRequest(
                run_id=run_id, version=version, include_admission_inputs=True
            ),
        )
        return _candidate(response)

    def blob(self, digest: str) -> bytes:
        content: bytes = call(self.ledger.GetBlob, ledger_pb2.GetBlobRequest(digest=digest)).content
        return content

    def commit(self, admission: AdmissionCommit) -> Submitted[ledger_pb2.AdmissionTicket]:
        committed: ledger_pb2.CommitAdmissionResponse = call(
            self.ledger.CommitAdmission,
            ledger_pb2.CommitAdmissionRequest(
                run_id=admission.run_id,
                request_id=admission.request_id,
                operator_identity=admission.operator_identity,
                request_content_digest=admission.request_content_digest,
                expected_head_hash=admission.expected_head_hash,
                policy_revision=admission.policy_revision,
                digests=_continuity_digests(admission.digests),
                version=admission.version,
                valid_for_seconds=admission.valid_for_seconds,
                derived_checkpoint_digest=admission.derived_checkpoint_digest,
                consumed_response_digest=admission.consumed_response_digest,
                witness_digest=admission.witness_digest,
                derived_checkpoint=admission.derived_checkpoint,
            ),
        )
        return Submitted(committed.ticket, committed.created)

    # --- the never-claimed recovery's port ----------------------------------------------------

    def stored_recovery(self, key: RecoveryKey) -> Stored[admission_pb2.RecoveryOutcome]:
        response: ledger_pb2.GetRecoveryResponse = call(
            self.ledger.GetRecovery,
            ledger_pb2.GetRecoveryRequest(
                run_id=key.run_id, request_id=key.request_id, workflow=key.workflow
            ),
        )
        return _stored_recovery(response.recovery)

    def never_claimed_candidate(self, run_id: str, request_id: str) -> RecoveryCandidateView:
        response: candidate_pb2.GetInvalidReadRecoveryCandidateResponse = call(
            self.candidate.GetInvalidReadRecoveryCandidate,
            candidate_pb2.GetInvalidReadRecoveryCandidateRequest(
                run_id=run_id, request_id=request_id
            ),
        )
        return _recovery_candidate_view(response.candidate)

    def rejected_boundary_candidate(
        self, run_id: str, request_id: str, review: ReviewedRejection
    ) -> RecoveryCandidateView:
        response: candidate_pb2.GetRejectedBoundaryCandidateResponse = call(
            self.candidate.GetRejectedBoundaryCandidate,
            candidate_pb2.GetRejectedBoundaryCandidateRequest(
                run_id=run_id,
                request_id=request_id,
                reviewed_rejection=reviewed_rejection_to_proto(review),
            ),
        )
        return _recovery_candidate_view(response.candidate)

    def readonly_observation_candidate(self, run_id: str, request_id: str) -> RecoveryCandidateView:
        response: candidate_pb2.GetReadonlyObservationCandidateResponse = call(
            self.candidate.GetReadonlyObservationCandidate,
            candidate_pb2.GetReadonlyObservationCandidateRequest(
                run_id=run_id, request_id=request_id
            ),
        )
        return _recovery_candidate_view(response.candidate)

    def reconstruct_observation(
        self,
        derived_checkpoint: bytes,
        raw_response: bytes,
        consumed_at: str,
        retained_results: Mapping[str, str],
    ) -> ObservationBinding:
        found: reconstruction_pb2.ReconstructReadonlyObservationResponse = call(
            self.reconstruction.ReconstructReadonlyObservation,
            reconstruction_pb2.ReconstructReadonlyObservationRequest(
                derived_checkpoint=derived_checkpoint,
                raw_response=raw_response,
                consumed_at=consumed_at,
                retained_results=[
                    reconstruction_pb2.RetainedToolResult(call_id=call_id, result_json=result)
                    for call_id, result in sorted(retained_results.items())
                ],
            ),
        )
        return ObservationBinding(
            derived_checkpoint=found.derived_checkpoint,
            derived_checkpoint_digest=found.derived_checkpoint_digest,
            witness_digest=found.witness_digest,
        )

    def commit_recovery(self, recovery: RecoveryCommit) -> Submitted[admission_pb2.RecoveryOutcome]:
        committed: ledger_pb2.CommitInvalidReadRecoveryResponse = call(
            self.ledger.CommitInvalidReadRecovery,
            ledger_pb2.CommitInvalidReadRecoveryRequest(
                run_id=recovery.run_id,
                request_id=recovery.request_id,
                recovery_id=recovery.recovery_id,
                actor=recovery.actor,
                request_content_digest=recovery.request_content_digest,
                candidate_digest=recovery.candidate_digest,
                expected_head_hash=recovery.expected_head_hash,
                policy_revision=recovery.policy_revision,
                valid_for_seconds=recovery.valid_for_seconds,
                workflow=recovery.workflow,
                reviewed_rejection=(
                    reviewed_rejection_to_proto(recovery.reviewed) if recovery.reviewed else None
                ),
                corrective_provider=(
                    corrective_provider_to_proto(recovery.corrective)
                    if recovery.corrective
                    else None
                ),
                **_observation_fields(recovery.observation),  # type: ignore[arg-type]
            ),
        )
        return Submitted(recovery_outcome(committed.recovery), committed.created)
