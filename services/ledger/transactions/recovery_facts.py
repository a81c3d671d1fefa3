"""What the recovery transaction asks the recovery-workflow registry and the admissibility check
(ADR 0009, ADR 0013): the evidence and the shared facts as read inside the transaction
(``transactions/recovery.py`` step R.4), and the refusal an unresolved outcome raises."""

from __future__ import annotations

from collections.abc import Sequence

from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.policy import PolicySettings
from services.ledger.domain.runs import Run
from services.ledger.transactions.base import LedgerContext
from services.ledger.transactions.recovery_input import RecoveryInput
from shared.continuity.admissibility_facts import Unresolved
from shared.continuity.recovery import Evidence, Situation, Workflow
from shared.continuity.request_history import JournalRow, consumed_from, request_history
from shared.continuity.timeutil import deadline_remaining_seconds
from shared.contract.handoff_proto import handoff_to_proto
from shared.runtime.errors import FailedPrecondition, PreconditionViolation


def evidence(
    recovery: RecoveryInput, rows: Sequence[JournalRow], record: ExecutionRequestRecord, run: Run
) -> Evidence:
    """The native evidence the workflow judges, read now inside the transaction."""
    return Evidence(
        rows=tuple(rows),
        history=request_history(rows, recovery.request_id),
        source_revision=run.spec.source_revision,
        pending_checkpoint_digest=record.checkpoint_digest,
        inputs=recovery.inputs,
    )


def situation(
    workflow: Workflow,
    recovery: RecoveryInput,
    found: Evidence,
    record: ExecutionRequestRecord,
    *,
    settings: PolicySettings,
    outstanding: tuple[str, ...],
    roles: frozenset[str],
    run: Run,
    context: LedgerContext,
) -> Situation:
    """The facts every workflow's check shares, with the actor's roles asked now."""
    return Situation(
        state=record.state.value,
        outstanding=outstanding,
        workflow_enabled=workflow.enabled(settings),
        actor=recovery.actor,
        actor_has_authority=workflow.roles <= roles,
        consumed=consumed_from(
            found.rows,
            run.spec.command_limit,
            deadline_remaining_seconds(run.spec.active_deadline_at, context.clock()),
        ),
    )


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
        # Every refusal the check makes carries its handoff (the 001 principle).
        details=[handoff_to_proto(outcome.handoff)],
    )
