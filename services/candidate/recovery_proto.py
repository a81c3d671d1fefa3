"""Protobuf translation of recovery candidates and of the admissibility check's handoff."""

from __future__ import annotations

from forge.continuity.v1 import candidate_pb2, common_pb2
from services.candidate.domain.recovery import RecoveryCandidate
from services.candidate.domain.recovery.readonly_observation import ObservationProof
from shared.contract.handoff_proto import admissibility_handoff_to_proto, hold_to_proto


def recovery_candidate_to_proto(
    candidate: RecoveryCandidate, *, include_commit_inputs: bool = False
) -> candidate_pb2.RecoveryCandidate:
    found = candidate.commit_inputs if include_commit_inputs else None
    return candidate_pb2.RecoveryCandidate(
        run_id=candidate.run_id,
        request_id=candidate.request_id,
        eligible=candidate.eligible,
        candidate_digest=candidate.candidate_digest,
        holds=[
            hold_to_proto(
                reason=h.reason.value,
                requirement=h.requirement.value,
                detail=h.detail,
                subject=h.subject,
            )
            for h in candidate.holds
        ],
        handoff=admissibility_handoff_to_proto(candidate.handoff),
        policy_revision=candidate.policy_revision,
        journal_head=common_pb2.JournalHead(
            sequence=candidate.journal_head.sequence, hash=candidate.journal_head.hash
        ),
        observation=_observation(candidate.observation),
        commit_inputs=(
            candidate_pb2.CommitInputs(
                derived_checkpoint=found.content,
                derived_checkpoint_digest=found.digest,
                witness_digest=found.witness_digest,
            )
            if found is not None
            else None
        ),
    )


def _observation(proof: ObservationProof | None) -> candidate_pb2.ObservationProof | None:
    if proof is None:
        return None
    return candidate_pb2.ObservationProof(
        pending_checkpoint_digest=proof.pending_checkpoint_digest,
        consumed_response_digest=proof.consumed_response_digest,
        consumed_at=proof.consumed_at,
        retained_result_digests=dict(proof.retained_result_digests),
        evidence_call_id=proof.evidence_call_id,
        derived_checkpoint_digest=proof.derived_checkpoint_digest,
        witness_digest=proof.witness_digest,
    )
