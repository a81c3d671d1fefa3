"""What the recovery transaction asks the admissibility check (ADR 0009): who may recover, and
each workflow's facts as read inside the transaction (``transactions/recovery.py`` step R.4),
and the refusal an unresolved outcome raises."""

from __future__ import annotations

from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.policy import PolicySettings
from services.ledger.domain.recoveries import (
    NEVER_CLAIMED,
    READONLY_OBSERVATION,
    REJECTED_BOUNDARY,
)
from services.ledger.domain.runs import Run
from services.ledger.transactions.recovery_input import RecoveryInput
from shared.continuity.admissibility import ActionFacts, Consumed, Unresolved
from shared.continuity.readonly_observation import ObservationCustody, readonly_observation_facts
from shared.continuity.rejected_boundary import refusal_problems, rejected_boundary_facts
from shared.continuity.request_history import RequestHistory, never_claimed_facts
from shared.runtime.errors import FailedPrecondition, PreconditionViolation


def workflow_enabled(settings: PolicySettings, workflow: str) -> bool:
    """The policy enables recovery at all, and this workflow's own switch."""
    return (
        settings.enabled
        and {
            NEVER_CLAIMED: True,
            REJECTED_BOUNDARY: settings.allow_pre_admission_recovery,
            READONLY_OBSERVATION: settings.allow_readonly_observation_recovery,
        }[workflow]
    )


def action_facts(
    recovery: RecoveryInput,
    history: RequestHistory,
    custody: ObservationCustody,
    record: ExecutionRequestRecord,
    run: Run,
    *,
    state: str,
    outstanding: tuple[str, ...],
    workflow_enabled: bool,
    actor_has_authority: bool,
    consumed: Consumed,
) -> ActionFacts:
    """The workflow's admissibility facts, read now inside the transaction."""
    if recovery.workflow == READONLY_OBSERVATION:
        return readonly_observation_facts(
            history,
            custody,
            state=state,
            outstanding=outstanding,
            workflow_enabled=workflow_enabled,
            actor=recovery.actor,
            actor_has_authority=actor_has_authority,
            consumed=consumed,
        )
    if recovery.reviewed is None:
        return never_claimed_facts(
            history,
            state=state,
            outstanding=outstanding,
            workflow_enabled=workflow_enabled,
            actor=recovery.actor,
            actor_has_authority=actor_has_authority,
            consumed=consumed,
        )
    problems = refusal_problems(
        history,
        recovery.reviewed,
        source_revision=run.spec.source_revision,
        pending_checkpoint_digest=record.checkpoint_digest,
    )
    return rejected_boundary_facts(
        history,
        problems,
        state=state,
        outstanding=outstanding,
        workflow_enabled=workflow_enabled,
        actor=recovery.actor,
        actor_has_authority=actor_has_authority,
        consumed=consumed,
    )


def failed_sequence(
    recovery: RecoveryInput, history: RequestHistory, custody: ObservationCustody
) -> int:
    if recovery.observation is not None:
        return custody.failed_sequence
    if recovery.reviewed is not None:
        return history.claimed_failures[0][0]
    return history.unclaimed_failure_sequence


def unresolved_refusal(outcome: Unresolved, run_id: str, request_id: str) -> FailedPrecondition:
    """FAILED_PRECONDITION RECOVERY_UNRESOLVED, one violation per refusal of the check."""
    holds = sorted({refusal.hold for refusal in outcome.refusals})
    return FailedPrecondition(
        "RECOVERY_UNRESOLVED",
        "the admissibility check leaves the request unresolved: " + ", ".join(holds),
        metadata={"run_id": run_id, "request_id": request_id, "holds": ",".join(holds)},
        precondition_violations=[
            PreconditionViolation(refusal.hold, refusal.subject, refusal.detail)
            for refusal in outcome.refusals
        ],
    )
