"""The snapshot's header in one statement: the run, its journal head, the current policy
revision and the run's execution requests (what transactions/snapshot.py reads before the
journal). One statement sees one snapshot on either database, so a reader whose journal is
unchanged (ADR 0030) needs no transaction around it (database.single_statement_read)."""

from __future__ import annotations

from sqlalchemy import Connection

from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.policy import PolicyRevision
from services.ledger.domain.runs import Run
from services.ledger.repository.driver import DriverStatement, fetch
from services.ledger.repository.execution_requests import execution_request_from_values
from services.ledger.repository.runs import RUN_WITH_HEAD_AND_POLICY, run_with_head_and_policy
from services.ledger.schema import execution_requests, runs

# Each request's columns, prefixed: the runs table has columns of the same names.
_PREFIX = "x_"
_REQUEST_COLUMNS = tuple(execution_requests.c)
# Built once (building and cache-keying a statement per call cost more than running it). One row
# per request of the run, oldest first (as repository.execution_requests.list_execution_requests
# orders them); one row with the request columns null for a run without requests.
_HEADER = DriverStatement(
    RUN_WITH_HEAD_AND_POLICY.add_columns(
        *(column.label(f"{_PREFIX}{column.name}") for column in _REQUEST_COLUMNS)
    )
    .outerjoin_from(runs, execution_requests, execution_requests.c.run_id == runs.c.run_id)
    .order_by(execution_requests.c.created_at, execution_requests.c.execution_request_id)
)


def get_snapshot_header(
    connection: Connection, run_id: str
) -> tuple[Run, tuple[int, str], PolicyRevision, list[ExecutionRequestRecord]] | None:
    """The run, (sequence, hash) of its newest entry ((0, genesis) for an empty journal), the
    current policy revision and the run's execution requests, oldest first; None: no such run."""
    rows = fetch(connection, _HEADER, {"run_id": run_id})
    if not rows:
        return None
    run, head, policy = run_with_head_and_policy(rows[0])
    requests = [
        execution_request_from_values(
            {column.name: row[f"{_PREFIX}{column.name}"] for column in _REQUEST_COLUMNS}
        )
        for row in rows
        if row[f"{_PREFIX}execution_request_id"] is not None
    ]
    return run, head, policy, requests
