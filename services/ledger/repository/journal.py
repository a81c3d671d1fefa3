"""The journal_entries table: the hash-chained journal of each run."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    CompoundSelect,
    Connection,
    Insert,
    Select,
    Update,
    and_,
    bindparam,
    exists,
    insert,
    literal_column,
    or_,
    select,
    union_all,
)

from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.journal import (
    NATIVE_RESUME_KINDS,
    EntryKind,
    StoredEntry,
    build_stored_entry,
)
from services.ledger.domain.signing import SignedHead
from services.ledger.repository.driver import DriverStatement, execute, fetch, in_constants
from services.ledger.repository.execution_requests import (
    REQUEST_CHANGE,
    request_change_parameters,
    update_execution_request,
)
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
from shared.continuity.canonical import GENESIS_HASH
from shared.contract.terms import PENDING_STATE_NAMES

# Hot statements are built once: building and cache-keying a statement on every call cost more
# CPU than executing it (docs/performance-history.md, round 3).
_RUN_ID: BindParameter[str] = bindparam("run_id")
_HEAD = (
    select(journal_entries.c.sequence, journal_entries.c.hash)
    .where(journal_entries.c.run_id == _RUN_ID)
    .order_by(journal_entries.c.sequence.desc())
    .limit(1)
)


def _newest(*conditions: ColumnElement[bool]) -> Select[Any]:
    """The run's newest entry (meeting ``conditions``): one indexed LIMIT 1 lookup."""
    return (
        select(journal_entries)
        .where(journal_entries.c.run_id == _RUN_ID, *conditions)
        .order_by(journal_entries.c.sequence.desc())
        .limit(1)
    )


_INSERT = insert(journal_entries)
# One entry's insert, on the driver's cursor (repository/driver.py; every native append).
_INSERT_ONE = DriverStatement(_INSERT)
# PostgreSQL: the entry and its signed head in one statement (ADR 0060).
_INSERT_ONE_SIGNED = DriverStatement(_INSERT.add_cte(signing_from(None)))
_HEAD_ALONE = DriverStatement(_HEAD)
_ENTRY_COLUMNS = tuple(column.name for column in journal_entries.c)
# Every journal column from its "e_" parameter (the name in entry_values), for the statements
# that note the run and insert the entry in one.
_ENTRY_FROM_PARAMETERS = typed_parameters(journal_entries, "e_")
_UP_TO = (
    select(
        journal_entries.c.run_id,
        journal_entries.c.sequence,
        journal_entries.c.kind,
        journal_entries.c.payload_json,
        journal_entries.c.prev_hash,
        journal_entries.c.hash,
        journal_entries.c.actor,
        journal_entries.c.recorded_at,
    )
    .where(journal_entries.c.run_id == _RUN_ID, journal_entries.c.sequence <= bindparam("up_to"))
    .order_by(journal_entries.c.sequence)
)


def entry_from_mapping(row: Mapping[str, Any]) -> StoredEntry:
    """The stored entry of a row (a mapping by column name) with the journal's columns."""
    return build_stored_entry(**{name: row[name] for name in _ENTRY_COLUMNS})


def entry_from_row(row: object) -> StoredEntry:
    """The stored entry of a row of the journal's columns, and no others."""
    return build_stored_entry(**row._mapping)  # type: ignore[attr-defined, no-any-return]


def journal_head(connection: Connection, run_id: str) -> tuple[int, str]:
    """(sequence, hash) of the last entry; (0, genesis) for an empty journal."""
    rows = fetch(connection, _HEAD_ALONE, {"run_id": run_id})
    return (int(rows[0]["sequence"]), str(rows[0]["hash"])) if rows else (0, GENESIS_HASH)


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


@dataclass(frozen=True)
class NewestEntries:
    """The run's last entry and the newest entry of each asked kind (absent: none recorded)."""

    last: StoredEntry | None
    of_kind: dict[str, StoredEntry]

    def newest(self, kind: EntryKind) -> StoredEntry | None:
        return self.of_kind.get(kind.value)


# By the number of kinds asked for (the kinds themselves are bound parameters kind_0, kind_1…).
_NEWEST_BY_COUNT: dict[int, CompoundSelect[Any]] = {}


def newest_statement(count: int) -> CompoundSelect[Any]:
    """The last entry and the newest entry of each of ``count`` kinds, one indexed LIMIT 1 lookup
    each, in one statement (a UNION ALL of the lookups the callers would otherwise make one by
    one)."""
    statement = _NEWEST_BY_COUNT.get(count)
    if statement is None:
        lookups = [_newest()] + [
            _newest(journal_entries.c.kind == bindparam(f"kind_{index}")) for index in range(count)
        ]
        statement = union_all(*(select(lookup.subquery()) for lookup in lookups))
        _NEWEST_BY_COUNT[count] = statement
    return statement


