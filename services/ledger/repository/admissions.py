"""The rows one admission writes (docs/architecture.md, "One admission, step by step", 9.8 to
9.12): the derived checkpoint's bytes when sent, the migration settlement and the ownership
claim, the queued execution request and the ticket, with the run's listing columns noted once.

The same statement takes the admission's place under the pending cap
(execution_requests.TAKE_PENDING_SLOT, ADR 0049): admissions share the policy lock, so the cap
is the one thing they exclude each other on, and only from this statement to their commit. On
PostgreSQL they are one statement (one round trip), on SQLite one statement each (SQLite has no
data-modifying WITH; its BEGIN IMMEDIATE serializes writers anyway)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import (
    CTE,
    Connection,
    Insert,
    Table,
    insert,
    select,
)
from sqlalchemy.dialects import postgresql

from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.journal import StoredEntry
from services.ledger.domain.signing import SignedHead
from services.ledger.domain.tickets import StoredTicket
from services.ledger.repository import blobs as blob_rows
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository import journal as journal_rows
from services.ledger.repository import signed_heads as signed_head_rows
from services.ledger.repository import tickets as ticket_rows
from services.ledger.repository.driver import DriverStatement, fetch
from services.ledger.repository.runs import queuing_request, typed_parameters
from services.ledger.schema import admission_tickets, blobs, execution_requests, journal_entries

#: The dialects whose data-modifying WITH writes every row in one statement.
ONE_STATEMENT_DIALECTS = frozenset({"postgresql"})


@dataclass(frozen=True)
class NewBlob:
    """Bytes to store under their digest unless stored already."""

    digest: str
    content: bytes
    media_type: str
    created_at: str


@dataclass(frozen=True)
class AdmittedRows:
    """Everything one admission inserts."""

    #: Sealed in sequence order after the run's head (the settlement, then the claim).
    entries: Sequence[StoredEntry]
    request: ExecutionRequestRecord
    ticket: StoredTicket
    consumed_response_digest: str
    #: The derived checkpoint's bytes, when the admission sent them.
    blob: NewBlob | None
    #: The policy's pending_ticket_limit the queued request must fit under.
    pending_limit: int


def insert_journal_entries_of_admission(
    connection: Connection, rows: AdmittedRows, signed_head: SignedHead | None = None
) -> bool:
    """Take a place under the pending cap and insert ``rows`` (journal entries included: only
    transactions/base.py calls this, so that the head they make is signed in the same
    transaction, ADR 0015) and ``signed_head``, the signature of that head; False, and nothing
    written, when the cap is full. A concurrent append at the same head fails the journal's
    unique constraints, as one insert would."""
    if connection.dialect.name not in ONE_STATEMENT_DIALECTS:
        return _insert_one_by_one(connection, rows, signed_head)
    statement = _statement(
        len(rows.entries), with_blob=rows.blob is not None, signing=signed_head is not None
    )
    parameters = _parameters(rows)
    if signed_head is not None:
        parameters.update(signed_head_rows.signing_parameters(signed_head))
    return bool(fetch(connection, statement, parameters))


def _insert_one_by_one(
    connection: Connection, rows: AdmittedRows, signed_head: SignedHead | None
) -> bool:
    if not request_rows.take_pending_slot(connection, rows.pending_limit):
        return False
    if rows.blob is not None:
        blob = rows.blob
        blob_rows.insert_blob_if_absent(
            connection, blob.digest, blob.content, blob.media_type, blob.created_at
        )
    journal_rows.insert_journal_entries(connection, rows.entries, signed_head)
    request_rows.insert_execution_request(connection, rows.request)
    ticket_rows.insert_ticket(connection, rows.ticket, rows.consumed_response_digest)
    return True


def _parameters(rows: AdmittedRows) -> dict[str, object]:
    """Each table's values under its own prefix: never a bare column name, since an UPDATE given
    a parameter named like a column of its table also sets that column."""
    request = rows.request
    # runs.note_request's parameters; updated_at only moves forward, so the later of the times
    # the entries' note and the request's note would each set
    parameters: dict[str, object] = {
        "b_run_id": request.run_id,
        "b_at": max(request.updated_at, *(entry.recorded_at for entry in rows.entries)),
        "b_request": request.execution_request_id,
        "s_limit": rows.pending_limit,
    }
    for index, entry in enumerate(rows.entries):
        parameters.update(_prefixed(f"e{index}_", journal_rows.entry_values(entry)))
    parameters.update(_prefixed("r_", request_rows.request_values(request)))
    ticket = ticket_rows.ticket_values(rows.ticket, rows.consumed_response_digest)
    parameters.update(_prefixed("t_", ticket))
    if rows.blob is not None:
        blob = rows.blob
        values = blob_rows.blob_values(blob.digest, blob.content, blob.media_type, blob.created_at)
        parameters.update(_prefixed("k_", values))
    return parameters


def _prefixed(prefix: str, values: dict[str, object]) -> dict[str, object]:
    return {f"{prefix}{name}": value for name, value in values.items()}


# By (entries, with a blob, signed): built once (building a statement costs more than running
# it).
_STATEMENTS: dict[tuple[int, bool, bool], DriverStatement] = {}


def _statement(entries: int, *, with_blob: bool, signing: bool) -> DriverStatement:
    key = (entries, with_blob, signing)
    statement = _STATEMENTS.get(key)
    if statement is None:
        built = DriverStatement(_build(entries, with_blob=with_blob, signing=signing))
        statement = _STATEMENTS[key] = built
    return statement


def _build(entries: int, *, with_blob: bool, signing: bool) -> Insert:
    """PostgreSQL: ``WITH pending_slot AS (UPDATE pending_slots … WHERE there is room
    RETURNING slot), noted AS (UPDATE runs … WHERE EXISTS (SELECT FROM pending_slot) RETURNING
    run_id), entry_0 AS (INSERT … SELECT … FROM noted), …, request AS (…), blob AS (INSERT … ON
    CONFLICT DO NOTHING), signed_head AS (INSERT … SELECT … FROM noted) INSERT INTO
    admission_tickets SELECT … FROM noted RETURNING run_id`` (``signing``: the head's signature,
    signed_heads.signing_from).
    Every insert selects from ``noted``, so nothing is inserted when the cap is full (no row
    returned) or the run is not there; the counter row is locked before the run's row, and the
    only other writers of the counter (a recovery's or a reconciliation's commit) hold the
    policy lock exclusively, so no admission holds it meanwhile (a release lands on the
    shards): no deadlock through the counter.
    The run's row is locked as every other journal writer locks it (no deadlock with a
    concurrent append). PostgreSQL runs each data-modifying WITH exactly once, whether or not
    the statement reads it."""
    noted = queuing_request(request_rows.TAKE_PENDING_SLOT.cte("pending_slot"))
    written = [
        _from_noted(journal_entries, f"e{index}_", noted).cte(f"entry_{index}")
        for index in range(entries)
    ]
    written.append(_from_noted(execution_requests, "r_", noted).cte("request"))
    if with_blob:
        blob = (
            postgresql.insert(blobs)
            .from_select(_names(blobs), select(*typed_parameters(blobs, "k_")).select_from(noted))
            .on_conflict_do_nothing(index_elements=[blobs.c.digest])
        )
        written.append(blob.cte("blob"))
    if signing:
        written.append(signed_head_rows.signing_from(noted))
    tickets = _from_noted(admission_tickets, "t_", noted).add_cte(*written)
    return tickets.returning(admission_tickets.c.run_id)


def _from_noted(table: Table, prefix: str, noted: CTE) -> Insert:
    return insert(table).from_select(
        _names(table), select(*typed_parameters(table, prefix)).select_from(noted)
    )


def _names(table: Table) -> list[str]:
    return [column.name for column in table.columns]
