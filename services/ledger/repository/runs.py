"""The runs table."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Connection,
    RowMapping,
    ScalarSelect,
    Select,
    bindparam,
    insert,
    select,
    update,
)

from services.ledger.domain.runs import Run, RunSpec
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
        )
    )


def _run(row: RowMapping) -> Run:
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


def advance_completed_rounds(connection: Connection, run_id: str) -> int:
    """Add one completed round to the run; returns the new count (the caller's transaction)."""
    connection.execute(
        update(runs)
        .where(runs.c.run_id == run_id)
        .values(completed_rounds=runs.c.completed_rounds + 1)
    )
    value = connection.execute(
        select(runs.c.completed_rounds).where(runs.c.run_id == run_id)
    ).scalar_one()
    return int(value)


# Built once (building and cache-keying a statement per call cost more than running it).
_GET = select(runs).where(runs.c.run_id == bindparam("run_id"))
_GET_FOR_UPDATE = _GET.with_for_update()


def get_run(connection: Connection, run_id: str, *, lock: bool = False) -> Run | None:
    """The run; with ``lock``, its row locked for the transaction (the journal writers' lock)."""
    statement = _GET_FOR_UPDATE if lock else _GET
    row = connection.execute(statement, {"run_id": run_id}).mappings().first()
    return None if row is None else _run(row)


def _newest(column: str) -> ScalarSelect[Any]:
    entries = journal_entries.c
    return (
        select(entries[column])
        .where(entries.run_id == runs.c.run_id)
        .order_by(entries.sequence.desc())
        .limit(1)
        .scalar_subquery()
    )


# The run row and its journal head in one statement (one round trip on the append path).
_RUN_WITH_HEAD: Select[Any] = select(
    *runs.columns, _newest("sequence").label("head_sequence"), _newest("hash").label("head_hash")
).where(runs.c.run_id == bindparam("run_id"))


_RUN_WITH_HEAD_FOR_UPDATE = _RUN_WITH_HEAD.with_for_update(of=runs)


def get_run_with_head(
    connection: Connection, run_id: str, *, lock: bool = False
) -> tuple[Run, tuple[int, str]] | None:
    """The run and (sequence, hash) of its newest entry ((0, genesis) for an empty journal);
    with ``lock``, the run row locked for the transaction (the journal writers' lock)."""
    statement = _RUN_WITH_HEAD_FOR_UPDATE if lock else _RUN_WITH_HEAD
    row = connection.execute(statement, {"run_id": run_id}).mappings().first()
    if row is None:
        return None
    if row["head_sequence"] is None:
        return _run(row), (0, GENESIS_HASH)
    return _run(row), (int(row["head_sequence"]), str(row["head_hash"]))
