"""Protobuf translation of the handoff (one type: the candidate's and the admissibility check's)
and of holds, shared by the candidate (continuity and recovery candidates) and the ledger
(reconciliation snapshots and decisions)."""

from __future__ import annotations

from forge.continuity.v1 import common_pb2
from shared.continuity.admissibility_facts import Handoff, Refusal
from shared.contract.terms import enum_number


def handoff_to_proto(handoff: Handoff) -> common_pb2.HandoffPayload:
    consumed = handoff.consumed
    return common_pb2.HandoffPayload(
        known_effects=[
            common_pb2.KnownEffect(description=e.description, journal_sequence=e.journal_sequence)
            for e in handoff.known_effects
        ],
        unresolved_alternatives=[
            common_pb2.UnresolvedAlternative(subject=u.subject, alternatives=list(u.alternatives))
            for u in handoff.unresolved_alternatives
        ],
        remaining_obligations=[
            common_pb2.RemainingObligation(description=o.description, blocked_by=o.blocked_by)
            for o in handoff.remaining_obligations
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


def hold_to_proto(*, reason: str, requirement: str, detail: str, subject: str) -> common_pb2.Hold:
    """One hold; ``reason`` and ``requirement`` are contract enum names without their prefix."""
    return common_pb2.Hold(
        reason=enum_number(common_pb2.HoldReason, reason),
        requirement=enum_number(common_pb2.HoldRequirement, requirement),
        detail=detail,
        subject=subject,
    )


def refusal_to_hold(refusal: Refusal) -> common_pb2.Hold:
    return hold_to_proto(
        reason=refusal.hold,
        requirement=refusal.requirement,
        detail=refusal.detail,
        subject=refusal.subject,
    )
