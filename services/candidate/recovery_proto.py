"""Protobuf translation of recovery candidates and of the admissibility check's handoff."""

from __future__ import annotations

from forge.continuity.v1 import candidate_pb2, common_pb2
from services.candidate.domain.recovery import RecoveryCandidate
from services.candidate.domain.recovery.readonly_observation import ObservationProof
from services.candidate.hold_proto import add_holds
from shared.contract.handoff_proto import handoff_to_proto


def write_recovery_candidate(
    into: candidate_pb2.RecoveryCandidate,
    candidate: RecoveryCandidate,
    *,
    include_commit_inputs: bool = False,
) -> None:
    """The candidate written into the response's own message (holds added in place, as the held
    run's candidate's are)."""
    into.MergeFrom(_without_holds(candidate, include_commit_inputs))
    add_holds(into.holds, candidate.holds)


def _without_holds(
    candidate: RecoveryCandidate, include_commit_inputs: bool
) -> candidate_pb2.RecoveryCandidate:
    found = candidate.commit_inputs if include_commit_inputs else None
    return candidate_pb2.RecoveryCandidate(
        run_id=candidate.run_id,
        request_id=candidate.request_id,
        eligible=candidate.eligible,
        candidate_digest=candidate.candidate_digest,
        handoff=handoff_to_proto(candidate.handoff),
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
