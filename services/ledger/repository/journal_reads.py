"""The journal_entries table, read: a run's head, its newest entries, its entries of given kinds,
pages and batches of its journal, and the followers' poll. The writes are in repository.journal."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    CompoundSelect,
    Connection,
    Select,
    and_,
    bindparam,
    literal_column,
    or_,
    select,
    union_all,
)

from services.ledger.domain.journal import (
    EntryKind,
    StoredEntry,
    build_stored_entry,
)
from services.ledger.repository.driver import DriverStatement, fetch, in_constants
from services.ledger.schema import journal_entries
from shared.continuity.canonical import GENESIS_HASH

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


_HEAD_ALONE = DriverStatement(_HEAD)
#: The journal's columns, in the table's order (a row's stored entry; the writes' inserts).
ENTRY_COLUMNS = tuple(column.name for column in journal_entries.c)
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
    return build_stored_entry(**{name: row[name] for name in ENTRY_COLUMNS})


def entry_from_row(row: object) -> StoredEntry:
    """The stored entry of a row of the journal's columns, and no others."""
    return build_stored_entry(**row._mapping)  # type: ignore[attr-defined, no-any-return]


def journal_head(connection: Connection, run_id: str) -> tuple[int, str]:
    """(sequence, hash) of the last entry; (0, genesis) for an empty journal."""
    rows = fetch(connection, _HEAD_ALONE, {"run_id": run_id})
    return (int(rows[0]["sequence"]), str(rows[0]["hash"])) if rows else (0, GENESIS_HASH)


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
