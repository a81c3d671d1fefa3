"""Transactions that end or park an execution request outside its worker's writes: cancellation
by its operator or an administrator, expiry of a queued request nobody claimed in time, and the
native admission-refusal record of a claim refused while entering its policy epoch (ADR 0014)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from sqlalchemy import Connection

from services.ledger.domain.execution import (
    ExecutionRequestRecord,
    RequestState,
    cancellable,
    due_for_expiry,
    finished,
)
from services.ledger.domain.journal import EntryKind
from services.ledger.domain.policy import PolicyRevision
from services.ledger.domain.recovery_authority import Authority
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository import tickets as ticket_rows
from services.ledger.transactions.base import (
    LedgerContext,
    append_entry,
    lock_policy,
    lock_policy_counting_due,
    retry_on_unique_conflict,
)
from shared.continuity.timeutil import to_text
from shared.runtime.errors import DomainError, FieldViolation, InvalidArgument, NotFound

#: The actor of entries the ledger writes on its own account (expiry).
LEDGER_ACTOR = "ledger"


def _locked(connection: Connection, execution_request_id: str) -> ExecutionRequestRecord:
    record = request_rows.get_execution_request(connection, execution_request_id, for_update=True)
    if record is None:
        raise NotFound(
            "EXECUTION_REQUEST_NOT_FOUND",
            f"no execution request {execution_request_id}",
            metadata={"execution_request_id": execution_request_id},
        )
    return record


@retry_on_unique_conflict
def cancel(
    context: LedgerContext,
    authority: Authority,
    execution_request_id: str,
    actor: str,
    reason: str,
) -> ExecutionRequestRecord:
    """Cancel a queued or claimed request: terminal ``cancelled``, every generation fenced, one
    ``request_event`` ``cancelled``. Cancelling a cancelled request reads it back."""
    if not reason:
        raise InvalidArgument(
            "FIELD_REQUIRED",
            "reason is required",
            metadata={"field": "reason"},
            field_violations=[FieldViolation("reason", "required")],
        )
    with context.engine.begin() as connection:
        record = _locked(connection, execution_request_id)
        stored = ticket_rows.get_ticket(connection, record.run_id, record.request_id)
        operator = stored.ticket.operator_identity if stored is not None else ""
        if not cancellable(record, actor, operator, authority(actor)):
            return record
        return _finish_with_event(
            context,
            connection,
            record,
            RequestState.CANCELLED,
            actor,
            previous_state=record.state.value,
            reason=reason,
        )


def _finish_with_event(
    context: LedgerContext,
    connection: Connection,
    record: ExecutionRequestRecord,
    state: RequestState,
    actor: str,
    **details: object,
) -> ExecutionRequestRecord:
    """End ``record`` in ``state`` with its one ``request_event`` (the state's name as the
    event, at the request's generation, with ``details``), in the caller's transaction."""
    updated = finished(record, state, context.now())
    request_rows.update_execution_request(connection, updated)
    append_entry(
        context,
        connection,
        record.run_id,
        EntryKind.REQUEST_EVENT,
        {
            "execution_request_id": record.execution_request_id,
            "event": state.value,
            "lease_generation": record.lease_generation,
            **details,
        },
        actor,
    )
    return updated


@retry_on_unique_conflict
def expire_due(context: LedgerContext) -> list[ExecutionRequestRecord]:
    """The sweep on request (``ExpireExecutionRequests``), and after a refusal rolled back an
    :class:`Expiry`'s: :func:`_expire` in a transaction of its own. Cheap when nothing is due:
    one read."""
    now = context.clock()
    with context.read() as connection:
        if not request_rows.queued_expiring_by(connection, to_text(now), lock=False):
            return []
    with context.engine.begin() as connection:
        return _expire(context, connection, now)


@retry_on_unique_conflict
def sweep_on_schedule(context: LedgerContext) -> list[ExecutionRequestRecord]:
    """The ledger's own periodic sweep (``services.ledger.expiry_sweep``): :func:`expire_due`,
    run by one replica at a time (a replica that finds another sweeping skips the round; the
    other expires what is due). Cheap when nothing is due: one read, no lock."""
    now = context.clock()
    with context.read() as connection:
        if not request_rows.queued_expiring_by(connection, to_text(now), lock=False):
            return []
    with context.engine.begin() as connection:
        if not request_rows.take_sweep_turn(connection):
            return []
        return _expire(context, connection, now)


class Expiry:
    """The lazy sweep inside every transaction that counts queued requests (admission, recovery,
    reconciliation): its first step takes the policy lock and, in the same statements, counts the
    queued requests whose lease ran out; when there are any, they expire (:func:`_expire`) in
    that transaction before anything is judged or counted. ``expired`` holds what the last run
    of the transaction expired; a transaction that raised rolled it back with everything else,
    and the ledger then expires it in a transaction of its own (``Ledger``), so a refusal
    leaves the same state as when the sweep ran first in its own transaction."""

    def __init__(self, context: LedgerContext) -> None:
        self._context = context
        self.expired: list[ExecutionRequestRecord] = []

    def lock_policy(self, connection: Connection, *, shared: bool = False) -> PolicyRevision:
        """The policy lock (``shared``: an admission's, ADR 0049), and the sweep when due."""
        now = self._context.clock()
        policy, due = lock_policy_counting_due(connection, to_text(now), shared=shared)
        # A retried transaction runs this again: only its last run's sweep can commit.
        self.expired = _expire(self._context, connection, now) if due else []
        return policy

    def lock_policy_row(
        self, connection: Connection, *, shared: bool = False
    ) -> tuple[PolicyRevision, str]:
        """The first step of a transaction that confirms the lock in its own next statement
        (the admission's reads, tickets.admission_reads): the policy under the lock as this
        statement saw it, without the re-read, and the time the due leases are to be counted
        at. Nothing is swept: a transaction whose next statement finds the locked revision
        superseded, or leases due, calls :meth:`lock_policy`, which re-reads and sweeps."""
        now = to_text(self._context.clock())
        self.expired = []
        return lock_policy(connection, shared=shared, confirmed=False), now


def _expire(
    context: LedgerContext, connection: Connection, now: datetime
) -> list[ExecutionRequestRecord]:
    """Move every queued request whose lease ran out by ``now`` to ``expired``, each with one
    ``request_event`` ``expired`` at its generation, inside the caller's transaction: it frees
    its place in the queue caps and the run's one outstanding claim, and its native history
    still proves whether it was ever claimed (the never-claimed recovery accepts it)."""
    expired: list[ExecutionRequestRecord] = []
    for record in request_rows.queued_expiring_by(connection, to_text(now)):
        if not due_for_expiry(record, now):
            continue
        expired.append(
            _finish_with_event(
                context,
                connection,
                record,
                RequestState.EXPIRED,
                LEDGER_ACTOR,
                lease_expires_at=record.lease_expires_at,
            )
        )
    if expired:
        # the places freed count now: this transaction counts the pending requests next
        request_rows.apply_queue_depth_notes(connection)
    return expired


@retry_on_unique_conflict
def record_admission_refusal(
    context: LedgerContext, execution_request_id: str, refused: DomainError, worker: str
) -> None:
    """The one native ``admission_refusal`` record of a request whose claim was refused while
    entering its policy epoch, in its own transaction (the claim's rolled back); the request
    becomes ineligible for automatic scheduling. A second refusal writes nothing more."""
    with context.engine.begin() as connection:
        record = _locked(connection, execution_request_id)
        if record.admission_refusal or record.state is not RequestState.QUEUED:
            return
        request_rows.update_execution_request(
            connection, replace(record, admission_refusal=refused.reason, updated_at=context.now())
        )
        append_entry(
            context,
            connection,
            record.run_id,
            EntryKind.ADMISSION_REFUSAL,
            {
                "execution_request_id": execution_request_id,
                "request_id": record.request_id,
                "reason": refused.reason,
                "message": refused.message,
                "policy_revision": record.policy_revision,
            },
            worker,
        )
