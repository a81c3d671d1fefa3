"""Statements an operator runs with the migration's credentials, never the ledger service: the
declaration of a run's pre-signing prefix (services/ledger/unsigned_prefix.py, ADR 0015). The
ledger's own role may only read ``unsigned_prefixes`` (ADR 0036), so the scan of the ledger's
statements (tests/ledger/test_table_access.py) leaves this module out, as it does migrations."""

from __future__ import annotations

from sqlalchemy import Connection, insert

from services.ledger.schema import unsigned_prefixes


def declare_unsigned_prefix(
    connection: Connection, run_id: str, through: int, declared_at: str, declared_by: str
) -> None:
    connection.execute(
        insert(unsigned_prefixes).values(
            run_id=run_id,
            through_sequence=through,
            declared_at=declared_at,
            declared_by=declared_by,
        )
    )
