"""The recovery transaction of every recovery workflow (docs/adr/0009-admissibility-check.md)
and reading a saved recovery back.

One transaction: lock the policy, apply idempotency by recovery_id, re-run the admissibility
check with the actor's authority re-checked now (the rejected boundary also re-checks its pinned
reports and the corrective provider configuration against the stored documents; the read-only
observation its read custody and the binding of its separate derived checkpoint), then preserve
everything, append a recovery witness and a request event, and queue the same execution request
with a new finite lease bounded exactly as at admission. No attempt, model allowance or command
quota is added.

What a recovery submits is checked in ``recovery_input``; the facts the admissibility check reads
for each workflow are built in ``recovery_facts``.
"""

from __future__ import annotations

from dataclasses import asdict, replace

from sqlalchemy import Connection

from services.ledger.domain.admission import check_capacity
from services.ledger.domain.execution import (
    PENDING_STATES,
    RequestState,
    bound_lease,
    lease_expiry,
)
from services.ledger.domain.journal import EntryKind
from services.ledger.domain.recoveries import WORKFLOWS, StoredRecovery
from services.ledger.domain.recovery_authority import RECOVERY_ROLES, Authority
from services.ledger.domain.runs import check_identifier
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository import journal as journal_rows
from services.ledger.repository import recoveries as recovery_rows
from services.ledger.repository import tickets as ticket_rows
from services.ledger.transactions import readonly_observation as observation
from services.ledger.transactions.base import (
    LedgerContext,
    append_entry,
    check_head,
    existing_run,
    lock_policy,
    retry_on_unique_conflict,
)
from services.ledger.transactions.execution import existing_request
from services.ledger.transactions.recovery_facts import (
    action_facts,
    failed_sequence,
    unresolved_refusal,
    workflow_enabled,
)
from services.ledger.transactions.recovery_input import Recovery, RecoveryInput
from services.ledger.transactions.rejected_boundary import check_pinned_evidence
from shared.continuity.admissibility import Unresolved, check
from shared.continuity.idempotency import StoredAction, replay_or_conflict
from shared.continuity.readonly_observation import observation_custody
from shared.continuity.rejected_boundary import ASSERTION_KIND
from shared.continuity.request_history import consumed_from, request_history
from shared.continuity.timeutil import deadline_remaining_seconds, to_text
from shared.runtime.errors import (
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    NotFound,
    PreconditionViolation,
)


def commit_never_claimed(
    context: LedgerContext, authority: Authority, recovery: RecoveryInput
) -> Recovery:
    """Recover (never-claimed or rejected-boundary, by ``recovery.workflow``), or replay the
    identical earlier recovery; refusals write nothing."""
    recovery.validate()
    return _commit(context, authority, recovery)


@retry_on_unique_conflict
def _commit(context: LedgerContext, authority: Authority, recovery: RecoveryInput) -> Recovery:
    # A concurrent recovery that commits first fires a unique constraint; the retry answers as
    # the second caller would: replay or conflict.
    with context.engine.begin() as connection:
        return _recover(context, connection, authority, recovery)


def _replay(connection: Connection, stored: StoredRecovery, recovery: RecoveryInput) -> Recovery:
    replay_or_conflict(
        id_field="recovery_id",
        action_id=recovery.recovery_id,
        stored=StoredAction(stored.actor, stored.request_content_digest),
        identity=recovery.actor,
        content_digest=recovery.request_content_digest,
    )
    if stored.recovery_id != recovery.recovery_id:
        # Same identity and content digest under another recovery id cannot happen (the digest
        # covers the id); refuse rather than answer with another action's result.
        raise FailedPrecondition(
            "RECOVERY_UNRESOLVED",
            "another recovery already used this request's one action",
            metadata={"recovery_id": stored.recovery_id, "holds": "RECOVERY_SPENT"},
        )
    record = existing_request(connection, stored.execution_request_id)
    return Recovery(stored, record, created=False)


