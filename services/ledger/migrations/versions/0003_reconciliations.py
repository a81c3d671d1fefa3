"""Reconciliations: one reviewed decision per claimed execution request, keyed by
reconciliation_id.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reconciliations",
        sa.Column("reconciliation_id", sa.String(128), primary_key=True),
        sa.Column("run_id", sa.String(128), sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("execution_request_id", sa.String(80), nullable=False),
        sa.Column("decision", sa.String(32), nullable=False),
        sa.Column("actor", sa.String(256), nullable=False),
        sa.Column("request_content_digest", sa.String(80), nullable=False),
        sa.Column("reconciliation_json", sa.Text, nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.UniqueConstraint("execution_request_id", name="uq_reconciliations_one_per_request"),
    )


def downgrade() -> None:
    op.drop_table("reconciliations")
