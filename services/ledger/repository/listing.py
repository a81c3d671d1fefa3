"""Pages of runs and of execution requests, newest update first (ADR 0022).

Keyset paging: a page continues strictly after the (updated_at, id) of the previous page's last
row, so a row inserted while a caller pages (it is newer than the cursor) never shifts, repeats
or hides another. Each ordering is read backwards from an index: (updated_at, id) for all rows,
(state, updated_at, id) for one state (migration 0008).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    and_,
    case,
    exists,
    not_,
    or_,
    select,
    true,
    tuple_,
)

from services.ledger.domain.execution import ExecutionRequestRecord, RequestState
from services.ledger.domain.listing import (
    Condition,
    ContinuityState,
    Cursor,
    Filter,
    Op,
)
from services.ledger.domain.runs import Run
from services.ledger.repository.execution_requests import execution_request_from_row
from services.ledger.repository.runs import run_from_row
from services.ledger.schema import execution_requests, runs


@dataclass(frozen=True)
class RunRow:
    """A listed run with what listing keeps on it."""

    run: Run
    continuity_state: ContinuityState
    updated_at: str
    current_execution_request_id: str


def _compare(column: ColumnElement[str], op: Op, value: Any) -> ColumnElement[bool]:
    comparisons: dict[Op, ColumnElement[bool]] = {
        Op.EQ: column == value,
        Op.NE: column != value,
        Op.LT: column < value,
        Op.LE: column <= value,
        Op.GT: column > value,
        Op.GE: column >= value,
    }
    return comparisons[op]


def _identifier(column: ColumnElement[str], condition: Condition) -> ColumnElement[bool]:
    if not condition.prefix:
        return column == condition.value
    stem = str(condition.value)
    if not stem:
        return true()
    # A prefix range instead of LIKE: identifiers hold no wildcard to escape, and the range
    # reads the primary key's order. U+FFFF sorts after every identifier character.
    return and_(column >= stem, column < stem + "\uffff")


def _after(updated_at: Any, identifier: Any, cursor: Cursor | None) -> ColumnElement[bool]:
    if cursor is None:
        return true()
    # A row-value comparison: PostgreSQL reads it as one index range (an OR of two conditions
    # it would filter row by row); SQLite has row values since 3.15.
    return tuple_(updated_at, identifier) < tuple_(cursor.updated_at, cursor.identifier)


def _unresolved_request(run_id: Any) -> ColumnElement[bool]:
    return exists().where(
        execution_requests.c.run_id == run_id,
        execution_requests.c.state == RequestState.UNRESOLVED.value,
    )


def _run_flags() -> dict[str, ColumnElement[bool]]:
    """What each Boolean field of a run means when it is true."""
    c = runs.c
    return {
        "held": c.continuity_state == ContinuityState.HELD.value,
        "admitted": c.current_execution_request_id.is_not(None),
        "unresolved": _unresolved_request(c.run_id),
    }


_RUN_FLAGS = _run_flags()


def _run_condition(condition: Condition) -> ColumnElement[bool]:
    c = runs.c
    if condition.field in _RUN_FLAGS:
        flag = _RUN_FLAGS[condition.field]
        return flag if condition.value else not_(flag)
    if condition.field == "run_id":
        return _identifier(c.run_id, condition)
    column = {"state": c.continuity_state, "updated_at": c.updated_at}[condition.field]
    return _compare(column, condition.op, condition.value)


def list_runs(
    connection: Connection, listing: Filter, cursor: Cursor | None, limit: int
) -> list[RunRow]:
    """Up to ``limit`` runs matching ``listing`` after ``cursor``, newest update first."""
    statement: Select[Any] = (
        select(runs)
        .where(
            _after(runs.c.updated_at, runs.c.run_id, cursor),
            *(_run_condition(condition) for condition in listing.conditions),
        )
        .order_by(runs.c.updated_at.desc(), runs.c.run_id.desc())
        .limit(limit)
    )
    return [
        RunRow(
            run_from_row(row),
            ContinuityState(row["continuity_state"]),
            row["updated_at"],
            row["current_execution_request_id"] or "",
        )
        for row in connection.execute(statement).mappings()
    ]


def _past_lease(now: str) -> ColumnElement[bool]:
    c = execution_requests.c
    return and_(c.state == RequestState.QUEUED.value, c.lease_expires_at <= now)


def _state_condition(condition: Condition, now: str) -> ColumnElement[bool]:
    """A condition on the state as a reader sees it at ``now`` (``domain.execution.as_read``):
    a queued request past its lease is ``expired``. Equality, the common filter, keeps to the
    (state, updated_at) index."""
    c = execution_requests.c
    if condition.op is Op.EQ and condition.value == RequestState.QUEUED.value:
        return and_(c.state == condition.value, not_(_past_lease(now)))
    if condition.op is Op.EQ and condition.value == RequestState.EXPIRED.value:
        return or_(c.state == condition.value, _past_lease(now))
    read_state = case((_past_lease(now), RequestState.EXPIRED.value), else_=c.state)
    return _compare(read_state, condition.op, condition.value)


def _request_condition(condition: Condition, now: str) -> ColumnElement[bool]:
    c = execution_requests.c
    if condition.field == "unresolved":
        unresolved = c.state == RequestState.UNRESOLVED.value
        return unresolved if condition.value else not_(unresolved)
    if condition.field == "admission_refused":
        refused = c.admission_refusal.is_not(None)
        return refused if condition.value else not_(refused)
    if condition.field == "run_id":
        return _identifier(c.run_id, condition)
    if condition.field == "state":
        return _state_condition(condition, now)
    return _compare(c.updated_at, condition.op, condition.value)


def list_execution_requests_page(
    connection: Connection, listing: Filter, cursor: Cursor | None, limit: int, now: str
) -> list[ExecutionRequestRecord]:
    """Up to ``limit`` execution requests of any run matching ``listing`` (states as read at
    ``now``) after ``cursor``, newest update first."""
    c = execution_requests.c
    statement: Select[Any] = (
        select(execution_requests)
        .where(
            _after(c.updated_at, c.execution_request_id, cursor),
            *(_request_condition(condition, now) for condition in listing.conditions),
        )
        .order_by(c.updated_at.desc(), c.execution_request_id.desc())
        .limit(limit)
    )
    return [execution_request_from_row(row) for row in connection.execute(statement)]
