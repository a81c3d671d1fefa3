"""The statements that give the ledger's database role exactly services/ledger/table_access.py,
and the append-only guards (ADR 0036). Only migrations run them, as the schema's owner.

PostgreSQL: the ledger's role (created NOLOGIN when absent; a deployment gives it a login) gets
USAGE on the migrated schema and, per table, SELECT and the privileges the list names. A table
locked FOR UPDATE / FOR SHARE whose rows never change (``lock_column``) also gets a trigger that
refuses UPDATE and DELETE. SQLite: triggers refuse UPDATE and DELETE on every append-only table.
Every function here is idempotent and acts only on the tables that exist, so a later migration
that adds a table runs them again.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, inspect, text
from sqlalchemy.exc import DBAPIError

from services.ledger.database import INSUFFICIENT_PRIVILEGE, sqlstate
from services.ledger.table_access import APPEND_ONLY, LEDGER_ACCESS, MIGRATOR_TABLES

# Every migration that may create the role takes this transaction-scoped advisory lock first:
# roles are cluster-wide, so migrations of several schemas (or databases) on one server would
# otherwise race on CREATE ROLE. Two integers, a class of its own: the ledger's per-schema locks
# (repository/policy.py POLICY_GATE_CLASS, execution_requests.py EXPIRY_SWEEP_CLASS) use others.
ROLE_LOCK = (0x466F7267, 0x526F6C65)
_DUPLICATE_OBJECT, _UNIQUE_VIOLATION = "42710", "23505"

_POSTGRES_GUARD_FUNCTION = "refuse_append_only_change"
_POSTGRES_GUARD = f"""
CREATE OR REPLACE FUNCTION {_POSTGRES_GUARD_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END
$$
"""


def _quote(connection: Connection, name: str) -> str:
    return connection.dialect.identifier_preparer.quote_identifier(name)


def _existing(connection: Connection, tables: Iterable[str]) -> list[str]:
    present = set(inspect(connection).get_table_names())
    return [table for table in tables if table in present]


def take_role_lock(connection: Connection) -> None:
    """ROLE_LOCK, until the transaction ends (PostgreSQL)."""
    connection.execute(
        text("SELECT pg_advisory_xact_lock(:a, :b)"), {"a": ROLE_LOCK[0], "b": ROLE_LOCK[1]}
    )


def ensure_ledger_role(connection: Connection, role: str) -> None:
    """Create ``role`` NOLOGIN unless it exists (PostgreSQL). Safe when several migrations run
    at once: they take turns on ROLE_LOCK, and a role created by anything else meanwhile is
    taken as it is."""
    current = connection.execute(text("SELECT current_user")).scalar_one()
    if current == role:
        raise RuntimeError(
            f"the migrations run as {role!r}, the role they would restrict to the ledger's "
            "access: connect the migration job as the schema's owner (deploy/README.md)"
        )
    take_role_lock(connection)
    exists = connection.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role})
    if exists.first() is not None:
        return
    savepoint = connection.begin_nested()
    try:
        connection.execute(text(f"CREATE ROLE {_quote(connection, role)} NOLOGIN"))
    except DBAPIError as error:
        savepoint.rollback()
        if sqlstate(error) in {_DUPLICATE_OBJECT, _UNIQUE_VIOLATION}:
            return  # created meanwhile by something that does not take ROLE_LOCK
        if sqlstate(error) == INSUFFICIENT_PRIVILEGE:
            raise RuntimeError(
                f"the ledger's database role {role!r} does not exist and {current!r} may not "
                "create it: create it (deploy/README.md) or grant the migrating role CREATEROLE"
            ) from error
        raise
    savepoint.commit()


def grant_ledger_access(connection: Connection, role: str) -> None:
    """Give ``role`` (which must exist) USAGE on the current schema and exactly the listed
    privileges on each existing table, revoking any other it held (PostgreSQL)."""
    schema = connection.execute(text("SELECT current_schema()")).scalar_one()
    quoted_role = _quote(connection, role)
    usage = text("SELECT has_schema_privilege(:r, :s, 'USAGE')")
    if not connection.execute(usage, {"r": role, "s": schema}).scalar_one():
        connection.execute(
            text(f"GRANT USAGE ON SCHEMA {_quote(connection, schema)} TO {quoted_role}")
        )
    access = {**LEDGER_ACCESS, **MIGRATOR_TABLES}
    for table in _existing(connection, access):
        quoted = _quote(connection, table)
        connection.execute(text(f"REVOKE ALL ON TABLE {quoted} FROM {quoted_role}"))
        privileges = ", ".join(access[table].privileges())
        connection.execute(text(f"GRANT {privileges} ON TABLE {quoted} TO {quoted_role}"))


def revoke_ledger_access(connection: Connection, role: str) -> None:
    """Take back ``role``'s privileges on the tables of the current schema (a downgrade). The
    role stays, with USAGE on the schema: it is the server's, and other schemas or databases
    may grant to it."""
    if connection.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}).first():
        quoted_role = _quote(connection, role)
        for table in _existing(connection, {**LEDGER_ACCESS, **MIGRATOR_TABLES}):
            connection.execute(
                text(f"REVOKE ALL ON TABLE {_quote(connection, table)} FROM {quoted_role}")
            )


def _sqlite_guards(table: str) -> dict[str, str]:
    return {
        f"{table}_append_only_{event.lower()}": (
            f"CREATE TRIGGER IF NOT EXISTS {table}_append_only_{event.lower()} "
            f"BEFORE {event} ON {table} "
            f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
        )
        for event in ("UPDATE", "DELETE")
    }


def _postgres_guarded() -> list[str]:
    """The append-only tables the ledger's role may lock, which privileges alone cannot guard."""
    return [table for table in APPEND_ONLY if LEDGER_ACCESS[table].lock_column]


def create_append_only_guards(connection: Connection) -> None:
    """The triggers that refuse UPDATE and DELETE on the append-only tables that exist: every
    one on SQLite, the lockable ones on PostgreSQL (whose other tables the privileges guard)."""
    if connection.dialect.name == "sqlite":
        for table in _existing(connection, APPEND_ONLY):
            for statement in _sqlite_guards(table).values():
                connection.execute(text(statement))
        return
    connection.execute(text(_POSTGRES_GUARD))
    for table in _existing(connection, _postgres_guarded()):
        name, quoted = _quote(connection, f"{table}_append_only"), _quote(connection, table)
        connection.execute(text(f"DROP TRIGGER IF EXISTS {name} ON {quoted}"))
        connection.execute(
            text(
                f"CREATE TRIGGER {name} BEFORE UPDATE OR DELETE ON {quoted} "
                f"FOR EACH ROW EXECUTE FUNCTION {_POSTGRES_GUARD_FUNCTION}()"
            )
        )


def drop_append_only_guards(connection: Connection) -> None:
    """Remove what :func:`create_append_only_guards` made (a downgrade; in a test, an attacker
    with the owner's access or the database file)."""
    if connection.dialect.name == "sqlite":
        for table in _existing(connection, APPEND_ONLY):
            for name in _sqlite_guards(table):
                connection.execute(text(f"DROP TRIGGER IF EXISTS {name}"))
        return
    for table in _existing(connection, _postgres_guarded()):
        name, quoted = _quote(connection, f"{table}_append_only"), _quote(connection, table)
        connection.execute(text(f"DROP TRIGGER IF EXISTS {name} ON {quoted}"))
    connection.execute(text(f"DROP FUNCTION IF EXISTS {_POSTGRES_GUARD_FUNCTION}()"))
