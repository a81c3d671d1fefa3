"""An index on recovery_actions.execution_request_id: every worker claim and command dispatch
looks up the recovery actions that queued the request (the claim-time authority re-check).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_recovery_actions_execution_request", "recovery_actions", ["execution_request_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_recovery_actions_execution_request", table_name="recovery_actions")
