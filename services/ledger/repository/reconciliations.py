"""The reconciliations table: one saved decision per claimed execution request, keyed by
reconciliation_id."""

from __future__ import annotations

from sqlalchemy import Connection, insert, select

from services.ledger.domain.reconciliation_records import StoredReconciliation
from services.ledger.schema import reconciliations


def _reconciliation(row: object) -> StoredReconciliation:
    return StoredReconciliation.from_text(
        str(row._mapping["reconciliation_json"])  # type: ignore[attr-defined]
    )


def insert_reconciliation(connection: Connection, saved: StoredReconciliation) -> None:
    connection.execute(
        insert(reconciliations).values(
            reconciliation_id=saved.reconciliation_id,
            run_id=saved.run_id,
            execution_request_id=saved.execution_request_id,
            decision=saved.decision,
            actor=saved.actor,
            request_content_digest=saved.request_content_digest,
            reconciliation_json=saved.to_text(),
            created_at=saved.created_at,
        )
    )


def get_by_reconciliation_id(
    connection: Connection, reconciliation_id: str
) -> StoredReconciliation | None:
    row = connection.execute(
        select(reconciliations).where(reconciliations.c.reconciliation_id == reconciliation_id)
    ).first()
    return None if row is None else _reconciliation(row)


def get_for_execution_request(
    connection: Connection, execution_request_id: str
) -> StoredReconciliation | None:
    row = connection.execute(
        select(reconciliations).where(
            reconciliations.c.execution_request_id == execution_request_id
        )
    ).first()
    return None if row is None else _reconciliation(row)
