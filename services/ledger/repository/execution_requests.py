"""The execution_requests table: queued continuations and their fenced leases."""

from __future__ import annotations

from dataclasses import asdict

from sqlalchemy import Connection, func, insert, select, update

from services.ledger.domain.execution import ExecutionRequestRecord, RequestState
from services.ledger.schema import execution_requests


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


def requeue_execution_request(connection: Connection, record: ExecutionRequestRecord) -> None:
    """A recovery queues the same request again: state, generation, owner and a new lease (and,
    for the read-only observation, its separate derived checkpoint)."""
    connection.execute(
        update(execution_requests)
        .where(execution_requests.c.execution_request_id == record.execution_request_id)
        .values(
            checkpoint_digest=record.checkpoint_digest,
            state=record.state.value,
            policy_revision=record.policy_revision,
            lease_generation=record.lease_generation,
            lease_seconds=record.lease_seconds,
            lease_expires_at=record.lease_expires_at,
            owner=record.owner,
            updated_at=record.updated_at,
        )
    )
