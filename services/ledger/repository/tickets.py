"""The admission_tickets table: one saved ticket per admitted (run_id, request_id)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, and_, bindparam, func, insert, or_, select

from services.ledger.domain.execution import PENDING_STATES
from services.ledger.domain.runs import Run
from services.ledger.domain.tickets import StoredTicket
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository.driver import DriverStatement, fetch, in_constants
from services.ledger.repository.policy import DUE_FOR_EXPIRY, NEWEST_POLICY_REVISION
from services.ledger.repository.runs import HEAD_COLUMNS, head_from_row, run_from_row
from services.ledger.schema import admission_tickets, execution_requests, runs
from shared.continuity.canonical import GENESIS_HASH


@dataclass(frozen=True)
class TicketRow:
    """The ticket and the columns that index it."""

    ticket: StoredTicket
    consumed_response_digest: str


# Built once (building and cache-keying a statement per call cost more than running it).
_INSERT = insert(admission_tickets)
_GET = select(admission_tickets).where(
    admission_tickets.c.run_id == bindparam("run_id"),
    admission_tickets.c.request_id == bindparam("request_id"),
)
_RUN_TICKETS = (
    select(func.count())
    .select_from(admission_tickets)
    .where(admission_tickets.c.run_id == bindparam("run_id"))
    .correlate(None)  # the ticket joined below is another row of the same table
    .scalar_subquery()
)
_PENDING = request_rows.PENDING_COUNT.scalar_subquery()
_RUN_OUTSTANDING = (
    select(execution_requests.c.execution_request_id)
    .where(
        execution_requests.c.run_id == bindparam("run_id"),
        # the pending states written into the text (driver.in_constants)
        in_constants(execution_requests.c.state, [state.value for state in PENDING_STATES]),
    )
    .order_by(execution_requests.c.created_at, execution_requests.c.execution_request_id)
    .limit(1)
    .scalar_subquery()
)
# What the admission transaction reads under the policy lock, in one statement: the run and
# its journal head, the tickets stored under the request id or for the consumed response (0, 1
# or 2 rows joined), and the queue counts. No row: the run is not registered (a ticket's run
# always is).
_ADMISSION_READS = DriverStatement(
    select(
        *runs.columns,
        *HEAD_COLUMNS,
        _RUN_TICKETS.label("q_run_tickets"),
        _PENDING.label("q_pending"),
        _RUN_OUTSTANDING.label("q_run_outstanding"),
        NEWEST_POLICY_REVISION.label("p_newest_revision"),
        DUE_FOR_EXPIRY.label("q_due"),
        admission_tickets.c.request_id.label("t_request_id"),
        admission_tickets.c.ticket_json.label("t_ticket_json"),
        admission_tickets.c.consumed_response_digest.label("t_consumed_response_digest"),
    )
    .select_from(
        runs.outerjoin(
            admission_tickets,
            and_(
                admission_tickets.c.run_id == runs.c.run_id,
                or_(
                    admission_tickets.c.request_id == bindparam("request_id"),
                    admission_tickets.c.consumed_response_digest
                    == bindparam("consumed_response_digest"),
                ),
            ),
        )
    )
    .where(runs.c.run_id == bindparam("run_id"))
)


@dataclass(frozen=True)
class QueueCounts:
    """What the queue caps and the one-claim-per-run rule are checked against."""

    run_tickets: int
    pending: int
    # The run's oldest execution request in a pending state ("" when it has none).
    run_outstanding: str


def _row(row: object) -> TicketRow:
    values = row._mapping  # type: ignore[attr-defined]
    return TicketRow(
        StoredTicket.from_text(str(values["ticket_json"])), str(values["consumed_response_digest"])
    )


def ticket_values(ticket: StoredTicket, consumed_response_digest: str) -> dict[str, object]:
    """The row ``ticket`` is stored as, by column name."""
    return {
        "run_id": ticket.run_id,
        "request_id": ticket.request_id,
        "operator_identity": ticket.operator_identity,
        "request_content_digest": ticket.request_content_digest,
        "consumed_response_digest": consumed_response_digest,
        "execution_request_id": ticket.execution_request_id,
        "ticket_json": ticket.to_text(),
        "created_at": ticket.created_at,
    }


def insert_ticket(
    connection: Connection, ticket: StoredTicket, consumed_response_digest: str
) -> None:
    connection.execute(_INSERT, ticket_values(ticket, consumed_response_digest))


def get_ticket(connection: Connection, run_id: str, request_id: str) -> TicketRow | None:
    row = connection.execute(_GET, {"run_id": run_id, "request_id": request_id}).first()
    return None if row is None else _row(row)


@dataclass(frozen=True)
class AdmissionReads:
    """The rows an admission decides on before the journal (:func:`admission_reads`)."""

    #: None: the run is not registered.
    run: Run | None
    #: The ticket stored under the request id.
    by_request: TicketRow | None
    #: A ticket of the run for the consumed response (maybe ``by_request`` itself).
    by_graph: TicketRow | None
    counts: QueueCounts
    #: (sequence, hash) of the run's newest journal entry; (0, genesis) for none or no run.
    head: tuple[int, str] = (0, GENESIS_HASH)
    #: The newest policy revision (0: no run was found, so nothing was read).
    newest_policy_revision: int = 0
    #: How many queued requests' leases ran out by ``now``.
    due: int = 0


def admission_reads(
    connection: Connection,
    run_id: str,
    request_id: str,
    consumed_response_digest: str,
    now: str,
) -> AdmissionReads:
    """The ticket stored under ``request_id`` and a ticket of the run for the consumed response
    (the same ticket may be both), the run and its journal head, and the run's tickets, the
    pending requests across all runs (request_rows.PENDING_COUNT) and the run's own oldest one
    (PENDING_STATES); the newest policy revision and how many queued requests' leases ran
    out by ``now`` (what a policy lock's re-read confirms:
    policy.lock_current_policy_counting_due): one statement."""
    parameters = {
        "run_id": run_id,
        "request_id": request_id,
        "consumed_response_digest": consumed_response_digest,
        "now": now,
    }
    rows = fetch(connection, _ADMISSION_READS, parameters)
    if not rows:
        return AdmissionReads(None, None, None, QueueCounts(0, 0, ""))
    tickets = [
        (
            row["t_request_id"],
            TicketRow(
                StoredTicket.from_text(str(row["t_ticket_json"])),
                str(row["t_consumed_response_digest"]),
            ),
        )
        for row in rows
        if row["t_request_id"] is not None
    ]
    first = rows[0]
    return AdmissionReads(
        run=run_from_row(first),
        by_request=next((t for stored, t in tickets if stored == request_id), None),
        by_graph=next(
            (t for _, t in tickets if t.consumed_response_digest == consumed_response_digest),
            None,
        ),
        counts=QueueCounts(
            int(first["q_run_tickets"]),
            int(first["q_pending"]),
            str(first["q_run_outstanding"] or ""),
        ),
        head=head_from_row(first),
        newest_policy_revision=int(first["p_newest_revision"]),
        due=int(first["q_due"]),
    )
