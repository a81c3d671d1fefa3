"""Admission's ports over gRPC: the ledger, candidate and reconstruction services. Protobuf ↔
domain translation only; downstream refusals arrive as the typed domain errors they carried
(``shared.runtime.client.call``), so a refusal keeps its reason on its way back to the operator."""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
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
    InvalidReadCandidate,
    Reconstruction,
)
from services.admission.workflows.readonly_observation import ObservationProofView
from services.admission.workflows.recovery_base import (
    ObservationBinding,
    RecoveryCandidateView,
    RecoveryCommit,
    RecoveryKey,
)
from shared.continuity.canonical import parse_json, sha256_digest
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
    candidate: candidate_pb2.InvalidReadContinuityCandidate,
) -> InvalidReadCandidate:
    proof = candidate.proof
    return InvalidReadCandidate(
        run_id=candidate.run_id,
        eligible=candidate.eligible,
        version=candidate.version,
        digests=_digests(candidate.digests),
        holds=tuple(_hold(hold) for hold in candidate.holds),
        policy_revision=candidate.policy_revision,
        journal_head_hash=candidate.journal_head.hash,
        proof=CandidateProof(
            checkpoint_digest=proof.checkpoint_digest,
            consumed_response_digest=proof.consumed_response_digest,
            consume_sequence=proof.consume_sequence,
            derived_checkpoint_digest=proof.derived_checkpoint_digest,
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
class _Reusable:
    """What the candidate of the admission in progress was reconstructed from and what it got.
    Admission's rebuild of the derived checkpoint asks for the same blobs, the same consume
    entry and the same reconstruction; it is answered from here only for exactly those inputs
    (blobs by their SHA-256, the reconstruction by identical bytes, version and consumption
    time), and from the ledger and reconstruction otherwise. The ledger's commit re-checks the
    head, the consumed response, the held state and the derived checkpoint's digest as before."""

    run_id: str
    inputs: candidate_pb2.InvalidReadAdmissionInputs

    def blob(self, digest: str) -> bytes | None:
        for content in (self.inputs.checkpoint, self.inputs.raw_response):
            if content and sha256_digest(content) == digest:
                return bytes(content)
        return None

    def names_consume(self, run_id: str, sequence: int) -> bool:
        return (
            run_id == self.run_id
            and sequence == self.inputs.consume_sequence
            and bool(self.inputs.consume_payload_json)
        )

    def reconstruction(
        self, checkpoint: bytes, raw_response: bytes, version: int, consumed_at: str
    ) -> Reconstruction | None:
        inputs = self.inputs
        payload = parse_json(inputs.consume_payload_json) if inputs.consume_payload_json else None
        used_at = payload.get("consumed_at") if isinstance(payload, dict) else None
        if (
            checkpoint != inputs.checkpoint
            or raw_response != inputs.raw_response
            or version != inputs.reconstruction_version
            or consumed_at != used_at
            or not inputs.derived_checkpoint
            or sha256_digest(inputs.derived_checkpoint) != inputs.derived_checkpoint_digest
        ):
            return None
        return Reconstruction(
            derived_checkpoint=bytes(inputs.derived_checkpoint),
            derived_checkpoint_digest=inputs.derived_checkpoint_digest,
            witness_digest=inputs.witness_digest,
        )


# The candidate's inputs of the admission this thread is serving (set by each candidate read, so
# a later admission on the same thread never sees an earlier one's).
_REUSABLE: ContextVar[_Reusable | None] = ContextVar("admission_reusable_inputs", default=None)


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
        _REUSABLE.set(None)
        response: candidate_pb2.GetInvalidReadContinuityCandidateResponse = call(
            self.candidate.GetInvalidReadContinuityCandidate,
            candidate_pb2.GetInvalidReadContinuityCandidateRequest(
                run_id=run_id, version=version, include_admission_inputs=True
            ),
        )
        if response.HasField("admission_inputs"):
            _REUSABLE.set(_Reusable(run_id, response.admission_inputs))
        return _candidate(response.candidate)

    def blob(self, digest: str) -> bytes:
        reusable = _REUSABLE.get()
        if reusable is not None:
            found = reusable.blob(digest)
            if found is not None:
                return found
        content: bytes = call(self.ledger.GetBlob, ledger_pb2.GetBlobRequest(digest=digest)).content
        return content

    def journal_payload(self, run_id: str, sequence: int) -> str | None:
        reusable = _REUSABLE.get()
        if reusable is not None and reusable.names_consume(run_id, sequence):
            return reusable.inputs.consume_payload_json
        entries = call(
            self.ledger.ReadJournal,
            ledger_pb2.ReadJournalRequest(run_id=run_id, from_sequence=sequence, page_size=1),
        ).entries
        return str(entries[0].payload_json) if entries else None

    def reconstruct(
        self, checkpoint: bytes, raw_response: bytes, reconstruction_version: int, consumed_at: str
    ) -> Reconstruction:
        reusable = _REUSABLE.get()
        if reusable is not None:
            reused = reusable.reconstruction(
                checkpoint, raw_response, reconstruction_version, consumed_at
            )
            if reused is not None:
                return reused
        derived: reconstruction_pb2.ReconstructInvalidReadResponse = call(
            self.reconstruction.ReconstructInvalidRead,
            reconstruction_pb2.ReconstructInvalidReadRequest(
                checkpoint=checkpoint,
                raw_response=raw_response,
                version=reconstruction_pb2.ReconstructionVersion.ValueType(reconstruction_version),
                consumed_at=consumed_at,
            ),
        )
        return Reconstruction(
            derived_checkpoint=derived.derived_checkpoint,
            derived_checkpoint_digest=derived.derived_checkpoint_digest,
            witness_digest=derived.witness_digest,
        )

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
