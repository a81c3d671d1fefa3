"""The policy lock is the schema's advisory gate alone; no statement locks a policy row (ADR 0067).

This migration changes no table, column or grant. It is the revision from which every release
that serves the schema takes the policy lock as the schema's advisory gate (a class and a hash
of ``current_schema()``): some releases that serve revision 0014 take the gate with a
server-wide key instead (before the schema key of 2026-12-06), and they were kept out only
because every release also locked the newest ``policy_revisions`` row. A
release that serves this revision and no older one (``schema_revisions.SERVED``) runs only beside
releases that take the gate in the same modes, so it can stop locking the row. On PostgreSQL it
records that on the table, where an operator reading the schema sees it; SQLite has no row locks
and no comments, and only its revision moves.

Purely additive: the release before this one serves it unchanged (it takes the gate and locks
the row; the ledger role's UPDATE on ``policy_revisions.revision``, which its row lock needs,
stays granted until the release after this one takes it back).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

# No quote inside: the text is written into the statement as a literal.
_COMMENT = (
    "Immutable policy revisions. From schema revision 0015 the policy lock is the "
    "transaction-scoped advisory gate of the schema alone (ADR 0067); no ledger statement "
    "locks these rows."
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"COMMENT ON TABLE policy_revisions IS '{_COMMENT}'")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("COMMENT ON TABLE policy_revisions IS NULL")
