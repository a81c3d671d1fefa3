"""The recovery transaction of every recovery workflow (docs/adr/0009-admissibility-check.md,
docs/adr/0013-recovery-workflow-registry.md) and reading a saved recovery back.

One transaction: lock the policy, apply idempotency by recovery_id, re-run the admissibility
check with the actor's authority re-checked now, then the workflow's own checks of stored
documents (each asked of its descriptor in ``shared.continuity.recovery``: the rejected boundary
reads its pinned reports and the corrective provider configuration again, the read-only
observation binds its derived checkpoint to the journal's turn), then preserve everything, append
the workflow's settlement (if it has one), its witness and a request event, and queue the same
execution request with a new finite lease bounded exactly as at admission. No attempt, model
allowance or command quota is added. Nothing here names a workflow.

What a recovery submits is checked in ``recovery_input``; the evidence and shared facts the
registry and the admissibility check read are built in ``recovery_facts``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from sqlalchemy import Connection

from services.ledger.domain.execution import (
    PENDING_STATES,
    ExecutionRequestRecord,
    RequestState,
    bound_lease,
    lease_expiry,
)
from services.ledger.domain.journal import EntryKind
from services.ledger.domain.recoveries import StoredRecovery
from services.ledger.domain.recovery_authority import Authority
from services.ledger.domain.runs import check_identifier
from services.ledger.repository import blobs as blob_rows
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository import journal_reads
from services.ledger.repository import recoveries as recovery_rows
from services.ledger.repository import tickets as ticket_rows
from services.ledger.transactions.base import (
    LedgerContext,
    append_entry,
    check_capacity,
    check_head,
    existing_run,
    retry_on_unique_conflict,
)
from services.ledger.transactions.execution import existing_request
from services.ledger.transactions.execution_stops import Expiry
from services.ledger.transactions.recovery_facts import evidence, situation, unresolved_refusal
from services.ledger.transactions.recovery_input import Recovery, RecoveryInput
from shared.continuity.admissibility import check
from shared.continuity.admissibility_facts import Unresolved
from shared.continuity.canonical import digest_of
from shared.continuity.derived_format import DERIVED_CHECKPOINT_MEDIA_TYPE
from shared.continuity.idempotency import StoredAction, replay_or_conflict
from shared.continuity.recovery import DerivedCheckpoint
from shared.continuity.recovery import workflow as recovery_workflow
from shared.continuity.timeutil import from_text, to_text
from shared.runtime.errors import (
    FailedPrecondition,
    NotFound,
    PreconditionViolation,
)


def commit_recovery(
    context: LedgerContext, authority: Authority, recovery: RecoveryInput, expiry: Expiry
) -> Recovery:
    """Recover (any workflow of the registry, by ``recovery.workflow``), or replay the identical
    earlier recovery; refusals write nothing (``expiry``'s sweep is rolled back with them)."""
    recovery.validate()
    return _commit(context, authority, recovery, expiry)


@retry_on_unique_conflict
def _commit(
    context: LedgerContext, authority: Authority, recovery: RecoveryInput, expiry: Expiry
) -> Recovery:
    # A concurrent transaction that commits first fires a unique constraint (a recovery of the
    # same request, an upload of the same derived checkpoint, an entry at the same head); the
    # retry answers as the second caller would: replay, conflict, stale head or success.
    with context.engine.begin() as connection:
        return _recover(context, connection, authority, recovery, expiry)


def _replay(
    connection: Connection, stored: StoredRecovery, recovery: RecoveryInput, now: datetime
) -> Recovery:
    replay_or_conflict(
        id_field="recovery_id",
        action_id=recovery.recovery_id,
        stored=StoredAction(
            stored.actor,
            stored.request_content_digest,
            # found by its request and workflow under another id: the one action is spent
            action_id=stored.recovery_id,
            spends=f"request {stored.request_id}'s one {stored.workflow} recovery",
            stored_at=from_text(stored.created_at),
        ),
        identity=recovery.actor,
        content_digest=recovery.request_content_digest,
        now=now,
    )
    record = existing_request(connection, stored.execution_request_id)
    return Recovery(stored, record, created=False)


def _recover(
    context: LedgerContext,
    connection: Connection,
    authority: Authority,
    recovery: RecoveryInput,
    expiry: Expiry,
) -> Recovery:
    # R.1 take the policy lock; queued requests whose lease ran out expire first
    policy = expiry.lock_policy(connection)
    # R.2 idempotency by recovery_id, then one recovery per request and workflow
    for stored in (
        recovery_rows.get_by_recovery_id(connection, recovery.recovery_id),
        recovery_rows.get_for_request(
            connection, recovery.run_id, recovery.request_id, recovery.workflow
        ),
    ):
        if stored is not None:
            return _replay(connection, stored, recovery, context.clock())
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
    workflow = recovery_workflow(recovery.workflow)
    record = existing_request(connection, ticket.ticket.execution_request_id, for_update=True)
    found = evidence(
        recovery, list(journal_reads.iter_journal(connection, run.spec.run_id)), record, run
    )
    judged = workflow.judge(found)
    pending = request_rows.list_execution_requests(connection, run.spec.run_id, PENDING_STATES)
    shared = situation(
        workflow,
        recovery,
        found,
        record,
        settings=policy.settings,
        outstanding=tuple(r.execution_request_id for r in pending),
        roles=authority(recovery.actor),
        run=run,
        context=context,
    )
    outcome = check(workflow.facts(found, judged, shared))
    if isinstance(outcome, Unresolved):
        raise unresolved_refusal(outcome, recovery.run_id, recovery.request_id)
    # R.4b/c the workflow's stored documents, read now (the rejected boundary's pinned reports
    # and corrective configuration; the read-only observation's binding of its checkpoint)
    workflow.commit_checks(found, judged, lambda digest: _content(connection, digest))
    # R.5 the queue cap: the requeued request counts as pending again (no new ticket)
    check_capacity(
        policy,
        per_run=0,
        pending=request_rows.pending_count(connection),
    )
    # R.6 bound the new lease exactly as at admission
    now = context.clock()
    bounds = bound_lease(recovery.valid_for_seconds, policy.settings.window_seconds, run, now)
    lease_seconds = bounds.granted_seconds
    # R.7 the workflow's settlement (if any), its witness and the request event; nothing
    # earlier (ticket, seal, failed claim, checkpoint) is touched
    common = {
        "recovery_id": recovery.recovery_id,
        "request_id": recovery.request_id,
        "execution_request_id": record.execution_request_id,
    }
    settlement_sequence = 0
    if workflow.settlement_kind:
        settlement_sequence = append_entry(
            context,
            connection,
            run.spec.run_id,
            EntryKind(workflow.settlement_kind),
            {**common, **workflow.settlement(found, judged)},
            recovery.actor,
        ).sequence
    checkpoint_digest, binding = record.checkpoint_digest, {}
    derived = recovery.inputs.derived
    if derived is not None:
        # a separate derived checkpoint and invocation binding; the original one stays intact
        checkpoint_digest = derived.digest
        _store_checkpoint(connection, derived, context.now())
        binding = {
            "invocation_binding": _invocation_binding(record, checkpoint_digest, policy.revision)
        }
    witness = append_entry(
        context,
        connection,
        run.spec.run_id,
        EntryKind(workflow.witness_kind),
        {
            **common,
            "workflow": workflow.name,
            "candidate_digest": recovery.candidate_digest,
            "failed_sequence": workflow.failed_sequence(found, judged),
            "policy_revision": policy.revision,
            **workflow.witness_fields(found, judged),
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
        lease_bounds=bounds,
        **workflow.saved_fields(recovery.inputs),
    )
    recovery_rows.insert_recovery(connection, saved)
    return Recovery(saved, requeued, created=True)


def get(context: LedgerContext, run_id: str, request_id: str, workflow: str) -> Recovery:
    """The saved recovery of a request and workflow, its execution request as it is now."""
    check_identifier("run_id", run_id)
    check_identifier("request_id", request_id)
    recovery_workflow(workflow)  # INVALID_ARGUMENT FIELD_INVALID for an unknown one
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


def _content(connection: Connection, digest: str) -> bytes | None:
    found = blob_rows.get_blob(connection, digest)
    return found[0] if found is not None else None


def _store_checkpoint(connection: Connection, derived: DerivedCheckpoint, now: str) -> None:
    """The separate derived checkpoint, stored inside the transaction (content-addressed)."""
    if not blob_rows.blob_exists(connection, derived.digest):
        blob_rows.insert_blob(
            connection, derived.digest, derived.content, DERIVED_CHECKPOINT_MEDIA_TYPE, now
        )


def _invocation_binding(
    record: ExecutionRequestRecord, checkpoint_digest: str, policy_revision: int
) -> dict[str, object]:
    """What the requeued request continues under: the same request and attempt, the separate
    derived checkpoint, the current policy revision; the next claim raises the generation."""
    binding = {
        "execution_request_id": record.execution_request_id,
        "attempt_id": record.attempt_id,
        "checkpoint_digest": checkpoint_digest,
        "replaces_checkpoint_digest": record.checkpoint_digest,
        "lease_generation": record.lease_generation,
        "policy_revision": policy_revision,
    }
    return {**binding, "binding_digest": digest_of(binding)}