def newest_entries(
    connection: Connection, run_id: str, kinds: Sequence[EntryKind]
) -> NewestEntries:
    """The run's last entry and the newest entry of each of ``kinds``: one round trip."""
    values = tuple(kind.value for kind in kinds)
    rows = connection.execute(newest_statement(len(values)), newest_parameters(run_id, kinds))
    return newest_from_rows([entry_from_row(row) for row in rows], values)


def newest_parameters(run_id: str, kinds: Sequence[EntryKind]) -> dict[str, str]:
    """The parameters of :func:`newest_statement` for ``run_id`` and ``kinds``."""
    parameters: dict[str, str] = {"run_id": run_id}
    parameters.update({f"kind_{index}": kind.value for index, kind in enumerate(kinds)})
    return parameters


def newest_from_rows(rows: Sequence[StoredEntry], kinds: Sequence[str]) -> NewestEntries:
    """:class:`NewestEntries` of the rows :func:`newest_statement` returned for ``kinds``."""
    last = max(rows, key=lambda entry: entry.sequence, default=None)
    return NewestEntries(last, {entry.kind: entry for entry in rows if entry.kind in kinds})


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
        .from_select(_ENTRY_COLUMNS, select(*_ENTRY_FROM_PARAMETERS).select_from(noted))
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
    prev_hash) link constraint refuse it if anything was appended after that entry. Inserts
    nothing for an unknown run or a head that is not there, nor, ``guarded``, while a
    continuity execution request of the run is queued or claimed (the caller's two-statement
    append then says why: a native resume waits for it, ADR 0014 rule 3b; a request queued
    after this read came with an entry, so the link constraint refuses the insert).
    ``signing``: the head's signature is stored under the same conditions, in the same
    statement (signed_heads.signing_from)."""
    noted = noting_entry(held=held)
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
    statement = (
        insert(journal_entries)
        .from_select(
            _ENTRY_COLUMNS,
            select(*_ENTRY_FROM_PARAMETERS).select_from(noted).where(*conditions),
        )
        .returning(journal_entries.c.sequence)
    )
    return statement.add_cte(signing_from(noted, *conditions)) if signing else statement


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
    outstanding; False (nothing inserted, the run row perhaps noted: roll back) where not. A
    concurrent append after that entry fails a unique constraint. ``signed_head``: the head's
    signature, stored by the same statement exactly when the entry is."""
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


def read_journal(
    connection: Connection, run_id: str, from_sequence: int, limit: int
) -> list[StoredEntry]:
    rows = connection.execute(
        select(journal_entries)
        .where(journal_entries.c.run_id == run_id, journal_entries.c.sequence >= from_sequence)
        .order_by(journal_entries.c.sequence)
        .limit(limit)
    )
    return [entry_from_row(row) for row in rows]


def entries_after(
    connection: Connection, cursors: Mapping[str, int], limit: int
) -> list[StoredEntry]:
    """The entries of several runs after each run's cursor (its last known sequence), in one
    statement, ordered by run and sequence: any prefix of the answer holds, for every run in it,
    a gap-free continuation of its cursor (the followers' shared poll)."""
    if not cursors:
        return []
    after = [
        and_(journal_entries.c.run_id == run_id, journal_entries.c.sequence > sequence)
        for run_id, sequence in sorted(cursors.items())
    ]
    rows = connection.execute(
        select(journal_entries)
        .where(or_(*after))
        .order_by(journal_entries.c.run_id, journal_entries.c.sequence)
        .limit(limit)
    )
    return [entry_from_row(row) for row in rows]


def iter_journal(
    connection: Connection, run_id: str, batch: int = 500, from_sequence: int = 1
) -> Iterator[StoredEntry]:
    """Every entry from ``from_sequence`` on in sequence order, fetched in batches (bounded memory
    for long journals)."""
    next_sequence = from_sequence
    while True:
        page = read_journal(connection, run_id, next_sequence, batch)
        yield from page
        if len(page) < batch:
            return
        next_sequence = page[-1].sequence + 1


