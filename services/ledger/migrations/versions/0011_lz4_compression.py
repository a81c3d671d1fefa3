"""Stored bytes and journal payloads compressed with LZ4 on PostgreSQL.

PostgreSQL compresses a value of more than about 2 KB before it stores it, with its own pglz by
default. Checkpoints, raw model responses and large journal payloads all pass that size, and
pglz costs about 80 µs of PostgreSQL CPU on a 9 KB checkpoint: a third of that insert's cost,
once per blob an admission or a worker's turn stores. LZ4 compresses the same bytes at a
fraction of that and reads back no slower (docs/performance-history.md, round 4, fifteenth pass).

``SET COMPRESSION`` is a catalog change: no table rewrite, and each table's exclusive lock lasts
only for that change. Values stored before keep pglz and read as before; values stored after
use LZ4. A server built without LZ4, or older than PostgreSQL 14, keeps pglz (the migration
notes it and goes on). SQLite stores values as they are: nothing to do. Purely additive for the
code: no release reads or writes differently.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# (table, column) whose stored values pass PostgreSQL's compression threshold.
_COLUMNS = (("blobs", "content"), ("journal_entries", "payload_json"))


def _set_compression(method: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column in _COLUMNS:
        # EXECUTE inside the block: a server built without LZ4 refuses the statement as
        # feature_not_supported, and one older than PostgreSQL 14 (no per-column compression)
        # as a syntax error; either leaves pglz in place instead of failing the migration.
        op.execute(
            f"""
DO $$
BEGIN
    EXECUTE 'ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method}';
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    RAISE NOTICE '{table}.{column} keeps the default compression: %', SQLERRM;
END
$$
"""
        )


def upgrade() -> None:
    _set_compression("lz4")


def downgrade() -> None:
    _set_compression("default")
