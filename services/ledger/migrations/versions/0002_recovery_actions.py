"""Recovery actions: one saved recovery per request and workflow, keyed by recovery_id.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "recovery_actions",
        sa.Column("recovery_id", sa.String(128), primary_key=True),
        sa.Column("run_id", sa.String(128), sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=False),
        sa.Column("workflow", sa.String(32), nullable=False),
        sa.Column("actor", sa.String(256), nullable=False),
        sa.Column("request_content_digest", sa.String(80), nullable=False),
        sa.Column("execution_request_id", sa.String(80), nullable=False),
        sa.Column("recovery_json", sa.Text, nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.UniqueConstraint(
            "run_id", "request_id", "workflow", name="uq_recovery_actions_one_per_request"
        ),
    )


def downgrade() -> None:
    op.drop_table("recovery_actions")
