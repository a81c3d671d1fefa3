"""An index on journal_entries (run_id, kind, sequence): the newest entry of a kind, a run's
command receipts, the entries that queued a request and the outcomes since were each a walk over
the run's whole journal (a 100,000-entry run cost a worker seconds per claim); with it each is an
index range. Purely additive.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_journal_entries_run_kind_sequence", "journal_entries", ["run_id", "kind", "sequence"]
    )


def downgrade() -> None:
    op.drop_index("ix_journal_entries_run_kind_sequence", table_name="journal_entries")
