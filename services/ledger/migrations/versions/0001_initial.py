"""Initial ledger schema: runs, journal, blobs, policy revisions, execution requests, tickets.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from shared.continuity.canonical import digest_of

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# The built-in revision 1: disabled, no window, default queue bounds, every workflow off.
DEFAULT_POLICY = {
    "revision": 1,
    "enabled": False,
    "window_seconds": 0,
    "per_run_ticket_limit": 50,
    "pending_ticket_limit": 500,
    "allow_unavailable_source_observations": False,
    "allow_pre_admission_recovery": False,
    "allow_readonly_observation_recovery": False,
}


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(128), primary_key=True),
        sa.Column("task_id", sa.String(256), nullable=False),
        sa.Column("attempt_id", sa.String(256), nullable=False),
        sa.Column("source_revision", sa.String(256), nullable=False),
        sa.Column("configuration_digest", sa.String(80), nullable=False),
        sa.Column("provider_timeout_seconds", sa.BigInteger, nullable=False),
        sa.Column("active_deadline", sa.String(40), nullable=True),
        sa.Column("command_limit", sa.BigInteger, nullable=False),
        sa.Column("time_budget_protocol", sa.String(64), nullable=False),
        sa.Column("source_profile", sa.String(256), nullable=False),
        sa.Column("created_by", sa.String(256), nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("run_digest", sa.String(80), nullable=False),
    )
    op.create_table(
        "journal_entries",
        sa.Column("run_id", sa.String(128), sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("sequence", sa.BigInteger, nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("payload_json", sa.Text, nullable=False),
        sa.Column("prev_hash", sa.String(80), nullable=False),
        sa.Column("hash", sa.String(80), nullable=False),
        sa.Column("actor", sa.String(256), nullable=False),
        sa.Column("recorded_at", sa.String(40), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "sequence", name="pk_journal_entries"),
        sa.UniqueConstraint("run_id", "prev_hash", name="uq_journal_entries_link"),
    )
    op.create_table(
        "blobs",
        sa.Column("digest", sa.String(80), primary_key=True),
        sa.Column("content", sa.LargeBinary, nullable=False),
        sa.Column("media_type", sa.String(128), nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
    )
    policy = op.create_table(
        "policy_revisions",
        sa.Column("revision", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("window_seconds", sa.BigInteger, nullable=False),
        sa.Column("per_run_ticket_limit", sa.BigInteger, nullable=False),
        sa.Column("pending_ticket_limit", sa.BigInteger, nullable=False),
        sa.Column("allow_unavailable_source_observations", sa.Boolean, nullable=False),
        sa.Column("allow_pre_admission_recovery", sa.Boolean, nullable=False),
        sa.Column("allow_readonly_observation_recovery", sa.Boolean, nullable=False),
        sa.Column("updated_by", sa.String(256), nullable=False),
        sa.Column("updated_at", sa.String(40), nullable=False),
        sa.Column("digest", sa.String(80), nullable=False),
    )
    op.create_table(
        "execution_requests",
        sa.Column("execution_request_id", sa.String(80), primary_key=True),
        sa.Column("run_id", sa.String(128), sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("attempt_id", sa.String(256), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=False),
        sa.Column("checkpoint_digest", sa.String(80), nullable=False),
        sa.Column("policy_revision", sa.BigInteger, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("lease_generation", sa.BigInteger, nullable=False),
        sa.Column("lease_seconds", sa.BigInteger, nullable=False),
        sa.Column("lease_expires_at", sa.String(40), nullable=True),
        sa.Column("owner", sa.String(256), nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("updated_at", sa.String(40), nullable=False),
    )
    op.create_index("ix_execution_requests_run_state", "execution_requests", ["run_id", "state"])
    op.create_table(
        "admission_tickets",
        sa.Column("run_id", sa.String(128), sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=False),
        sa.Column("operator_identity", sa.String(256), nullable=False),
        sa.Column("request_content_digest", sa.String(80), nullable=False),
        sa.Column("consumed_response_digest", sa.String(80), nullable=False),
        sa.Column("execution_request_id", sa.String(80), nullable=False),
        sa.Column("ticket_json", sa.Text, nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "request_id", name="pk_admission_tickets"),
        sa.UniqueConstraint(
            "run_id", "consumed_response_digest", name="uq_admission_tickets_consumed_graph"
        ),
    )
    op.bulk_insert(
        policy,
        [
            {
                **DEFAULT_POLICY,
                "updated_by": "system",
                "updated_at": "1970-01-01T00:00:00.000000Z",
                "digest": digest_of(DEFAULT_POLICY),
            }
        ],
    )


def downgrade() -> None:
    for table in (
        "admission_tickets",
        "execution_requests",
        "policy_revisions",
        "blobs",
        "journal_entries",
        "runs",
    ):
        op.drop_table(table)
