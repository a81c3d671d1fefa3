"""Protobuf translation of recovery candidates and of the admissibility check's handoff."""

from __future__ import annotations

from forge.continuity.v1 import candidate_pb2, common_pb2
from services.candidate.domain.observation import ObservationProof
from services.candidate.domain.recovery import RecoveryCandidate
from shared.admissibility import Handoff
from shared.contract import enum_number


def admissibility_handoff_to_proto(handoff: Handoff) -> common_pb2.HandoffPayload:
    consumed = handoff.consumed
    return common_pb2.HandoffPayload(
        known_effects=[
            common_pb2.KnownEffect(description=description, journal_sequence=sequence)
            for description, sequence in handoff.known_effects
        ],
        unresolved_alternatives=[
            common_pb2.UnresolvedAlternative(subject=subject, alternatives=list(alternatives))
            for subject, alternatives in handoff.unresolved_alternatives
        ],
        remaining_obligations=[
            common_pb2.RemainingObligation(description=description, blocked_by=blocked_by)
            for description, blocked_by in handoff.remaining_obligations
        ],
        permitted_next_actions=[
            common_pb2.PermittedAction(action=a.action, description=a.description)
            for a in handoff.permitted_next_actions
        ],
        consumed_resources=common_pb2.ConsumedResources(
            model_responses_consumed=consumed.model_responses,
            tool_calls=consumed.tool_calls,
            commands_used=consumed.commands_used,
            command_limit=consumed.command_limit,
            deadline_remaining_seconds=consumed.deadline_remaining_seconds,
        ),
        bound_requests=[
            common_pb2.BoundRequest(
                request_id=b.request_id,
                execution_request_id=b.execution_request_id,
                state=b.state,
                claimed=b.claimed,
                failed_unclaimed=b.failed_unclaimed,
            )
            for b in handoff.bound_requests
        ],
    )


def recovery_candidate_to_proto(candidate: RecoveryCandidate) -> candidate_pb2.RecoveryCandidate:
    return candidate_pb2.RecoveryCandidate(
        run_id=candidate.run_id,
        request_id=candidate.request_id,
        eligible=candidate.eligible,
        candidate_digest=candidate.candidate_digest,
        holds=[
            common_pb2.Hold(
                reason=enum_number(common_pb2.HoldReason, h.reason.value),
                requirement=enum_number(common_pb2.HoldRequirement, h.requirement.value),
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
