"""The runs table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    CTE,
    BindParameter,
    ColumnElement,
    Connection,
    ScalarSelect,
    Select,
    String,
    Table,
    bindparam,
    case,
    cast,
    insert,
    select,
    true,
    update,
)
from sqlalchemy.sql.dml import Update
from sqlalchemy.types import TypeEngine

from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.listing import RUN_STATE_OF_REQUEST, ContinuityState
from services.ledger.domain.policy import PolicyRevision
from services.ledger.domain.runs import Run, RunSpec
from services.ledger.repository.driver import DriverStatement, execute, fetch
from services.ledger.repository.policy import CURRENT_SUBQUERY, policy_from_values
from services.ledger.schema import journal_entries, runs
from shared.continuity.canonical import GENESIS_HASH


def insert_run(connection: Connection, run: Run) -> None:
    spec = run.spec
    connection.execute(
        insert(runs).values(
            run_id=spec.run_id,
            task_id=spec.task_id,
            attempt_id=spec.attempt_id,
            source_revision=spec.source_revision,
            configuration_digest=spec.configuration_digest,
            provider_timeout_seconds=spec.provider_timeout_seconds,
            active_deadline=spec.active_deadline,
            command_limit=spec.command_limit,
            time_budget_protocol=spec.time_budget_protocol,
            source_profile=spec.source_profile,
            created_by=run.created_by,
            created_at=run.created_at,
            run_digest=run.run_digest,
            updated_at=run.created_at,
            continuity_state=ContinuityState.ACTIVE.value,
        )
    )


# What listing reads (ADR 0022), kept here, in the caller's transaction, by the journal and the
# execution-request writers: updated_at only moves forward (fixed-width UTC text compares in time
# order); a run_held entry makes the run held; queuing a request makes it the run's current one
# (admitted); a change of the current request sets the run's state from the request's.
_AT: BindParameter[str] = bindparam("b_at")
_LATER = case((runs.c.updated_at < _AT, _AT), else_=runs.c.updated_at)
_OF_RUN = update(runs).where(runs.c.run_id == bindparam("b_run_id"))
_TOUCH = _OF_RUN.values(updated_at=_LATER)
_HOLD = _OF_RUN.values(updated_at=_LATER, continuity_state=ContinuityState.HELD.value)
_QUEUE = _OF_RUN.values(
    updated_at=_LATER,
    continuity_state=ContinuityState.ADMITTED.value,
    current_execution_request_id=bindparam("b_request"),
)
_CHANGE = _OF_RUN.values(
    updated_at=_LATER,
    continuity_state=case(
        (runs.c.current_execution_request_id == bindparam("b_request"), bindparam("b_state")),
        else_=runs.c.continuity_state,
    ),
)


# One UPDATE for a transaction that changes an execution request, appends and may count a
# completed round (a claim, a completion): the same row as the statements above applied one after
# the other, in one round trip (docs/performance-history.md, round 4). By (state changed, rounds).
_CHANGE_AND_COUNT = _CHANGE.values(completed_rounds=runs.c.completed_rounds + 1)
_TOUCH_AND_COUNT = _TOUCH.values(completed_rounds=runs.c.completed_rounds + 1)


#: The updates :func:`note_of_entry` chooses from: one of them notes each journal entry.
ENTRY_NOTES: tuple[Update, ...] = (_TOUCH, _HOLD, _CHANGE, _CHANGE_AND_COUNT, _TOUCH_AND_COUNT)
# The updates above as they are run on their own, on the driver's cursor (repository/driver.py):
# every journal writer and execution-request change runs one.
_RUN_ALONE = {id(statement): DriverStatement(statement) for statement in (*ENTRY_NOTES, _QUEUE)}


def _update(connection: Connection, statement: Update, parameters: dict[str, str]) -> None:
    execute(connection, _RUN_ALONE[id(statement)], parameters)


def noting(note: Update) -> CTE:
    """``note`` (one of ENTRY_NOTES, or the queuing update) as a common table expression
    returning the run's id: for the statements that note and insert in one (repository.journal,
    repository.admissions). Its parameters are ``b_``-prefixed, never a journal column's name."""
    return note.returning(runs.c.run_id).cte("noted")


def typed_parameters(table: Table, prefix: str) -> list[ColumnElement[Any]]:
    """Each of ``table``'s columns from its own parameter (``prefix`` and the column's name), for
    the select list of a statement that inserts from :func:`noting`: cast to its type, since
    PostgreSQL cannot infer a bare parameter's type there. Text is cast to unbounded VARCHAR,
    never to the column's VARCHAR(n): an explicit cast to VARCHAR(n) cuts a longer value
    silently, where the insert's own assignment to the column refuses it, as the statements one
    by one do. ``prefix`` is never a runs column's name: an UPDATE given a parameter named like
    one of its table's columns also sets that column."""
    return [
        cast(bindparam(f"{prefix}{column.name}", type_=column.type), _unbounded(column.type))
        for column in table.columns
    ]


