"""The pending count kept by the database, and the due leases as an index range (ADR 0031).

Every admission, recovery and reconciliation counted the pending (queued or claimed) execution
requests of all runs, and the admission also counted the queued requests whose lease ran out,
under the exclusive policy lock: two scans whose cost grew with the queue (2,400 queued
requests: about 1.3 ms of PostgreSQL per admission, 2,400 buffer pages read, every admission
waiting behind it).

- ``queue_depth``: rows of (shard, pending) whose sum is the number of pending requests. A
  trigger on ``execution_requests`` adds each row change's difference (+1 into a pending state,
  -1 out of one), so every writer keeps it, whatever its release or statement shape. On
  PostgreSQL the trigger is a deferred constraint trigger: it runs at commit, into the shard of
  the server session (``pg_backend_pid() % 64``), so a transaction locks one counter row only
  while it commits (it waits for nothing else then: no deadlock through the counter), and
  concurrent commits rarely share a row. SQLite serializes writers; one immediate trigger, one
  shard.
- ``ix_execution_requests_state_expiry`` (state, lease_expires_at): the due count and the sweep
  read only the queued requests whose lease ran out.

The existing pending requests are counted into shard 0 after the triggers exist, in the same
transaction, while creating the trigger keeps writers out of execution_requests. Purely
additive: the release before this one serves it (its writes fire the triggers too).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# The pending states as stored at this revision, ('queued', 'claimed'), written out in each
# statement below (services/ledger/domain/execution.py, PENDING_STATE_NAMES;
# tests/ledger/test_queue_depth.py holds the two equal); 64 shards.
_POSTGRES_FUNCTION = """
CREATE FUNCTION note_queue_depth() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    delta integer := 0;
BEGIN
    IF TG_OP <> 'DELETE' AND NEW.state IN ('queued', 'claimed') THEN
        delta := delta + 1;
    END IF;
    IF TG_OP <> 'INSERT' AND OLD.state IN ('queued', 'claimed') THEN
        delta := delta - 1;
    END IF;
    IF delta <> 0 THEN
        INSERT INTO queue_depth (shard, pending)
        VALUES (pg_backend_pid() % 64, delta)
        ON CONFLICT (shard) DO UPDATE SET pending = queue_depth.pending + EXCLUDED.pending;
    END IF;
    RETURN NULL;
END
$$
"""
_POSTGRES_TRIGGER = """
CREATE CONSTRAINT TRIGGER queue_depth_noted
AFTER INSERT OR UPDATE OF state OR DELETE ON execution_requests
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION note_queue_depth()
"""

# SQLite: one trigger per event (a trigger has one event there); the same differences.
_SQLITE_TRIGGERS = {
    "queue_depth_inserted": """
CREATE TRIGGER queue_depth_inserted AFTER INSERT ON execution_requests
WHEN NEW.state IN ('queued', 'claimed')
BEGIN
    INSERT INTO queue_depth (shard, pending) VALUES (0, 1)
    ON CONFLICT (shard) DO UPDATE SET pending = pending + excluded.pending;
END
""",
    "queue_depth_deleted": """
CREATE TRIGGER queue_depth_deleted AFTER DELETE ON execution_requests
WHEN OLD.state IN ('queued', 'claimed')
BEGIN
    INSERT INTO queue_depth (shard, pending) VALUES (0, -1)
    ON CONFLICT (shard) DO UPDATE SET pending = pending + excluded.pending;
END
""",
    "queue_depth_entered": """
CREATE TRIGGER queue_depth_entered AFTER UPDATE OF state ON execution_requests
WHEN NEW.state IN ('queued', 'claimed') AND OLD.state NOT IN ('queued', 'claimed')
BEGIN
    INSERT INTO queue_depth (shard, pending) VALUES (0, 1)
    ON CONFLICT (shard) DO UPDATE SET pending = pending + excluded.pending;
END
""",
    "queue_depth_left": """
CREATE TRIGGER queue_depth_left AFTER UPDATE OF state ON execution_requests
WHEN OLD.state IN ('queued', 'claimed') AND NEW.state NOT IN ('queued', 'claimed')
BEGIN
    INSERT INTO queue_depth (shard, pending) VALUES (0, -1)
    ON CONFLICT (shard) DO UPDATE SET pending = pending + excluded.pending;
END
""",
}
_BACKFILL = """
INSERT INTO queue_depth (shard, pending)
SELECT 0, count(*) FROM execution_requests WHERE state IN ('queued', 'claimed')
"""


def upgrade() -> None:
    op.create_index(
        "ix_execution_requests_state_expiry",
        "execution_requests",
        ["state", "lease_expires_at"],
    )
    op.create_table(
        "queue_depth",
        sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("pending", sa.BigInteger, nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_POSTGRES_FUNCTION)
        op.execute(_POSTGRES_TRIGGER)
    else:
        for trigger in _SQLITE_TRIGGERS.values():
            op.execute(trigger)
    op.execute(_BACKFILL)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER queue_depth_noted ON execution_requests")
        op.execute("DROP FUNCTION note_queue_depth()")
    else:
        for name in _SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
    op.drop_table("queue_depth")
    op.drop_index("ix_execution_requests_state_expiry", table_name="execution_requests")
