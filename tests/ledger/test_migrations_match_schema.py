"""The migrations build exactly the schema ``services/ledger/schema.py`` declares, on SQLite and
PostgreSQL: a table, column, index or constraint added on one side only is a difference here,
before it becomes a query the other database runs without its index or a column it lacks."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, inspect

from services.ledger.schema import metadata


def test_the_migrated_database_is_the_declared_schema(engine: Engine) -> None:
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), metadata)
    # alembic's own bookkeeping table is the only table the declaration does not name
    assert [d for d in differences if not _is_alembic_version(d)] == []


def test_the_recovery_lookup_by_execution_request_is_indexed(engine: Engine) -> None:
    indexes = inspect(engine).get_indexes("recovery_actions")
    assert {
        "name": "ix_recovery_actions_execution_request",
        "columns": ["execution_request_id"],
    } in [{"name": index["name"], "columns": index["column_names"]} for index in indexes]


def _is_alembic_version(difference: object) -> bool:
    return (
        isinstance(difference, tuple)
        and difference[0] == "remove_table"
        and getattr(difference[1], "name", None) == "alembic_version"
    )
