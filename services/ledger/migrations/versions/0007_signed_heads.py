"""Signed heads: the ledger's Ed25519 signature over each run head a committing append made.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "signed_heads",
        sa.Column("run_id", sa.String(128), sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("sequence", sa.BigInteger, nullable=False),
        sa.Column("head_hash", sa.String(80), nullable=False),
        sa.Column("key_id", sa.String(80), nullable=False),
        sa.Column("signed_at", sa.String(40), nullable=False),
        sa.Column("signature", sa.LargeBinary, nullable=False),
        sa.PrimaryKeyConstraint("run_id", "sequence", name="pk_signed_heads"),
    )


def downgrade() -> None:
    op.drop_table("signed_heads")
