"""Every SQL statement of the ledger. Functions take a connection inside the caller's
transaction; they never commit. Rows come back as domain dataclasses."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict

from sqlalchemy import Connection, func, insert, select, update

from services.ledger.domain.execution import ExecutionRequestRecord, RequestState
from services.ledger.domain.journal import StoredEntry
from services.ledger.domain.policy import PolicyRevision, PolicySettings
from services.ledger.domain.runs import Run, RunSpec
from services.ledger.schema import (
    admission_tickets,
    blobs,
    execution_requests,
    journal_entries,
    policy_revisions,
    runs,
)
from shared.canonical import GENESIS_HASH

# --- runs -----------------------------------------------------------------------------------


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


def get_run(connection: Connection, run_id: str) -> Run | None:
    row = connection.execute(select(runs).where(runs.c.run_id == run_id)).mappings().first()
    if row is None:
        return None
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
    return Run(spec, row["created_by"], row["created_at"], row["run_digest"])


# --- journal --------------------------------------------------------------------------------


def _entry(row: object) -> StoredEntry:
    values = dict(row._mapping)  # type: ignore[attr-defined]
    return StoredEntry(**values)


def journal_head(connection: Connection, run_id: str) -> tuple[int, str]:
    """(sequence, hash) of the last entry; (0, genesis) for an empty journal."""
    row = connection.execute(
        select(journal_entries.c.sequence, journal_entries.c.hash)
        .where(journal_entries.c.run_id == run_id)
        .order_by(journal_entries.c.sequence.desc())
        .limit(1)
    ).first()
    return (0, GENESIS_HASH) if row is None else (int(row.sequence), str(row.hash))


def insert_journal_entry(connection: Connection, entry: StoredEntry) -> None:
    connection.execute(
        insert(journal_entries).values(
            run_id=entry.run_id,
            sequence=entry.sequence,
            kind=entry.kind,
            payload_json=entry.payload_json,
            prev_hash=entry.prev_hash,
            hash=entry.hash,
            actor=entry.actor,
            recorded_at=entry.recorded_at,
        )
    )


def read_journal(
    connection: Connection, run_id: str, from_sequence: int, limit: int
) -> list[StoredEntry]:
    rows = connection.execute(
        select(journal_entries)
        .where(journal_entries.c.run_id == run_id, journal_entries.c.sequence >= from_sequence)
        .order_by(journal_entries.c.sequence)
        .limit(limit)
    )
    return [_entry(row) for row in rows]


def iter_journal(connection: Connection, run_id: str, batch: int = 500) -> Iterator[StoredEntry]:
    """Every entry in sequence order, fetched in batches (bounded memory for long journals)."""
    next_sequence = 1
    while True:
        page = read_journal(connection, run_id, next_sequence, batch)
        yield from page
        if len(page) < batch:
            return
        next_sequence = page[-1].sequence + 1


def count_entries(connection: Connection, run_id: str) -> int:
    return int(
        connection.execute(
            select(func.count())
            .select_from(journal_entries)
            .where(journal_entries.c.run_id == run_id)
        ).scalar_one()
    )


# --- blobs ----------------------------------------------------------------------------------


def get_blob(connection: Connection, digest: str) -> tuple[bytes, str] | None:
    row = connection.execute(
        select(blobs.c.content, blobs.c.media_type).where(blobs.c.digest == digest)
    ).first()
    return None if row is None else (bytes(row.content), str(row.media_type))


def blob_exists(connection: Connection, digest: str) -> bool:
    return (
        connection.execute(select(blobs.c.digest).where(blobs.c.digest == digest)).first()
        is not None
    )


def insert_blob(
    connection: Connection, digest: str, content: bytes, media_type: str, created_at: str
) -> None:
    connection.execute(
        insert(blobs).values(
            digest=digest,
            content=content,
            media_type=media_type,
            size=len(content),
            created_at=created_at,
        )
    )


# --- policy ---------------------------------------------------------------------------------


def _policy(row: object) -> PolicyRevision:
    values = dict(row._mapping)  # type: ignore[attr-defined]
    settings = PolicySettings(
        enabled=bool(values["enabled"]),
        window_seconds=int(values["window_seconds"]),
        per_run_ticket_limit=int(values["per_run_ticket_limit"]),
        pending_ticket_limit=int(values["pending_ticket_limit"]),
        allow_unavailable_source_observations=bool(values["allow_unavailable_source_observations"]),
        allow_pre_admission_recovery=bool(values["allow_pre_admission_recovery"]),
        allow_readonly_observation_recovery=bool(values["allow_readonly_observation_recovery"]),
    )
    return PolicyRevision(
        revision=int(values["revision"]),
        settings=settings,
        updated_by=str(values["updated_by"]),
        updated_at=str(values["updated_at"]),
        digest=str(values["digest"]),
    )


def current_policy(connection: Connection) -> PolicyRevision:
    row = connection.execute(
        select(policy_revisions).order_by(policy_revisions.c.revision.desc()).limit(1)
    ).first()
    if row is None:
        raise RuntimeError("policy_revisions is empty: migrations were not applied")
    return _policy(row)


def policy_revision(connection: Connection, revision: int) -> PolicyRevision | None:
    row = connection.execute(
        select(policy_revisions).where(policy_revisions.c.revision == revision)
    ).first()
    return None if row is None else _policy(row)


def list_policy_revisions(
    connection: Connection, before_revision: int, limit: int
) -> list[PolicyRevision]:
    query = select(policy_revisions).order_by(policy_revisions.c.revision.desc()).limit(limit)
    if before_revision > 0:
        query = query.where(policy_revisions.c.revision < before_revision)
    return [_policy(row) for row in connection.execute(query)]


def insert_policy_revision(connection: Connection, policy: PolicyRevision) -> None:
    settings = policy.settings
    connection.execute(
        insert(policy_revisions).values(
            revision=policy.revision,
            **asdict(settings),
            updated_by=policy.updated_by,
            updated_at=policy.updated_at,
            digest=policy.digest,
        )
    )


# --- admission tickets ----------------------------------------------------------------------


# --- execution requests ---------------------------------------------------------------------


def _execution_request(row: object) -> ExecutionRequestRecord:
    values = dict(row._mapping)  # type: ignore[attr-defined]
    values["state"] = RequestState(values["state"])
    return ExecutionRequestRecord(**values)


def insert_execution_request(connection: Connection, record: ExecutionRequestRecord) -> None:
    values = asdict(record)
    values["state"] = record.state.value
    connection.execute(insert(execution_requests).values(**values))


def update_execution_request(connection: Connection, record: ExecutionRequestRecord) -> None:
    connection.execute(
        update(execution_requests)
        .where(execution_requests.c.execution_request_id == record.execution_request_id)
        .values(
            state=record.state.value,
            lease_generation=record.lease_generation,
            owner=record.owner,
            updated_at=record.updated_at,
        )
    )


def get_execution_request(
    connection: Connection, execution_request_id: str, *, for_update: bool = False
) -> ExecutionRequestRecord | None:
    query = select(execution_requests).where(
        execution_requests.c.execution_request_id == execution_request_id
    )
    if for_update:
        query = query.with_for_update()
    row = connection.execute(query).first()
    return None if row is None else _execution_request(row)


def list_execution_requests(
    connection: Connection, run_id: str, states: tuple[RequestState, ...] = ()
) -> list[ExecutionRequestRecord]:
    query = (
        select(execution_requests)
        .where(execution_requests.c.run_id == run_id)
        .order_by(execution_requests.c.created_at, execution_requests.c.execution_request_id)
    )
    if states:
        query = query.where(execution_requests.c.state.in_([s.value for s in states]))
    return [_execution_request(row) for row in connection.execute(query)]


def count_execution_requests(connection: Connection, states: tuple[RequestState, ...]) -> int:
    return int(
        connection.execute(
            select(func.count())
            .select_from(execution_requests)
            .where(execution_requests.c.state.in_([s.value for s in states]))
        ).scalar_one()
    )


# --- tickets --------------------------------------------------------------------------------


def insert_ticket(
    connection: Connection,
    *,
    run_id: str,
    request_id: str,
    operator_identity: str,
    request_content_digest: str,
    consumed_response_digest: str,
    execution_request_id: str,
    ticket_json: str,
    created_at: str,
) -> None:
    connection.execute(
        insert(admission_tickets).values(
            run_id=run_id,
            request_id=request_id,
            operator_identity=operator_identity,
            request_content_digest=request_content_digest,
            consumed_response_digest=consumed_response_digest,
            execution_request_id=execution_request_id,
            ticket_json=ticket_json,
            created_at=created_at,
        )
    )


def get_ticket(connection: Connection, run_id: str, request_id: str) -> dict[str, str] | None:
    row = connection.execute(
        select(admission_tickets).where(
            admission_tickets.c.run_id == run_id, admission_tickets.c.request_id == request_id
        )
    ).first()
    return None if row is None else {k: str(v) for k, v in row._mapping.items()}


def ticket_for_consumed_graph(
    connection: Connection, run_id: str, consumed_response_digest: str
) -> dict[str, str] | None:
    row = connection.execute(
        select(admission_tickets).where(
            admission_tickets.c.run_id == run_id,
            admission_tickets.c.consumed_response_digest == consumed_response_digest,
        )
    ).first()
    return None if row is None else {k: str(v) for k, v in row._mapping.items()}


def count_tickets_for_run(connection: Connection, run_id: str) -> int:
    return int(
        connection.execute(
            select(func.count())
            .select_from(admission_tickets)
            .where(admission_tickets.c.run_id == run_id)
        ).scalar_one()
    )


def lock_current_policy(connection: Connection) -> PolicyRevision:
    """The current policy, row-locked on PostgreSQL: admissions, claims, command charges and
    policy writes serialize on it, so caps and revocations are checked against committed state.

    A policy write inserts a new revision instead of updating one, so a transaction that waited
    for the lock may hold a revision that was superseded meanwhile; under READ COMMITTED each new
    statement sees the committed newer row, so re-read until the locked row is the newest.
    (SQLite's BEGIN IMMEDIATE already serializes writers; there the first read is final.)"""
    while True:
        row = connection.execute(
            select(policy_revisions)
            .order_by(policy_revisions.c.revision.desc())
            .limit(1)
            .with_for_update()
        ).first()
        if row is None:
            raise RuntimeError("policy_revisions is empty: migrations were not applied")
        locked = _policy(row)
        newest = connection.execute(select(func.max(policy_revisions.c.revision))).scalar_one()
        if newest == locked.revision:
            return locked


# --- commands -------------------------------------------------------------------------------


def command_entries(connection: Connection, run_id: str) -> list[StoredEntry]:
    """The run's retained command_executed rows, in sequence order."""
    rows = connection.execute(
        select(journal_entries)
        .where(journal_entries.c.run_id == run_id, journal_entries.c.kind == "command_executed")
        .order_by(journal_entries.c.sequence)
    )
    return [_entry(row) for row in rows]
