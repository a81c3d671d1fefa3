"""The recovery_actions table: one saved recovery per request and workflow, keyed by
recovery_id."""

from __future__ import annotations

from sqlalchemy import Connection, insert, select

from services.ledger.domain.recoveries import StoredRecovery
from services.ledger.schema import recovery_actions


def _recovery(row: object) -> StoredRecovery:
    return StoredRecovery.from_text(str(row._mapping["recovery_json"]))  # type: ignore[attr-defined]


def insert_recovery(connection: Connection, recovery: StoredRecovery) -> None:
    connection.execute(
        insert(recovery_actions).values(
            recovery_id=recovery.recovery_id,
            run_id=recovery.run_id,
            request_id=recovery.request_id,
            workflow=recovery.workflow,
            actor=recovery.actor,
            request_content_digest=recovery.request_content_digest,
            execution_request_id=recovery.execution_request_id,
            recovery_json=recovery.to_text(),
            created_at=recovery.created_at,
        )
    )


def get_by_recovery_id(connection: Connection, recovery_id: str) -> StoredRecovery | None:
    row = connection.execute(
        select(recovery_actions).where(recovery_actions.c.recovery_id == recovery_id)
    ).first()
    return None if row is None else _recovery(row)


def get_for_request(
    connection: Connection, run_id: str, request_id: str, workflow: str
) -> StoredRecovery | None:
    row = connection.execute(
        select(recovery_actions).where(
            recovery_actions.c.run_id == run_id,
            recovery_actions.c.request_id == request_id,
            recovery_actions.c.workflow == workflow,
        )
    ).first()
    return None if row is None else _recovery(row)


def list_for_execution_request(
    connection: Connection, execution_request_id: str
) -> list[StoredRecovery]:
    """Every recovery that queued this execution request (a request may be recovered by more
    than one workflow in turn), oldest first."""
    rows = connection.execute(
        select(recovery_actions)
        .where(recovery_actions.c.execution_request_id == execution_request_id)
        .order_by(recovery_actions.c.created_at, recovery_actions.c.recovery_id)
    )
    return [_recovery(row) for row in rows]
