"""Reconciliation of a claimed execution request whose owner was lost
(docs/adr/0010-reconciliation.md): the reviewed decision and reading it back. The inspection and
the recorded verification are in ``reconciliation_review.py``.

The decision is one transaction: lock the policy and the request row, apply idempotency by
reconciliation_id, re-check the expected state, generation and inspection digest, re-run the
admissibility check (shared.continuity.admissibility) on facts read now, then fence the old
generation for
ever and either queue the same stage under a new execution request (RETRY_STAGE) or make the
request terminal unresolved (MARK_UNRESOLVED). Either releases the claim and its pending slot,
so either needs a recorded proof of the prior owner's cessation; MARK_UNRESOLVED may instead
rest on the administrator's acknowledgement that it is unproven, which the settlement records
(ADR 0045). Nothing charged is refunded. Every refusal writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import Connection

from services.ledger.domain.execution import (
    ExecutionRequestRecord,
    LeaseBounds,
    RequestState,
    bound_lease,
    queued_request,
)
from services.ledger.domain.journal import EntryKind
from services.ledger.domain.reconciliation import (
    ReconcileInput,
    retry_request_id,
    verification_problems,
)
from services.ledger.domain.reconciliation_records import StoredReconciliation
from services.ledger.domain.runs import check_identifier
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository import reconciliations as reconciliation_rows
from services.ledger.transactions.base import (
    LedgerContext,
    append_entry,
    check_capacity,
    existing_run,
    retry_on_unique_conflict,
)
from services.ledger.transactions.execution_stops import Expiry
from services.ledger.transactions.reconciliation_review import (
    RECONCILIATION_ROLE,
    Authority,
    facts_of,
    request_of_run,
    snapshot_of,
    stale_digest,
)
from shared.continuity.admissibility import check
from shared.continuity.admissibility_facts import RETRY_STAGE, ActionFacts, Handoff, Unresolved
from shared.continuity.idempotency import StoredAction, replay_or_conflict
from shared.continuity.timeutil import from_text, to_text
from shared.contract.handoff_proto import handoff_to_proto
from shared.runtime.errors import FailedPrecondition, NotFound, PreconditionViolation


@dataclass(frozen=True)
class Reconciled:
    """A saved decision, its requests as they are now, and whether this call created it."""

    saved: StoredReconciliation
    reconciled: ExecutionRequestRecord
    retry: ExecutionRequestRecord | None
    created: bool


# --- the decision ---------------------------------------------------------------------------------


def commit(
    context: LedgerContext, authority: Authority, request: ReconcileInput, expiry: Expiry
) -> Reconciled:
    """Decide, or replay the identical earlier decision; refusals write nothing (``expiry``'s
    sweep is rolled back with them)."""
    request.validate()
    return _commit(context, authority, request, expiry)


@retry_on_unique_conflict
def _commit(
    context: LedgerContext, authority: Authority, request: ReconcileInput, expiry: Expiry
) -> Reconciled:
    # A concurrent decision that commits first fires a unique constraint; the retry answers as
    # the second caller would: replay, conflict or refusal.
    with context.engine.begin() as connection:
        return _reconcile(context, connection, authority, request, expiry)


def _replay(
    connection: Connection, saved: StoredReconciliation, request: ReconcileInput, now: datetime
) -> Reconciled:
    replay_or_conflict(
        id_field="reconciliation_id",
        action_id=request.reconciliation_id,
        stored=StoredAction(
            saved.actor, saved.request_content_digest, stored_at=from_text(saved.created_at)
        ),
        identity=request.actor,
        content_digest=request.content_digest,
        now=now,
    )
    return _read_back(connection, saved)


def _read_back(connection: Connection, saved: StoredReconciliation) -> Reconciled:
    reconciled = request_of_run(connection, saved.run_id, saved.execution_request_id)
    retry = None
    if saved.retry_execution_request_id:
        retry = request_of_run(connection, saved.run_id, saved.retry_execution_request_id)
    return Reconciled(saved, reconciled, retry, created=False)


def _reconcile(
    context: LedgerContext,
    connection: Connection,
    authority: Authority,
    request: ReconcileInput,
    expiry: Expiry,
) -> Reconciled:
    # C.1 take the policy lock (writers that judge the policy serialize on it); queued requests
    # whose lease ran out expire first
    policy = expiry.lock_policy(connection)
    # C.2 idempotency by reconciliation_id
    saved = reconciliation_rows.get_by_reconciliation_id(connection, request.reconciliation_id)
    if saved is not None:
        return _replay(connection, saved, request, context.clock())
    # C.3 lock the request row: a late worker write and this decision serialize here
    run = existing_run(connection, request.run_id)
    record = request_of_run(
        connection, request.run_id, request.execution_request_id, for_update=True
    )
    # C.4 the state and generation the reviewer saw, and the inspection digest, are unchanged
    if (
        record.state.value != request.expected_state
        or record.lease_generation != request.expected_lease_generation
    ):
        raise FailedPrecondition(
            "RECONCILIATION_STATE_CHANGED",
            f"the request is {record.state.value} at generation {record.lease_generation}, not "
            f"{request.expected_state} at {request.expected_lease_generation}; review again",
            metadata={
                "state": record.state.value,
                "lease_generation": str(record.lease_generation),
            },
        )
    snapshot = snapshot_of(context, connection, run, record, request.reconciliation_id)
    if snapshot.digest != request.reconciliation_digest:
        raise stale_digest(request.reconciliation_digest, snapshot.digest)
    # C.5 the admissibility check on facts read now, the actor's authority asked now
    now = context.clock()
    problems = verification_problems(snapshot, now)
    facts = facts_of(
        connection,
        snapshot,
        decision=request.decision,
        actor=request.actor,
        actor_has_authority=RECONCILIATION_ROLE in authority(request.actor),
        workflow_enabled=policy.settings.enabled,
        now_problems=problems,
        cessation_unproven_acknowledged=request.cessation_unproven_acknowledged,
    )
    outcome = check(facts)
    if isinstance(outcome, Unresolved):
        raise unresolved_refusal(outcome, request)
    retry: ExecutionRequestRecord | None = None
    bounds: LeaseBounds | None = None
    created_at = to_text(now)
    if request.decision == RETRY_STAGE:
        # C.6 ordinary caps: the retry replaces the claimed request among the pending ones
        check_capacity(
            policy,
            per_run=0,
            pending=request_rows.pending_count(connection) - 1,
        )
        # C.7 a lease no longer than the interrupted one, bounded exactly as at admission
        bounds = bound_lease(record.lease_seconds, policy.settings.window_seconds, run, now)
        lease_seconds = bounds.granted_seconds
        retry = queued_request(
            execution_request_id=retry_request_id(
                run.spec.run_id, record.request_id, request.reconciliation_id
            ),
            run_id=run.spec.run_id,
            attempt_id=record.attempt_id,
            request_id=record.request_id,
            checkpoint_digest=record.checkpoint_digest,
            policy_revision=policy.revision,
            lease_seconds=lease_seconds,
            now=now,
        )
    verification = problems[1]
    # MARK_UNRESOLVED without a recorded proof passed the check only on the acknowledgement
    unproven = verification is None and request.decision != RETRY_STAGE
    # C.8 the settlement (fencing the generation) and, for a retry, its request event
    settlement = append_entry(
        context,
        connection,
        run.spec.run_id,
        EntryKind.RECONCILIATION_SETTLEMENT,
        {
            "reconciliation_id": request.reconciliation_id,
            "request_id": record.request_id,
            "execution_request_id": record.execution_request_id,
            "decision": request.decision,
            "fenced_lease_generation": record.lease_generation,
            "reconciliation_digest": snapshot.digest,
            "evidence_reference": request.evidence_reference,
            "verification_sequence": verification.sequence if verification else 0,
            # prior results stay readable but never complete or satisfy the retry
            "excluded_execution_request_id": record.execution_request_id,
            "retry_execution_request_id": retry.execution_request_id if retry else "",
            # spec 002: how the claim's release rests on the prior owner's cessation (ADR 0045)
            "cessation": "unproven_acknowledged" if unproven else "verified",
        },
        request.actor,
    )
    reconciled = replace(
        record,
        state=RequestState.RECONCILED if retry else RequestState.UNRESOLVED,
        updated_at=created_at,
    )
    request_rows.update_execution_request(connection, reconciled)
    if retry is not None:
        request_rows.insert_execution_request(connection, retry)
        append_entry(
            context,
            connection,
            run.spec.run_id,
            EntryKind.REQUEST_EVENT,
            {
                "execution_request_id": retry.execution_request_id,
                "event": "queued_by_reconciliation",
                "reconciliation_id": request.reconciliation_id,
                "replaces_execution_request_id": record.execution_request_id,
                "attempt_id": retry.attempt_id,
                "lease_seconds": retry.lease_seconds,
            },
            request.actor,
        )
    # C.9 the saved decision
    saved = StoredReconciliation(
        run_id=run.spec.run_id,
        request_id=record.request_id,
        reconciliation_id=request.reconciliation_id,
        execution_request_id=record.execution_request_id,
        decision=request.decision,
        actor=request.actor,
        request_content_digest=request.content_digest,
        reconciliation_digest=snapshot.digest,
        evidence_reference=request.evidence_reference,
        fenced_lease_generation=record.lease_generation,
        verification_sequence=verification.sequence if verification else 0,
        settlement_sequence=settlement.sequence,
        retry_execution_request_id=retry.execution_request_id if retry else "",
        handoff=decided_handoff(facts, reconciled, retry, request.reconciliation_id),
        created_at=created_at,
        lease_bounds=bounds,
        cessation_unproven_acknowledged=unproven,
    )
    reconciliation_rows.insert_reconciliation(connection, saved)
    return Reconciled(saved, reconciled, retry, created=True)


def decided_handoff(
    facts: ActionFacts,
    reconciled: ExecutionRequestRecord,
    retry: ExecutionRequestRecord | None,
    reconciliation_id: str,
) -> Handoff:
    """The handoff of the state the decision leaves (001: the permitted next actions are the
    admissibility check's output), not of the state it was decided on: the request is reconciled
    or unresolved, this decision spends its one identity, and a retry is outstanding."""
    after = replace(
        facts,
        bound=replace(facts.bound, state=reconciled.state.value),
        spent_by=(reconciliation_id,),
        outstanding=(*facts.outstanding, *((retry.execution_request_id,) if retry else ())),
    )
    return check(after).handoff


def unresolved_refusal(outcome: Unresolved, request: ReconcileInput) -> FailedPrecondition:
    """FAILED_PRECONDITION RECONCILIATION_UNRESOLVED, one violation per refusal of the check."""
    holds = sorted({refusal.hold for refusal in outcome.refusals})
    return FailedPrecondition(
        "RECONCILIATION_UNRESOLVED",
        "the admissibility check leaves the request held: " + ", ".join(holds),
        metadata={
            "execution_request_id": request.execution_request_id,
            "holds": ",".join(holds),
        },
        precondition_violations=[
            PreconditionViolation(refusal.hold, refusal.subject, refusal.detail)
            for refusal in outcome.refusals
        ],
        # Every refusal the check makes carries its handoff (the 001 principle).
        details=[handoff_to_proto(outcome.handoff)],
    )


def get(context: LedgerContext, run_id: str, execution_request_id: str) -> Reconciled:
    """The saved decision of an execution request, its requests as they are now."""
    check_identifier("run_id", run_id)
    check_identifier("execution_request_id", execution_request_id)
    with context.read() as connection:
        saved = reconciliation_rows.get_for_execution_request(connection, execution_request_id)
        if saved is None or saved.run_id != run_id:
            raise NotFound(
                "RECONCILIATION_NOT_FOUND",
                f"no reconciliation of {execution_request_id} in run {run_id}",
                metadata={"run_id": run_id, "execution_request_id": execution_request_id},
            )
        return _read_back(connection, saved)
