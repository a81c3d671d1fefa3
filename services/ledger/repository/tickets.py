"""The admission_tickets table: one saved ticket per admitted (run_id, request_id)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, func, insert, select

from services.ledger.domain.tickets import StoredTicket
from services.ledger.schema import admission_tickets


@dataclass(frozen=True)
class TicketRow:
    """The ticket and the columns that index it."""

    ticket: StoredTicket
    consumed_response_digest: str


def _row(row: object) -> TicketRow:
    values = row._mapping  # type: ignore[attr-defined]
    return TicketRow(
        StoredTicket.from_text(str(values["ticket_json"])), str(values["consumed_response_digest"])
    )


def insert_ticket(
    connection: Connection, ticket: StoredTicket, consumed_response_digest: str
) -> None:
    connection.execute(
        insert(admission_tickets).values(
            run_id=ticket.run_id,
            request_id=ticket.request_id,
            operator_identity=ticket.operator_identity,
            request_content_digest=ticket.request_content_digest,
            consumed_response_digest=consumed_response_digest,
            execution_request_id=ticket.execution_request_id,
            ticket_json=ticket.to_text(),
            created_at=ticket.created_at,
        )
    )


def get_ticket(connection: Connection, run_id: str, request_id: str) -> TicketRow | None:
    row = connection.execute(
        select(admission_tickets).where(
            admission_tickets.c.run_id == run_id, admission_tickets.c.request_id == request_id
        )
    ).first()
    return None if row is None else _row(row)


def ticket_for_consumed_graph(
    connection: Connection, run_id: str, consumed_response_digest: str
) -> TicketRow | None:
    row = connection.execute(
        select(admission_tickets).where(
            admission_tickets.c.run_id == run_id,
            admission_tickets.c.consumed_response_digest == consumed_response_digest,
        )
    ).first()
    return None if row is None else _row(row)


def count_tickets_for_run(connection: Connection, run_id: str) -> int:
    return int(
        connection.execute(
            select(func.count())
            .select_from(admission_tickets)
            .where(admission_tickets.c.run_id == run_id)
        ).scalar_one()
    )
