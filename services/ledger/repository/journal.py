"""The journal_entries table, written: the hash-chained journal of each run, one entry at a time
(noted on the run row, and signed, in the same statement on PostgreSQL) or in bulk. The reads are
in repository.journal_reads."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import (
    ColumnElement,
    Connection,
    Insert,
    Update,
    bindparam,
    exists,
    insert,
    select,
)

from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.journal import (
    NATIVE_RESUME_KINDS,
    EntryKind,
    StoredEntry,
)
from services.ledger.domain.signing import SignedHead
from services.ledger.repository.driver import DriverStatement, execute, fetch, in_constants
from services.ledger.repository.execution_requests import (
    REQUEST_CHANGE,
    request_change_parameters,
    update_execution_request,
)
from services.ledger.repository.journal_reads import ENTRY_COLUMNS
from services.ledger.repository.runs import (
    ENTRY_NOTES,
    note_entry,
    note_of_entry,
    noting,
    noting_entry,
    typed_parameters,
)
from services.ledger.repository.signed_heads import (
    insert_signed_head,
    signing_from,
    signing_parameters,
)
from services.ledger.schema import execution_requests, journal_entries
from shared.contract.terms import PENDING_STATE_NAMES

_INSERT = insert(journal_entries)
# One entry's insert, on the driver's cursor (repository/driver.py; every native append).
_INSERT_ONE = DriverStatement(_INSERT)
# PostgreSQL: the entry and its signed head in one statement (ADR 0060).
_INSERT_ONE_SIGNED = DriverStatement(_INSERT.add_cte(signing_from(None)))
# Every journal column from its "e_" parameter (the name in entry_values), for the statements
# that note the run and insert the entry in one.
_ENTRY_FROM_PARAMETERS = typed_parameters(journal_entries, "e_")


def entry_values(entry: StoredEntry) -> dict[str, object]:
    """The row ``entry`` is stored as, by column name."""
    return {
        "run_id": entry.run_id,
        "sequence": entry.sequence,
        "kind": entry.kind,
        "payload_json": entry.payload_json,
        "prev_hash": entry.prev_hash,
        "hash": entry.hash,
        "actor": entry.actor,
        "recorded_at": entry.recorded_at,
    }


def _entry_parameters(entry: StoredEntry) -> dict[str, object]:
    return {f"e_{name}": value for name, value in entry_values(entry).items()}


def _noting_then_inserting(note: Update, *, changing_request: bool, signing: bool) -> Insert:
    """PostgreSQL: ``note`` (runs.ENTRY_NOTES) applied to the run row, which locks it as the
    separate update does, and the entry inserted from the row it returns, in one statement;
    nothing at all for an unknown run (no row to note, none to insert from).
    ``changing_request``: the execution request's change (REQUEST_CHANGE) is written by the same
    statement (its row is locked already: every writer of a request locks it first);
    ``signing``: the head's signature too, from the same row (signed_heads.signing_from)."""
    noted = noting(note)
    statement = (
        insert(journal_entries)
        .from_select(ENTRY_COLUMNS, select(*_ENTRY_FROM_PARAMETERS).select_from(noted))
        .returning(journal_entries.c.sequence)
    )
    if changing_request:
        statement = statement.add_cte(REQUEST_CHANGE.cte("changed"))
    return statement.add_cte(signing_from(noted)) if signing else statement


#: Where the run row's note, the entry and a request's change are one statement (it needs data-
#: modifying common table expressions); elsewhere, and in tests that compare the two, they are
#: one statement each.
ONE_STATEMENT_DIALECTS = frozenset({"postgresql"})
# By the note's identity (runs.ENTRY_NOTES are built once) and whether the request's change and
# the head's signature ride along, on the driver's cursor.
_NOTED_INSERT = {
    (id(note), changing, signing): DriverStatement(
        _noting_then_inserting(note, changing_request=changing, signing=signing)
    )
    for note in ENTRY_NOTES
    for changing in (False, True)
    for signing in (False, True)
}


def insert_journal_entry(
    connection: Connection,
    entry: StoredEntry,
    *,
    request: ExecutionRequestRecord | None = None,
    completed_round: bool = False,
    noted: bool = False,
    signed_head: SignedHead | None = None,
) -> None:
    """Insert one entry. ``request``: the execution request this transaction changed (and
    locked first): its row is written here too, and the run's listing change rides on the entry's
    update of the run row; ``completed_round``: see runs.note_of_entry; ``noted``: the caller
    already noted this entry on the run row (runs.note_entry_reading_head); ``signed_head``: the
    signature of the head the entry makes, stored with it (in the same statement on
    PostgreSQL)."""
    # The run's listing columns first: every writer then locks the run's row before it inserts
    # an entry (an execution-request change does too), so two writers of one run queue on that
    # row instead of each holding what the other waits for. On PostgreSQL the request's change,
    # the run row's update and the insert are one statement (one or two round trips fewer on
    # every fenced write; docs/performance-history.md, round 4, twelfth pass).
    held = entry.kind == EntryKind.RUN_HELD.value
    if noted and request is not None:
        raise ValueError("a native append changes no execution request")
    if not noted and connection.dialect.name in ONE_STATEMENT_DIALECTS:
        note, noting_parameters = note_of_entry(
            entry.run_id,
            entry.recorded_at,
            held=held,
            request=request,
            completed_round=completed_round,
        )
        parameters: dict[str, object] = {**noting_parameters, **_entry_parameters(entry)}
        if request is not None:
            parameters.update(request_change_parameters(request))
        if signed_head is not None:
            parameters.update(signing_parameters(signed_head))
        statement = _NOTED_INSERT[id(note), request is not None, signed_head is not None]
        if fetch(connection, statement, parameters):
            return
        # No run row to note: the plain insert below fails on the run's key, as it always has.
    elif not noted:
        if request is not None:
            update_execution_request(connection, request, note_run=False)
        note_entry(
            connection,
            entry.run_id,
            entry.recorded_at,
            held=held,
            request=request,
            completed_round=completed_round,
        )
    if signed_head is not None and connection.dialect.name in ONE_STATEMENT_DIALECTS:
        parameters = {**entry_values(entry), **signing_parameters(signed_head)}
        execute(connection, _INSERT_ONE_SIGNED, parameters)
        return
    execute(connection, _INSERT_ONE, entry_values(entry))
    if signed_head is not None:
        insert_signed_head(connection, signed_head)


