"""A request's custody in one statement: its run (row locked), the ticket of its admission and
the recoveries that queued it. Every fenced write reads all three (ADR 0014); read one by one
they were three round trips on every worker write (docs/performance-history.md, round 4)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, and_, bindparam, select

from services.ledger.domain.recoveries import StoredRecovery
from services.ledger.domain.runs import Run
from services.ledger.domain.tickets import StoredTicket
from services.ledger.repository.runs import run_from_row
from services.ledger.schema import admission_tickets, recovery_actions, runs


@dataclass(frozen=True)
class CustodyRows:
    """The run, the admission's ticket (None: no ticket) and the recoveries, oldest first."""

    run: Run
    ticket: StoredTicket | None
    recoveries: tuple[StoredRecovery, ...]


# The run row, outer-joined to its ticket (at most one: the ticket's primary key) and to the
# request's recoveries (one row each; usually none). Only the run row is locked (FOR UPDATE OF
# runs, the journal writers' lock: ADR 0016); tickets and recoveries are inserted once and never
# change. Built once (building and cache-keying a statement per call cost more than running it).
_CUSTODY = (
    select(*runs.columns, admission_tickets.c.ticket_json, recovery_actions.c.recovery_json)
    .select_from(
        runs.outerjoin(
            admission_tickets,
            and_(
                admission_tickets.c.run_id == runs.c.run_id,
                admission_tickets.c.request_id == bindparam("request_id"),
            ),
        ).outerjoin(
            recovery_actions,
            recovery_actions.c.execution_request_id == bindparam("execution_request_id"),
        )
    )
    .where(runs.c.run_id == bindparam("run_id"))
    .order_by(recovery_actions.c.created_at, recovery_actions.c.recovery_id)
    .with_for_update(of=runs)
)


def read_custody_rows(
    connection: Connection, run_id: str, request_id: str, execution_request_id: str
) -> CustodyRows | None:
    """The custody of ``execution_request_id`` (admitted as ``request_id`` on ``run_id``), with
    the run row locked for the transaction; None when the run is not registered."""
    rows = (
        connection.execute(
            _CUSTODY,
            {
                "run_id": run_id,
                "request_id": request_id,
                "execution_request_id": execution_request_id,
            },
        )
        .mappings()
        .all()
    )
    if not rows:
        return None
    ticket_json = rows[0]["ticket_json"]
    return CustodyRows(
        run_from_row(rows[0]),
        None if ticket_json is None else StoredTicket.from_text(str(ticket_json)),
        tuple(
            StoredRecovery.from_text(str(row["recovery_json"]))
            for row in rows
            if row["recovery_json"] is not None
        ),
    )
