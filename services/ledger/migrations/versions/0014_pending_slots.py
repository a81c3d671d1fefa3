"""The pending cap as a counter one conditional statement consumes (ADR 0049).

Admissions took the policy lock exclusively so that two of them could not both count the
pending requests under the cap and both queue one. They now share it (a policy write still
excludes them), and the cap is kept by one row instead:

- ``pending_slots``: one row (``slot`` 0) whose ``entered`` counts every request that ever
  entered a pending state (queued or claimed).
- ``queue_depth.released``: per shard, the requests that left a pending state, beside the
  shard's ``pending`` (migration 0010), written by the same trigger in the same statement.

So the pending requests are ``entered - sum(released)``. The trigger (PostgreSQL: the deferred
constraint trigger of 0010, at commit) adds to ``entered`` for a request entering a pending
state and to its shard's ``released`` for one leaving, whichever writer and release makes the
change. An admission consumes a place with one conditional statement,
``UPDATE pending_slots SET entered = entered WHERE entered - sum(released) < limit``: it locks
the row only when there is room, and holds it until its commit adds its request to ``entered``,
so the next admission's statement waits for that commit and re-checks the row's new value
(READ COMMITTED). Releases land on the shards, never on the one row: completions, failures and
expiries do not queue behind admissions.

Purely additive: the release before this one serves it (it reads ``sum(pending)``, still kept;
its inserts fire the trigger, so they are counted in ``entered`` too, and it takes the policy
lock exclusively, which excludes the admissions of this release while it counts).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from services.ledger.repository import roles
from services.ledger.table_access import ledger_role

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# The pending states as stored, ('queued', 'claimed'), written out as in migration 0010.
_POSTGRES_FUNCTION = """
CREATE OR REPLACE FUNCTION note_queue_depth() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    entered boolean := TG_OP <> 'DELETE' AND NEW.state IN ('queued', 'claimed');
    was boolean := TG_OP <> 'INSERT' AND OLD.state IN ('queued', 'claimed');
BEGIN
    IF entered AND NOT was THEN
        INSERT INTO queue_depth (shard, pending)
        VALUES (pg_backend_pid() % 64, 1)
        ON CONFLICT (shard) DO UPDATE SET pending = queue_depth.pending + 1;
        UPDATE pending_slots SET entered = pending_slots.entered + 1 WHERE slot = 0;
    ELSIF was AND NOT entered THEN
        INSERT INTO queue_depth (shard, pending, released)
        VALUES (pg_backend_pid() % 64, -1, 1)
        ON CONFLICT (shard) DO UPDATE
        SET pending = queue_depth.pending - 1, released = queue_depth.released + 1;
    END IF;
    RETURN NULL;
END
$$
"""
# 0010's function, restored by the downgrade.
_POSTGRES_FUNCTION_0010 = """
CREATE OR REPLACE FUNCTION note_queue_depth() RETURNS trigger LANGUAGE plpgsql
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

_ENTER = """
    INSERT INTO queue_depth (shard, pending) VALUES (0, 1)
    ON CONFLICT (shard) DO UPDATE SET pending = pending + excluded.pending;
    UPDATE pending_slots SET entered = entered + 1 WHERE slot = 0;
"""
_LEAVE = """
    INSERT INTO queue_depth (shard, pending, released) VALUES (0, -1, 1)
    ON CONFLICT (shard) DO UPDATE
    SET pending = pending + excluded.pending, released = released + excluded.released;
"""
_ENTER_0010 = """
    INSERT INTO queue_depth (shard, pending) VALUES (0, 1)
    ON CONFLICT (shard) DO UPDATE SET pending = pending + excluded.pending;
"""
_LEAVE_0010 = """
    INSERT INTO queue_depth (shard, pending) VALUES (0, -1)
    ON CONFLICT (shard) DO UPDATE SET pending = pending + excluded.pending;
"""
# SQLite: 0010's four triggers (one event each), their bodies by direction.
_SQLITE_TRIGGERS = {
    "queue_depth_inserted": (
        "AFTER INSERT ON execution_requests WHEN NEW.state IN ('queued', 'claimed')",
        True,
    ),
    "queue_depth_deleted": (
        "AFTER DELETE ON execution_requests WHEN OLD.state IN ('queued', 'claimed')",
        False,
    ),
    "queue_depth_entered": (
        "AFTER UPDATE OF state ON execution_requests WHEN NEW.state IN ('queued', 'claimed') "
        "AND OLD.state NOT IN ('queued', 'claimed')",
        True,
    ),
    "queue_depth_left": (
        "AFTER UPDATE OF state ON execution_requests WHEN OLD.state IN ('queued', 'claimed') "
        "AND NEW.state NOT IN ('queued', 'claimed')",
        False,
    ),
}


def _sqlite_triggers(*, enter: str, leave: str) -> None:
    for name, (when, entering) in _SQLITE_TRIGGERS.items():
        op.execute(f"DROP TRIGGER {name}")
        op.execute(f"CREATE TRIGGER {name} {when}\nBEGIN{enter if entering else leave}END")


def upgrade() -> None:
    op.add_column(
        "queue_depth",
        sa.Column("released", sa.BigInteger, nullable=False, server_default="0"),
    )
    op.create_table(
        "pending_slots",
        sa.Column("slot", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("entered", sa.BigInteger, nullable=False),
    )
    postgresql = op.get_bind().dialect.name == "postgresql"
    if postgresql:
        # Writers wait here until the function and the count change together.
        op.execute("LOCK TABLE execution_requests IN SHARE ROW EXCLUSIVE MODE")
        op.execute(_POSTGRES_FUNCTION)
    else:
        _sqlite_triggers(enter=_ENTER, leave=_LEAVE)
    # Every pending request has entered and none released yet: entered - 0 = sum(pending).
    op.execute(
        "INSERT INTO pending_slots (slot, entered) "
        "SELECT 0, coalesce(sum(pending), 0) FROM queue_depth"
    )
    if postgresql:
        roles.grant_ledger_access(op.get_bind(), ledger_role())


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_POSTGRES_FUNCTION_0010)
    else:
        _sqlite_triggers(enter=_ENTER_0010, leave=_LEAVE_0010)
    op.drop_table("pending_slots")
    op.drop_column("queue_depth", "released")