def _after_known_head(*, held: bool, guarded: bool, signing: bool) -> Insert:
    """PostgreSQL: note the entry on the run row (:func:`runs.noting_entry`, which locks the row
    as the two-statement append does) and insert it, in one statement, only where the entry it
    links to (sequence and hash) is stored; the (run_id, sequence) key and the (run_id,
    prev_hash) link constraint refuse it if anything was appended after that entry. Writes
    nothing, the run row included, for an unknown run or a head that is not there, nor,
    ``guarded``, while a continuity execution request of the run is queued or claimed (the
    caller's two-statement append then says why: a native resume waits for it, ADR 0014 rule
    3b; a request queued after this read came with an entry, so the link constraint refuses the
    insert): the statement is a transaction of its own (database.single_statement_write, ADR
    0065). The conditions are checked once, by the run row's update: the insert and, with
    ``signing``, the head's signature (signed_heads.signing_from) select from the row it
    returns, so they are written exactly when the row is noted, in the same statement."""
    linked = exists().where(
        journal_entries.c.run_id == bindparam("b_run_id"),
        journal_entries.c.sequence == bindparam("after_sequence"),
        journal_entries.c.hash == bindparam("e_prev_hash"),
    )
    conditions: list[ColumnElement[bool]] = [linked]
    if guarded:
        pending = exists().where(
            execution_requests.c.run_id == bindparam("b_run_id"),
            in_constants(execution_requests.c.state, PENDING_STATE_NAMES),
        )
        conditions.append(~pending)
    noted = noting_entry(held=held, only_where=conditions)
    statement = (
        insert(journal_entries)
        .from_select(
            ENTRY_COLUMNS,
            select(*_ENTRY_FROM_PARAMETERS).select_from(noted),
        )
        .returning(journal_entries.c.sequence)
    )
    return statement.add_cte(signing_from(noted)) if signing else statement


_AFTER_KNOWN_HEAD = {
    (held, guarded, signing): DriverStatement(
        _after_known_head(held=held, guarded=guarded, signing=signing)
    )
    for held in (False, True)
    for guarded in (False, True)
    for signing in (False, True)
}
_RESUME_KIND_NAMES = frozenset(kind.value for kind in NATIVE_RESUME_KINDS)


def insert_journal_entry_after_known_head(
    connection: Connection, entry: StoredEntry, signed_head: SignedHead | None = None
) -> bool:
    """PostgreSQL only: note and insert a native entry in one statement where the entry it
    links to is stored and, for a native resume, no continuity request of the run is
    outstanding; False (nothing written, the run row untouched) where not. A concurrent append
    after that entry fails a unique constraint, which fails the whole statement.
    ``signed_head``: the head's signature, stored by the same statement exactly when the entry
    is."""
    parameters: dict[str, object] = _entry_parameters(entry)
    parameters.update(b_run_id=entry.run_id, b_at=entry.recorded_at)  # runs.noting_entry's
    parameters.update(after_sequence=entry.sequence - 1)
    if signed_head is not None:
        parameters.update(signing_parameters(signed_head))
    held = entry.kind == EntryKind.RUN_HELD.value
    key = (held, entry.kind in _RESUME_KIND_NAMES, signed_head is not None)
    return bool(fetch(connection, _AFTER_KNOWN_HEAD[key], parameters))


def insert_journal_entries(
    connection: Connection,
    entries: Sequence[StoredEntry],
    signed_head: SignedHead | None = None,
) -> None:
    """Insert sealed entries in one executemany (bulk seeding of long journals in benchmarks),
    then ``signed_head``, the signature of the head they make."""
    if not entries:
        return
    # The listing columns of each run once, first (as above): its newest entry's time, and held
    # if the batch holds it (no other entry kind changes a run's continuity state).
    newest = {entry.run_id: entry.recorded_at for entry in entries}
    held = {entry.run_id for entry in entries if entry.kind == EntryKind.RUN_HELD.value}
    for run_id, recorded_at in newest.items():
        note_entry(connection, run_id, recorded_at, held=run_id in held)
    connection.execute(_INSERT, [entry_values(e) for e in entries])
    if signed_head is not None:
        insert_signed_head(connection, signed_head)
