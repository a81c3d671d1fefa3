"""The admission_tickets table: one saved ticket per admitted (run_id, request_id)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, func, insert, or_, select

from services.ledger.domain.execution import RequestState
from services.ledger.domain.tickets import StoredTicket
from services.ledger.repository import execution_requests as request_rows
from services.ledger.schema import admission_tickets, execution_requests


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
_FOR_REQUEST_OR_GRAPH = select(admission_tickets).where(
    admission_tickets.c.run_id == bindparam("run_id"),
    or_(
        admission_tickets.c.request_id == bindparam("request_id"),
        admission_tickets.c.consumed_response_digest == bindparam("consumed_response_digest"),
    ),
)
_TICKETS_AND_PENDING = select(
    select(func.count())
    .select_from(admission_tickets)
    .where(admission_tickets.c.run_id == bindparam("run_id"))
    .scalar_subquery(),
    request_rows.COUNT_IN_STATES.scalar_subquery(),
    request_rows.OF_RUN_IN_STATES.with_only_columns(execution_requests.c.execution_request_id)
    .limit(1)
    .scalar_subquery(),
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


def insert_ticket(
    connection: Connection, ticket: StoredTicket, consumed_response_digest: str
) -> None:
    connection.execute(
        _INSERT,
        {
            "run_id": ticket.run_id,
            "request_id": ticket.request_id,
            "operator_identity": ticket.operator_identity,
            "request_content_digest": ticket.request_content_digest,
            "consumed_response_digest": consumed_response_digest,
            "execution_request_id": ticket.execution_request_id,
            "ticket_json": ticket.to_text(),
            "created_at": ticket.created_at,
        },
    )


def get_ticket(connection: Connection, run_id: str, request_id: str) -> TicketRow | None:
    row = connection.execute(_GET, {"run_id": run_id, "request_id": request_id}).first()
    return None if row is None else _row(row)


def tickets_for_request_or_graph(
    connection: Connection, run_id: str, request_id: str, consumed_response_digest: str
) -> tuple[TicketRow | None, TicketRow | None]:
    """(the ticket stored under ``request_id``, a ticket of the run for the consumed response),
    in one statement; the same ticket may be both."""
    rows = [
        (row._mapping["request_id"], _row(row))
        for row in connection.execute(
            _FOR_REQUEST_OR_GRAPH,
            {
                "run_id": run_id,
                "request_id": request_id,
                "consumed_response_digest": consumed_response_digest,
            },
        )
    ]
    by_request = next((ticket for stored, ticket in rows if stored == request_id), None)
    by_graph = next(
        (t for _, t in rows if t.consumed_response_digest == consumed_response_digest), None
    )
    return by_request, by_graph


def queue_counts(
    connection: Connection, run_id: str, pending_states: tuple[RequestState, ...]
) -> QueueCounts:
    """The run's tickets, the execution requests in ``pending_states`` across all runs, and the
    run's own oldest one among them, in one statement."""
    row = connection.execute(
        _TICKETS_AND_PENDING,
        {"run_id": run_id, "states": [state.value for state in pending_states]},
    ).one()
    return QueueCounts(int(row[0]), int(row[1]), str(row[2] or ""))
