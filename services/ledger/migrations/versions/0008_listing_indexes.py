"""Listing runs and execution requests (ADR 0022): runs.updated_at, runs.continuity_state and
runs.current_execution_request_id, kept by the ledger in the transaction of each change, and the
indexes the listings read in update order (all rows, or one state).

Existing runs are backfilled from their journal and execution requests: updated_at is the latest
of the run's registration, journal entries and request changes; the current request is the
newest queued one; the state is held when a run_held entry is newer than that request, the
request's state otherwise, active when there is neither.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_RUN_STATE_OF_REQUEST = {
    "queued": "admitted",
    "claimed": "running",
    "completed": "completed",
    "failed": "failed",
    "reconciled": "admitted",
    "unresolved": "unresolved",
    "cancelled": "cancelled",
    "expired": "expired",
}


def _backfill(connection: sa.Connection) -> None:
    run_ids = [row[0] for row in connection.execute(sa.text("SELECT run_id FROM runs"))]
    for run_id in run_ids:
        bound = {"run_id": run_id}
        created_at = connection.execute(
            sa.text("SELECT created_at FROM runs WHERE run_id = :run_id"), bound
        ).scalar_one()
        last_entry = connection.execute(
            sa.text("SELECT max(recorded_at) FROM journal_entries WHERE run_id = :run_id"), bound
        ).scalar()
        held_at = connection.execute(
            sa.text(
                "SELECT max(recorded_at) FROM journal_entries "
                "WHERE run_id = :run_id AND kind = 'run_held'"
            ),
            bound,
        ).scalar()
        last_change = connection.execute(
            sa.text("SELECT max(updated_at) FROM execution_requests WHERE run_id = :run_id"),
            bound,
        ).scalar()
        current = connection.execute(
            sa.text(
                "SELECT execution_request_id, state, created_at FROM execution_requests "
                "WHERE run_id = :run_id ORDER BY created_at DESC, execution_request_id DESC "
                "LIMIT 1"
            ),
            bound,
        ).first()
        if current is not None and (held_at is None or held_at <= current.created_at):
            state = _RUN_STATE_OF_REQUEST.get(current.state, "admitted")
        else:
            state = "held" if held_at is not None else "active"
        connection.execute(
            sa.text(
                "UPDATE runs SET updated_at = :updated_at, continuity_state = :state, "
                "current_execution_request_id = :current WHERE run_id = :run_id"
            ),
            {
                "run_id": run_id,
                "updated_at": max(v for v in (created_at, last_entry, last_change) if v),
                "state": state,
                "current": None if current is None else current.execution_request_id,
            },
        )


def upgrade() -> None:
    # Plain ADD COLUMN (NOT NULL with a default, filled in below) on both databases: a batch
    # table copy on SQLite would drop and recreate runs, which the other tables' foreign keys
    # refuse once rows exist.
    op.add_column("runs", sa.Column("updated_at", sa.String(40), nullable=False, server_default=""))
    op.add_column(
        "runs",
        sa.Column("continuity_state", sa.String(16), nullable=False, server_default="active"),
    )
    op.add_column("runs", sa.Column("current_execution_request_id", sa.String(80), nullable=True))
    _backfill(op.get_bind())
    op.create_index("ix_runs_updated", "runs", ["updated_at", "run_id"])
    op.create_index("ix_runs_state_updated", "runs", ["continuity_state", "updated_at", "run_id"])
    op.create_index(
        "ix_execution_requests_updated",
        "execution_requests",
        ["updated_at", "execution_request_id"],
    )
    op.create_index(
        "ix_execution_requests_state_updated",
        "execution_requests",
        ["state", "updated_at", "execution_request_id"],
    )


def downgrade() -> None:
    op.drop_index("ix_execution_requests_state_updated", "execution_requests")
    op.drop_index("ix_execution_requests_updated", "execution_requests")
    op.drop_index("ix_runs_state_updated", "runs")
    op.drop_index("ix_runs_updated", "runs")
    # Native DROP COLUMN (SQLite 3.35 and later, PostgreSQL), for the reason above.
    op.drop_column("runs", "current_execution_request_id")
    op.drop_column("runs", "continuity_state")
    op.drop_column("runs", "updated_at")