def _unbounded(column_type: TypeEngine[Any]) -> TypeEngine[Any]:
    bounded = isinstance(column_type, String) and column_type.length is not None
    return String() if bounded else column_type


def noting_entry(*, held: bool, only_where: Sequence[ColumnElement[bool]] = ()) -> CTE:
    """The update :func:`note_entry` makes for a native entry (parameters ``b_run_id``,
    ``b_at``), as :func:`noting`, made only where ``only_where`` holds."""
    return noting((_HOLD if held else _TOUCH).where(*only_where))


def queuing_request(only_after: CTE) -> CTE:
    """The update :func:`note_request` makes for a newly queued request (parameters
    ``b_run_id``, ``b_at``, ``b_request``), as :func:`noting`, made only when ``only_after``
    returned a row: for the statement that writes an admission's rows in one
    (repository.admissions), after taking its place under the pending cap."""
    return noting(_QUEUE.where(select(only_after).exists()))


def note_of_entry(
    run_id: str,
    recorded_at: str,
    *,
    held: bool,
    request: ExecutionRequestRecord | None = None,
    completed_round: bool = False,
) -> tuple[Update, dict[str, str]]:
    """The update (one of ENTRY_NOTES) and its parameters that record a journal entry for the
    run (``held``: a run_held entry); with ``request``, in the transaction that changed that
    execution request (what :func:`note_request` would record, folded in), and with
    ``completed_round``, one more completed round."""
    if request is None and not completed_round:
        return (_HOLD if held else _TOUCH), {"b_run_id": run_id, "b_at": recorded_at}
    if held:
        raise ValueError("a run_held entry is never appended with a request change")
    state = None if request is None else RUN_STATE_OF_REQUEST[request.state]
    parameters = {
        "b_run_id": run_id,
        # updated_at only moves forward: the later of the two times the two updates would set
        "b_at": recorded_at if request is None else max(recorded_at, request.updated_at),
    }
    if request is None or state is None:
        return (_TOUCH_AND_COUNT if completed_round else _TOUCH), parameters
    parameters.update(b_request=request.execution_request_id, b_state=state.value)
    return (_CHANGE_AND_COUNT if completed_round else _CHANGE), parameters


def note_entry(
    connection: Connection,
    run_id: str,
    recorded_at: str,
    *,
    held: bool,
    request: ExecutionRequestRecord | None = None,
    completed_round: bool = False,
) -> None:
    """Record a journal entry on the run row (:func:`note_of_entry`) in a statement of its own."""
    note, parameters = note_of_entry(
        run_id, recorded_at, held=held, request=request, completed_round=completed_round
    )
    _update(connection, note, parameters)


def note_request(
    connection: Connection, record: ExecutionRequestRecord, *, queued_new: bool
) -> None:
    """An execution request was queued (``queued_new``) or changed."""
    parameters = {
        "b_run_id": record.run_id,
        "b_at": record.updated_at,
        "b_request": record.execution_request_id,
    }
    if queued_new:
        _update(connection, _QUEUE, parameters)
        return
    state = RUN_STATE_OF_REQUEST[record.state]
    if state is None:
        _update(connection, _TOUCH, parameters)
    else:
        _update(connection, _CHANGE, {**parameters, "b_state": state.value})


def run_from_row(row: Mapping[Any, Any]) -> Run:
    spec = RunSpec(
        run_id=row["run_id"],
        task_id=row["task_id"],
        attempt_id=row["attempt_id"],
        source_revision=row["source_revision"],
        configuration_digest=row["configuration_digest"],
        provider_timeout_seconds=row["provider_timeout_seconds"],
        active_deadline=row["active_deadline"],
        command_limit=row["command_limit"],
        time_budget_protocol=row["time_budget_protocol"],
        source_profile=row["source_profile"],
    )
    return Run(
        spec,
        row["created_by"],
        row["created_at"],
        row["run_digest"],
        int(row["completed_rounds"]),
    )


# Built once (building and cache-keying a statement per call cost more than running it).
_GET = DriverStatement(select(runs).where(runs.c.run_id == bindparam("run_id")))


def get_run(connection: Connection, run_id: str) -> Run | None:
    """The run (unlocked: the writers lock its row in the statements that read it with what
    they need, runs.note_entry_reading_head and repository/custody.py)."""
    rows = fetch(connection, _GET, {"run_id": run_id})
    return run_from_row(rows[0]) if rows else None