def journal_batches(
    connection: Connection, run_id: str, up_to_sequence: int, batch: int
) -> Iterator[list[StoredEntry]]:
    """Every entry up to ``up_to_sequence`` in sequence order, in batches of ``batch``, from one
    statement: a server-side cursor where the driver has one for a journal longer than one batch
    (bounded memory, one round trip per batch instead of one query per page), a plain query
    otherwise (one round trip instead of the cursor's three)."""
    streamed = up_to_sequence > batch
    options = {"stream_results": True, "yield_per": batch} if streamed else {}
    result = connection.execution_options(**options).execute(
        _UP_TO, {"run_id": run_id, "up_to": up_to_sequence}
    )
    if not streamed:
        entries = [build_stored_entry(*row) for row in result]
        if entries:
            yield entries
        return
    for rows in result.partitions():
        yield [build_stored_entry(*row) for row in rows]


def command_entries(connection: Connection, run_id: str) -> list[StoredEntry]:
    """The run's retained command_executed rows, in sequence order."""
    return entries_of_kinds(connection, run_id, EntryKind.COMMAND_EXECUTED)


# The run's head as two scalar subqueries over an alias (uncorrelated with the outer rows).
_AT_HEAD = journal_entries.alias("at_head")
_HEAD_OF = (
    select(_AT_HEAD.c.sequence, _AT_HEAD.c.hash)
    .where(_AT_HEAD.c.run_id == _RUN_ID)
    .order_by(_AT_HEAD.c.sequence.desc())
    .limit(1)
)
# By the kinds asked for (written into the text: driver.in_constants), whether the run's head
# is read with them, and the kinds read beside them from the run's first entry on.
_OF_KINDS: dict[tuple[tuple[str, ...], bool, tuple[str, ...]], DriverStatement] = {}
_HEAD_COLUMNS_OF_KINDS = (
    _HEAD_OF.with_only_columns(_AT_HEAD.c.sequence).scalar_subquery().label("head_sequence"),
    _HEAD_OF.with_only_columns(_AT_HEAD.c.hash).scalar_subquery().label("head_hash"),
)


def _rows_of_kinds(kinds: tuple[str, ...], from_sequence: ColumnElement[int]) -> Select[Any]:
    """The run's rows of ``kinds`` from ``from_sequence`` on: one index range
    (ix_journal_entries_run_kind_sequence)."""
    return select(journal_entries).where(
        journal_entries.c.run_id == _RUN_ID,
        in_constants(journal_entries.c.kind, kinds),
        journal_entries.c.sequence >= from_sequence,
    )


def _of_kinds(
    kinds: tuple[str, ...], *, with_head: bool, from_start: tuple[str, ...] = ()
) -> DriverStatement:
    key = (kinds, with_head, from_start)
    statement = _OF_KINDS.get(key)
    if statement is None:
        head = _HEAD_COLUMNS_OF_KINDS if with_head else ()
        rows = _rows_of_kinds(kinds, bindparam("from_sequence"))
        if from_start:
            # a second index range, not an OR the planner might answer by scanning the run
            found = union_all(rows, _rows_of_kinds(from_start, literal_column("1"))).subquery()
            ordered = select(*found.columns, *head).order_by(found.c.sequence)
        else:
            ordered = rows.add_columns(*head).order_by(journal_entries.c.sequence)
        statement = _OF_KINDS[key] = DriverStatement(ordered)
    return statement


def entries_of_kinds_and_head(
    connection: Connection,
    run_id: str,
    *kinds: EntryKind,
    from_sequence: int,
    from_start: Sequence[EntryKind] = (),
) -> tuple[list[StoredEntry], tuple[int, str]]:
    """:func:`entries_of_kinds` and :func:`journal_head` in one statement (the fenced writes,
    which hold the run row's lock, so the head cannot move before they append); with
    ``from_start``, the rows of those kinds (none of ``kinds``) from the run's first entry on,
    in the same statement and list (in sequence order: a caller tells them apart by kind)."""
    statement = _of_kinds(
        tuple(kind.value for kind in kinds),
        with_head=True,
        from_start=tuple(kind.value for kind in from_start),
    )
    rows = fetch(connection, statement, {"run_id": run_id, "from_sequence": from_sequence})
    if not rows:  # nothing of those kinds: the head alone
        return [], journal_head(connection, run_id)
    entries = [entry_from_mapping(row) for row in rows]
    return entries, (int(rows[0]["head_sequence"]), str(rows[0]["head_hash"]))


def entries_of_kinds(
    connection: Connection, run_id: str, *kinds: EntryKind, from_sequence: int = 1
) -> list[StoredEntry]:
    """The run's retained rows of ``kinds`` from ``from_sequence`` on, in sequence order (an
    index range: ix_journal_entries_run_kind_sequence)."""
    statement = _of_kinds(tuple(kind.value for kind in kinds), with_head=False)
    rows = fetch(connection, statement, {"run_id": run_id, "from_sequence": from_sequence})
    return [entry_from_mapping(row) for row in rows]
