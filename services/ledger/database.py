"""Engine construction and migrations for the ledger's database (SQLite or PostgreSQL).

Only the migration command (``python -m services.ledger.migrate``, ``make db-upgrade``) and the
local runner (``make run``) upgrade the schema. The ledger itself only checks the revision at
start-up and refuses a stale one, so several ledger replicas never race on a migration.
"""

from __future__ import annotations

import select
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import DisconnectionError

from shared.runtime.errors import FailedPrecondition, Unavailable

MIGRATIONS = Path(__file__).parent / "migrations"
SQLITE_BEGIN_OPTION = "forge_sqlite_begin"


def read_only_connection(engine: Engine) -> Connection:
    """A connection for reads only: on SQLite its transaction begins DEFERRED (a shared read
    snapshot under WAL) instead of IMMEDIATE, so it never blocks a writer. Writing on it is a
    programming error; write transactions use ``engine.begin()``."""
    return engine.connect().execution_options(**{SQLITE_BEGIN_OPTION: "DEFERRED"})


def snapshot_connection(engine: Engine) -> Connection:
    """A read-only connection whose statements all see one snapshot: REPEATABLE READ on
    PostgreSQL (one snapshot for the whole transaction); on SQLite a DEFERRED transaction under
    WAL already reads one snapshot from its first statement."""
    connection = read_only_connection(engine)
    if engine.dialect.name == "postgresql":
        connection = connection.execution_options(isolation_level="REPEATABLE READ")
    return connection


def make_engine(url: str, **options: Any) -> Engine:
    """An engine for ``url``. SQLite gets WAL, a busy timeout, foreign keys, and BEGIN IMMEDIATE
    transactions so concurrent writers queue instead of failing on lock upgrades."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 60}, **options
        )

        @event.listens_for(engine, "connect")
        def _configure(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # let SQLAlchemy's BEGIN below take over
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=60000")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(connection: Any) -> None:
            # Writers take the write lock up front (no lock upgrade to fail on); a connection
            # opened for reading only (``read_only_connection``) begins deferred, so reads and
            # journal followers never hold the write lock.
            mode = connection.get_execution_options().get(SQLITE_BEGIN_OPTION, "IMMEDIATE")
            connection.exec_driver_sql(f"BEGIN {mode}")

        return _unavailable_on_disconnect(engine)
    options.setdefault("pool_size", 10)
    options.setdefault("max_overflow", 40)
    engine = create_engine(url, **options)
    event.listen(engine, "checkout", _refuse_a_closed_socket)
    return _unavailable_on_disconnect(engine)


def _refuse_a_closed_socket(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """Replace a pooled connection whose server end has gone, without a round trip.

    An idle PostgreSQL connection has nothing to read: a readable socket means the server (or
    anything between) closed it or sent its termination notice. The pool discards a connection
    refused here and checks out (or opens) another, so the caller never sees the dead one. This
    is the pre-ping's guarantee for connections cut while idle, at the cost of one local ``poll``
    instead of a ``SELECT 1`` round trip on every checkout (docs/performance.md, round 3); a
    connection cut while a statement runs still fails that statement with ``UNAVAILABLE``."""
    if dbapi_connection.closed or dbapi_connection.broken:
        raise DisconnectionError("the pooled connection is closed")
    poller = select.poll()
    poller.register(dbapi_connection.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
    if poller.poll(0):
        raise DisconnectionError("the server closed the pooled connection while it was idle")


def _unavailable_on_disconnect(engine: Engine) -> Engine:
    """A lost database connection becomes UNAVAILABLE DATABASE_UNAVAILABLE (safe to retry by
    the same ID) instead of INTERNAL: the connection is gone, no invariant broke. SQLAlchemy
    still invalidates the connection before this error propagates."""

    @event.listens_for(engine, "handle_error")
    def _translate(context: ExceptionContext) -> None:
        # A failed pre-ping (engines built with pool_pre_ping) is not an error: the pool
        # silently replaces that connection.
        if context.is_disconnect and not context.is_pre_ping:
            raise Unavailable(
                "DATABASE_UNAVAILABLE",
                "the ledger lost its database connection; retry with the same request id or "
                "read back to learn whether the write committed",
            ) from context.original_exception

    return engine


def _alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade(engine: Engine) -> None:
    """Apply every pending migration (idempotent)."""
    config = _alembic_config()
    with engine.connect() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        connection.commit()


def migrate(url: str) -> None:
    """Apply every pending migration to the database at ``url`` (idempotent)."""
    engine = make_engine(url)
    try:
        upgrade(engine)
    finally:
        engine.dispose()


def required_revision() -> str:
    """The schema revision this release's code is written against (the migrations' head)."""
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    if head is None:  # pragma: no cover - the release always ships migrations
        raise RuntimeError(f"no migrations under {MIGRATIONS}")
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database's schema is at; None when it was never migrated."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def require_current_schema(engine: Engine) -> None:
    """FAILED_PRECONDITION ``SCHEMA_REVISION_STALE`` unless the schema is at the required
    revision. The ledger never upgrades by itself: that is the migration command's job."""
    current, required = current_revision(engine), required_revision()
    if current != required:
        raise FailedPrecondition(
            "SCHEMA_REVISION_STALE",
            f"database schema is at revision {current or 'none (never migrated)'}, this release"
            f" requires {required}: run `python -m services.ledger.migrate` (make db-upgrade)",
            metadata={"current_revision": current or "", "required_revision": required},
        )
