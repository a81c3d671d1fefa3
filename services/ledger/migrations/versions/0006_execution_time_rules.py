"""Execution-time rules: execution_requests.admission_refusal, the reason of the one native
admission-refusal record a request may have (set, the request is ineligible for automatic
scheduling). The new states ``cancelled`` and ``expired`` fit the existing state column.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("execution_requests") as batch:
        batch.add_column(sa.Column("admission_refusal", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("execution_requests") as batch:
        batch.drop_column("admission_refusal")