def _recover(
    context: LedgerContext, connection: Connection, authority: Authority, recovery: RecoveryInput
) -> Recovery:
    # R.1 lock the current policy row
    policy = lock_policy(connection)
    # R.2 idempotency by recovery_id, then one recovery per request and workflow
    for stored in (
        recovery_rows.get_by_recovery_id(connection, recovery.recovery_id),
        recovery_rows.get_for_request(
            connection, recovery.run_id, recovery.request_id, recovery.workflow
        ),
    ):
        if stored is not None:
            return _replay(connection, stored, recovery)
    # R.3 the ticket exists; the policy is still the candidate's revision; the head is unmoved
    ticket = ticket_rows.get_ticket(connection, recovery.run_id, recovery.request_id)
    if ticket is None:
        raise NotFound(
            "ADMISSION_NOT_FOUND",
            f"no admission request {recovery.request_id} for run {recovery.run_id}",
            metadata={"run_id": recovery.run_id, "request_id": recovery.request_id},
        )
    if policy.revision != recovery.policy_revision:
        raise FailedPrecondition(
            "POLICY_REVISION_CHANGED",
            f"policy moved from revision {recovery.policy_revision} to {policy.revision}; "
            "read a new candidate",
            metadata={"current_revision": str(policy.revision)},
            precondition_violations=[
                PreconditionViolation(
                    "POLICY_REVISION", "policy", f"current revision is {policy.revision}"
                )
            ],
        )
    run = existing_run(connection, recovery.run_id)
    check_head(connection, run.spec.run_id, recovery.expected_head_hash)
    # R.4 the admissibility check, on facts read now, with the actor's authority asked now
    record = existing_request(connection, ticket.ticket.execution_request_id, for_update=True)
    entries = list(journal_rows.iter_journal(connection, run.spec.run_id))
    history = request_history(entries, recovery.request_id)
    custody = observation_custody(entries, history)
    pending = request_rows.list_execution_requests(connection, run.spec.run_id, PENDING_STATES)
    settings = policy.settings
    facts = action_facts(
        recovery,
        history,
        custody,
        record,
        run,
        state=record.state.value,
        outstanding=tuple(r.execution_request_id for r in pending),
        workflow_enabled=workflow_enabled(settings, recovery.workflow),
        actor_has_authority=RECOVERY_ROLES[recovery.workflow] <= authority(recovery.actor),
        consumed=consumed_from(
            entries,
            run.spec.command_limit,
            deadline_remaining_seconds(run.spec.active_deadline_at, context.clock()),
        ),
    )
    outcome = check(facts)
    if isinstance(outcome, Unresolved):
        raise unresolved_refusal(outcome, recovery.run_id, recovery.request_id)
    # R.4b the rejected boundary's pinned evidence, read now: a report or the corrective
    # configuration changed or missing since the candidate refuses the action
    if recovery.reviewed is not None and recovery.corrective is not None:
        check_pinned_evidence(connection, recovery.reviewed, recovery.corrective)
    # R.4c the read-only observation's derived checkpoint is bound to the journal's consumed turn
    if recovery.observation is not None:
        observation.check_binding(connection, recovery.observation, custody)
    # R.5 the queue cap: the requeued request counts as pending again (no new ticket)
    check_capacity(
        policy,
        per_run=0,
        pending=request_rows.count_execution_requests(connection, PENDING_STATES),
    )
    # R.6 bound the new lease exactly as at admission
    now = context.clock()
    lease_seconds = bound_lease(
        recovery.valid_for_seconds, policy.settings.window_seconds, run, now
    )
    # R.7 the refusal settlement (rejected boundary), the witness and the request event; nothing
    # earlier (ticket, seal, failed claim, checkpoint) is touched
    settlement_sequence = 0
    if recovery.reviewed is not None:
        settlement_sequence = append_entry(
            context,
            connection,
            run.spec.run_id,
            EntryKind.REFUSAL_SETTLEMENT,
            {
                "recovery_id": recovery.recovery_id,
                "request_id": recovery.request_id,
                "execution_request_id": record.execution_request_id,
                # an administrator-reviewed assertion with pinned evidence, never a receipt
                "assertion": ASSERTION_KIND,
                "reviewed_rejection_digest": recovery.reviewed.digest,
                "reviewed_rejection": asdict(recovery.reviewed),
                "failed_sequence": history.claimed_failures[0][0],
                "failed_generation": history.claimed_failures[0][1],
            },
            recovery.actor,
        ).sequence
    checkpoint_digest, binding = record.checkpoint_digest, {}
    if recovery.observation is not None:
        # a separate derived checkpoint and invocation binding; the original one stays intact
        checkpoint_digest = recovery.observation.derived_checkpoint_digest
        observation.store_checkpoint(connection, recovery.observation, context.now())
        binding = {
            "invocation_binding": observation.invocation_binding(
                record, checkpoint_digest, policy.revision
            )
        }
    witness = append_entry(
        context,
        connection,
        run.spec.run_id,
        (
            EntryKind.READONLY_OBSERVATION_RECOVERY
            if recovery.observation is not None
            else EntryKind.RECOVERY_WITNESS
        ),
        {
            "recovery_id": recovery.recovery_id,
            "workflow": recovery.workflow,
            "request_id": recovery.request_id,
            "execution_request_id": record.execution_request_id,
            "candidate_digest": recovery.candidate_digest,
            "failed_sequence": failed_sequence(recovery, history, custody),
            "policy_revision": policy.revision,
            **(
                {"corrective_provider": asdict(recovery.corrective)}
                if recovery.corrective is not None
                else {}
            ),
            **observation.witness_fields(recovery.observation, custody),
        },
        recovery.actor,
    )
    event = append_entry(
        context,
        connection,
        run.spec.run_id,
        EntryKind.REQUEST_EVENT,
        {
            "execution_request_id": record.execution_request_id,
            "event": "requeued_by_recovery",
            "recovery_id": recovery.recovery_id,
            "attempt_id": record.attempt_id,
            "lease_generation": record.lease_generation,
            "lease_seconds": lease_seconds,
            **binding,
        },
        recovery.actor,
    )
    # R.8 the same request queued again: same attempt, checkpoint and generation, a new lease
    created_at = to_text(now)
    requeued = replace(
        record,
        checkpoint_digest=checkpoint_digest,
        state=RequestState.QUEUED,
        policy_revision=policy.revision,
        lease_seconds=lease_seconds,
        lease_expires_at=lease_expiry(now, lease_seconds),
        owner="",
        updated_at=created_at,
    )
    request_rows.requeue_execution_request(connection, requeued)
    # R.9 the saved action
    saved = StoredRecovery(
        run_id=run.spec.run_id,
        request_id=recovery.request_id,
        recovery_id=recovery.recovery_id,
        workflow=recovery.workflow,
        actor=recovery.actor,
        request_content_digest=recovery.request_content_digest,
        candidate_digest=recovery.candidate_digest,
        execution_request_id=record.execution_request_id,
        witness_sequence=witness.sequence,
        event_sequence=event.sequence,
        lease_seconds=lease_seconds,
        created_at=created_at,
        settlement_sequence=settlement_sequence,
        reviewed_rejection_digest=recovery.reviewed.digest if recovery.reviewed else "",
        derived_checkpoint_digest=(
            recovery.observation.derived_checkpoint_digest if recovery.observation else ""
        ),
    )
    recovery_rows.insert_recovery(connection, saved)
    return Recovery(saved, requeued, created=True)


def get(context: LedgerContext, run_id: str, request_id: str, workflow: str) -> Recovery:
    """The saved recovery of a request and workflow, its execution request as it is now."""
    check_identifier("run_id", run_id)
    check_identifier("request_id", request_id)
    if workflow not in WORKFLOWS:
        raise InvalidArgument(
            "FIELD_INVALID",
            f"workflow must be one of {', '.join(WORKFLOWS)}",
            metadata={"field": "workflow"},
            field_violations=[FieldViolation("workflow", "unknown workflow")],
        )
    with context.read() as connection:
        stored = recovery_rows.get_for_request(connection, run_id, request_id, workflow)
        if stored is None:
            raise NotFound(
                "RECOVERY_NOT_FOUND",
                f"no {workflow} recovery for request {request_id} of run {run_id}",
                metadata={"run_id": run_id, "request_id": request_id, "workflow": workflow},
            )
        record = existing_request(connection, stored.execution_request_id)
        return Recovery(stored, record, created=False)
