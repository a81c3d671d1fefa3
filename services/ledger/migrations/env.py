"""Alembic environment: runs against the connection handed in by services.ledger.migrate."""

from __future__ import annotations

from alembic import context

from services.ledger.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
