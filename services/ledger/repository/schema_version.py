"""The schema revision alembic records in the database (read by the ledger's readiness check)."""

from __future__ import annotations

from sqlalchemy import Connection, inspect, text


def revision(connection: Connection) -> str | None:
    """The revision the schema is at; None when it was never migrated (no alembic_version)."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    value = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return None if value is None else str(value)
