"""Chained signed heads: each signature names the one before it, and declared pre-signing
prefixes (ADR 0015, "Signed heads that chain"; docs/formats.md, "Signed head").

- ``signed_heads`` gains the members of a ``forge.continuity.signed-head/2`` statement:
  ``format`` (NULL: a ``/1`` signature made before this migration), the previous signed head
  (``previous_sequence``, ``previous_head_hash``, ``previous_signature_digest``; NULL for a run's
  first signature) and ``unsigned_through`` (the run's declared pre-signing prefix). An index on
  ``signed_at`` serves the head feed monitors follow (``ListHeads``).
- ``unsigned_prefixes`` holds, per run, the last sequence written before its heads were signed
  (a ledger that ran without a key, or entries from before signing). Only this migration and the
  operator's explicit declaration write it; the ledger reads it when it signs a run's first head
  and refuses to extend any other head that lacks its signature.

The migration declares the prefix of every run whose journal holds an entry without a signature
other than a ``migration_settlement`` (an admission signs its settlement and claim once, at the
claim): one scan of the journal, at migration time.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_COLUMNS = (
    ("format", sa.String(64)),
    ("previous_sequence", sa.BigInteger),
    ("previous_head_hash", sa.String(80)),
    ("previous_signature_digest", sa.String(80)),
    ("unsigned_through", sa.BigInteger),
)

_DECLARE_EXISTING = sa.text(
    "INSERT INTO unsigned_prefixes (run_id, through_sequence, declared_at, declared_by) "
    "SELECT j.run_id, MAX(j.sequence), :declared_at, 'migration 0012' "
    "FROM journal_entries j LEFT JOIN signed_heads s "
    "ON s.run_id = j.run_id AND s.sequence = j.sequence "
    "WHERE s.run_id IS NULL AND j.kind <> 'migration_settlement' "
    "GROUP BY j.run_id"
)


def upgrade() -> None:
    with op.batch_alter_table("signed_heads") as batch:
        for name, type_ in _COLUMNS:
            batch.add_column(sa.Column(name, type_, nullable=True))
    op.create_index("ix_signed_heads_signed_at", "signed_heads", ["signed_at", "run_id"])
    op.create_table(
        "unsigned_prefixes",
        sa.Column("run_id", sa.String(128), sa.ForeignKey("runs.run_id"), primary_key=True),
        sa.Column("through_sequence", sa.BigInteger, nullable=False),
        sa.Column("declared_at", sa.String(40), nullable=False),
        sa.Column("declared_by", sa.String(256), nullable=False),
    )
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    op.get_bind().execute(_DECLARE_EXISTING, {"declared_at": now})


def downgrade() -> None:
    op.drop_table("unsigned_prefixes")
    op.drop_index("ix_signed_heads_signed_at", table_name="signed_heads")
    with op.batch_alter_table("signed_heads") as batch:
        for name, _ in reversed(_COLUMNS):
            batch.drop_column(name)
