"""The handoff of a refused continuation action (spec 001, ADR 0046).

A worker claim, a fenced write (a command, a completion or failure, a worker record naming a
continuity request), a cancel, and an admission or recovery commit that the ledger's own rules
refuse carry what the one admissibility check (``shared.continuity.admissibility``) says of the
request the action was bound to: its refusals are the ledger's (``RefusedAction``, classified by
``shared.continuity.refused_actions``), the rest of
the handoff (the bound request as its native history shows it, known effects, unresolved
alternatives, obligations, resources) is the check's. It is read in one read transaction after
the refusal (``shared.runtime.errors.RefusalDetail``), never on the success path.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Connection

from forge.continuity.v1 import common_pb2
from services.ledger.domain.execution import PENDING_STATES, ExecutionRequestRecord
from services.ledger.domain.reconciliation import bound_request
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository import journal_reads
from services.ledger.repository import runs as run_rows
from services.ledger.repository import tickets as ticket_rows
from services.ledger.transactions.base import LedgerContext
from services.ledger.transactions.reconciliation_review import snapshot_of
from shared.continuity.admissibility import check
from shared.continuity.admissibility_facts import (
    LEASE,
    ActionFacts,
    BoundRequest,
    RefusedAction,
)
from shared.continuity.canonical import parse_json
from shared.continuity.refused_actions import refusal_of
from shared.continuity.request_history import consumed_from
from shared.continuity.timeutil import deadline_remaining_seconds
from shared.contract.handoff_proto import handoff_to_proto
from shared.runtime.errors import DomainError


class BoundAction(NamedTuple):
    """A continuation action as its caller named it: what it does, who asked, and the request
    it is bound to (an execution request, or a run's logical request). A named tuple: it is
    built on every call, the success path included, where a frozen dataclass cost 2 µs."""

    action: str
    actor: str
    execution_request_id: str = ""
    run_id: str = ""
    request_id: str = ""
    #: The requirement of a refusal ``REFUSAL_CLASSES`` does not list.
    default_requirement: str = LEASE
    #: A journal append's payload: the request a worker record names is read from it, and only
    #: when the append is refused.
    payload_json: str = ""

    def named(self, refused: DomainError) -> str:
        """The execution request named by the caller, the payload or the refusal."""
        if self.execution_request_id:
            return self.execution_request_id
        payload = _parsed(self.payload_json)
        named = payload.get("execution_request_id") if isinstance(payload, dict) else None
        if isinstance(named, str) and named:
            return named
        return refused.metadata.get("execution_request_id", "")


def _parsed(payload_json: str) -> object:
    if not payload_json:
        return None
    try:
        return parse_json(payload_json)
    except ValueError:
        return None


def handoff_of(
    context: LedgerContext, refused: DomainError, bound: BoundAction
) -> common_pb2.HandoffPayload | None:
    """The handoff of ``refused``, read now; None when nothing names a request of a run (the
    refusal then says all there is)."""
    named = bound.named(refused)
    if not (named or bound.run_id):
        return None
    with context.read() as connection:
        record = _bound_record(connection, refused, bound, named)
        run_id = record.run_id if record is not None else bound.run_id
        run = run_rows.get_run(connection, run_id)
        if run is None:
            return None
        deadline = deadline_remaining_seconds(run.spec.active_deadline_at, context.clock())
        if record is None:
            # nothing was admitted for it yet: the logical request, the run's resources
            rows = list(journal_reads.iter_journal(connection, run_id))
            request = BoundRequest(bound.request_id, "", "unadmitted", False, False)
            consumed = consumed_from(rows, run.spec.command_limit, deadline)
            effects: tuple[tuple[str, int], ...] = ()
            uncertain: tuple[str, ...] = ()
        else:
            snapshot = snapshot_of(context, connection, run, record, reconciliation_id="")
            request = bound_request(snapshot, cessation_verified=False)
            consumed, effects, uncertain = (
                snapshot.consumed,
                snapshot.known_effects(),
                snapshot.uncertain,
            )
    facts = ActionFacts(
        workflow=bound.action,
        action=bound.action,
        bound=request,
        spent_by=(),
        workflow_enabled=True,
        actor=bound.actor,
        original_actor=bound.actor,
        actor_has_authority=True,
        uncertain=uncertain,
        known_effects=effects,
        consumed=consumed,
        refused=RefusedAction(
            (
                refusal_of(
                    refused.reason,
                    refused.message,
                    request.execution_request_id or request.request_id,
                    bound.default_requirement,
                ),
            )
        ),
    )
    return handoff_to_proto(check(facts).handoff)


def _bound_record(
    connection: Connection, refused: DomainError, bound: BoundAction, named: str
) -> ExecutionRequestRecord | None:
    """The execution request the action is bound to: the one named; else the request admitted
    under the logical request id, or under the one the refusal names (the consumed response's
    ticket), or the run's outstanding one (what a race admitted first)."""
    if named:
        return request_rows.get_execution_request(connection, named)
    for request_id in (bound.request_id, refused.metadata.get("request_id", "")):
        stored = request_id and ticket_rows.get_ticket(connection, bound.run_id, request_id)
        if stored:
            ticketed = stored.ticket.execution_request_id
            return request_rows.get_execution_request(connection, ticketed)
    pending = request_rows.list_execution_requests(connection, bound.run_id, PENDING_STATES)
    return pending[0] if pending else None
