"""The journal stays append-only in the database: the ledger's own role, and triggers on SQLite
(ADR 0036).

PostgreSQL: the migrations run as the schema's owner; the ledger service runs as its own role
(``FORGE_DB_LEDGER_ROLE``, default ``forge_ledger``), created here NOLOGIN when the server has
none (a deployment gives it a login and a password, deploy/README.md). It gets USAGE on this
schema and, per table, what services/ledger/table_access.py lists: SELECT everywhere, INSERT
where the ledger writes, UPDATE only on runs, execution_requests and the trigger-kept
queue_depth, DELETE nowhere. ``policy_revisions`` is locked FOR UPDATE / FOR SHARE, which
PostgreSQL allows only with UPDATE privilege: the role gets UPDATE on one column and a trigger
refuses every UPDATE and DELETE. SQLite has no roles: triggers refuse UPDATE and DELETE on every
append-only table (``RAISE(ABORT, 'journal_entries is append-only')``).

Purely additive: the release before this one serves it, as the schema's owner or as the new
role. Re-running it (or 0012 -> 0013 again) grants the same privileges again.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

from services.ledger.repository import roles
from services.ledger.table_access import ledger_role

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    connection = op.get_bind()
    if connection.dialect.name == "postgresql":
        role = ledger_role()
        roles.ensure_ledger_role(connection, role)
        roles.grant_ledger_access(connection, role)
    roles.create_append_only_guards(connection)


def downgrade() -> None:
    connection = op.get_bind()
    roles.drop_append_only_guards(connection)
    if connection.dialect.name == "postgresql":
        roles.revoke_ledger_access(connection, ledger_role())