def _newest(column: str, run_id: ColumnElement[str] = runs.c.run_id) -> ScalarSelect[Any]:
    """``column`` of the run's newest journal entry; ``run_id``: the run's column (correlated)
    or a parameter naming it."""
    entries = journal_entries.c
    return (
        select(entries[column])
        .where(entries.run_id == run_id)
        .order_by(entries.sequence.desc())
        .limit(1)
        .scalar_subquery()
    )


#: The run's journal head as two columns of a statement that selects from ``runs``
#: (:func:`head_from_row` reads them).
HEAD_COLUMNS = (_newest("sequence").label("head_sequence"), _newest("hash").label("head_hash"))

# The run row and its journal head in one statement (one round trip on the append path).
_RUN_WITH_HEAD: Select[Any] = select(*runs.columns, *HEAD_COLUMNS).where(
    runs.c.run_id == bindparam("run_id")
)

# The same, and the current policy revision's columns (prefixed "policy_"), in one statement:
# the snapshot's header. Outer-joined, so a run is found even in a database without a policy.
RUN_WITH_HEAD_AND_POLICY: Select[Any] = (
    select(
        *_RUN_WITH_HEAD.selected_columns,
        *(column.label(f"policy_{column.name}") for column in CURRENT_SUBQUERY.c),
    )
    .select_from(runs.outerjoin(CURRENT_SUBQUERY, true()))
    .where(runs.c.run_id == bindparam("run_id"))
)


def run_with_head_and_policy(
    row: Mapping[Any, Any],
) -> tuple[Run, tuple[int, str], PolicyRevision]:
    """The run, its head and the current policy of a row of :data:`RUN_WITH_HEAD_AND_POLICY`."""
    if row["policy_revision"] is None:
        raise RuntimeError("policy_revisions is empty: migrations were not applied")
    names = (column.name for column in CURRENT_SUBQUERY.c)
    policy = policy_from_values({name: row[f"policy_{name}"] for name in names})
    return run_from_row(row), head_from_row(row), policy


_READING = DriverStatement(RUN_WITH_HEAD_AND_POLICY)


def get_run_with_head_and_policy(
    connection: Connection, run_id: str
) -> tuple[Run, tuple[int, str], PolicyRevision] | None:
    """The run, its head and the current policy revision in one statement (GetRun, a worker's
    first call for each request: three statements until round 5); None: no such run."""
    rows = fetch(connection, _READING, {"run_id": run_id})
    return run_with_head_and_policy(rows[0]) if rows else None


def head_from_row(row: Mapping[Any, Any]) -> tuple[int, str]:
    """(sequence, hash) of the head read by :data:`HEAD_COLUMNS`; (0, genesis): no entry."""
    if row["head_sequence"] is None:
        return (0, GENESIS_HASH)
    return (int(row["head_sequence"]), str(row["head_hash"]))


# A native append's run row in one statement (docs/performance-history.md, round 4): the listing
# columns noted for the entry about to be inserted (note_entry's _TOUCH or _HOLD), which locks the
# row as FOR UPDATE would, and what the append's checks read returned: the run's command limit and
# its head (not the whole row: every returned column costs the driver and the result a column object
# a call). The transaction rolls the update back with everything else when the append is then
# refused. The head's subqueries name the run by its parameter, not by correlation: SQLite's
# RETURNING drops the table of every column it names, and a correlated ``run_id = run_id`` would
# match every run.
_B_RUN_ID: BindParameter[str] = bindparam("b_run_id")
_HEAD_COLUMNS = (
    _newest("sequence", _B_RUN_ID).label("head_sequence"),
    _newest("hash", _B_RUN_ID).label("head_hash"),
)
_TOUCH_RETURNING = DriverStatement(_TOUCH.returning(runs.c.command_limit, *_HEAD_COLUMNS))
_HOLD_RETURNING = DriverStatement(_HOLD.returning(runs.c.command_limit, *_HEAD_COLUMNS))


def note_entry_reading_head(
    connection: Connection, run_id: str, recorded_at: str, *, held: bool
) -> tuple[int, tuple[int, str]] | None:
    """:func:`note_entry` for an entry about to be inserted, and the run's command limit and its
    head as a locking read would, in one statement; None: no such run."""
    statement = _HOLD_RETURNING if held else _TOUCH_RETURNING
    parameters = {"b_run_id": run_id, "b_at": recorded_at}
    rows = fetch(connection, statement, parameters)
    if not rows:
        return None
    return int(rows[0]["command_limit"]), head_from_row(rows[0])
