"""Engine construction and migrations for the ledger's database (SQLite or PostgreSQL).

Only the migration command (``python -m services.ledger.migrate``, ``make db-upgrade``) and the
local runner (``make run``) upgrade the schema. The ledger itself only reads the revision and
serves while it is one this release serves (services/ledger/schema_revisions.py), so several
ledger replicas never race on a migration.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import ConnectionPoolEntry, QueuePool

from shared.runtime.config import DatabaseSettings
from shared.runtime.errors import DomainError, FailedPrecondition, Unavailable

MIGRATIONS = Path(__file__).parent / "migrations"
SQLITE_BEGIN_OPTION = "forge_sqlite_begin"
# Set on an engine whose timeouts are set in every transaction (server prepares off: a
# transaction-mode pooler is between), so that no statement runs outside a transaction there.
PER_TRANSACTION_SETTINGS_OPTION = "forge_per_transaction_settings"
# The statement a streamed read transaction runs first (ADR 0042): its idle limit, for itself.
STREAM_IDLE_OPTION = "forge_stream_idle_statement"

# Every PostgreSQL write transaction runs at READ COMMITTED, whatever the server's, role's or
# database's default_transaction_isolation says: lock_current_policy's re-read after waiting for
# the policy lock is only right when each statement sees what committed before it
# (docs/adr/0016-postgresql-isolation-retries-timeouts.md).
WRITE_ISOLATION = "READ COMMITTED"
# SQLSTATEs the ledger acts on. A serialization failure or a deadlock rolled the whole
# transaction back: running it again is safe (transactions.base.retry_on_unique_conflict).
SERIALIZATION_FAILURE = "40001"
DEADLOCK_DETECTED = "40P01"
RETRIED_SQLSTATES = frozenset({SERIALIZATION_FAILURE, DEADLOCK_DETECTED})
# The role may not do that (the ledger's own role: ADR 0036); also an append-only guard's refusal.
INSUFFICIENT_PRIVILEGE = "42501"
# lock_timeout and statement_timeout: the transaction was rolled back, nothing was written.
TIMEOUT_SQLSTATES = {"55P03": "lock_timeout", "57014": "statement_timeout"}
# Keepalive probes after FORGE_DB_KEEPALIVE_IDLE_SECONDS of silence: this many, this far apart,
# before the client gives the connection up (a dead peer is noticed within idle + 30 s).
KEEPALIVE_INTERVAL_SECONDS = 10
KEEPALIVE_COUNT = 3
# A connection attempt to a host that does not answer gives up after this many seconds, so a
# lost database shows as NOT_SERVING instead of a readiness check hanging on the connect.
CONNECT_TIMEOUT_SECONDS = 10


def sqlstate(error: BaseException) -> str:
    """The SQLSTATE of a database error (SQLAlchemy's wrapper or the driver's own), or ""."""
    original = getattr(error, "orig", None) or error
    return str(getattr(original, "sqlstate", "") or "")


def read_only_connection(engine: Engine) -> Connection:
    """A connection for reads only: on SQLite its transaction begins DEFERRED (a shared read
    snapshot under WAL) instead of IMMEDIATE, so it never blocks a writer. Writing on it is a
    programming error; write transactions use ``engine.begin()``."""
    return engine.connect().execution_options(**{SQLITE_BEGIN_OPTION: "DEFERRED"})


@contextmanager
def read_transaction(
    engine: Engine, *, snapshot: bool = False, streamed: bool = False
) -> Iterator[Connection]:
    """A read-only connection (``read_only_connection``; with ``snapshot``, one whose statements
    all see one snapshot, ``snapshot_connection``) inside a transaction that ends with
    COMMIT, also when the read ends in a refusal (a ``DomainError``), instead of the ROLLBACK a
    connection closed with its transaction open gets. For a transaction that wrote nothing the
    two are the same, but psycopg forgets every statement it prepared on the server when it sees
    a ROLLBACK (DEALLOCATE ALL, then five unprepared runs of each statement before it prepares it
    again), so a read ending in one cost PostgreSQL the plans of every statement the pooled
    connection runs next: 205 against 129 µs of PostgreSQL CPU for a two-statement read
    (docs/performance-history.md, round 4, eighth pass). The database's own trouble (UNAVAILABLE, a
    lost connection or a timeout) and any other error still roll back, as closing does.

    ``streamed``: the caller sends what it reads while the transaction is open, so it waits for
    its reader; on PostgreSQL the transaction first raises its own idle limit to
    ``idle_in_stream_timeout_ms`` (it locks no row, so the short limit that bounds a frozen lock
    holder need not apply to it; ADR 0042)."""
    opened = snapshot_connection(engine) if snapshot else read_only_connection(engine)
    with opened as connection:
        transaction = connection.begin()
        try:
            stream_idle = engine.get_execution_options().get(STREAM_IDLE_OPTION)
            if streamed and stream_idle:
                connection.exec_driver_sql(stream_idle)
            yield connection
        except Unavailable:
            raise
        except DomainError:
            transaction.commit()
            raise
        transaction.commit()


def _statements_run_alone(engine: Engine) -> bool:
    """Whether one statement may run outside a transaction, in autocommit: on PostgreSQL, unless
    the timeouts are set per transaction (a transaction-mode pooler is between), which a
    statement outside one would run without. SQLite's transactions are local: nothing to save."""
    per_transaction = engine.get_execution_options().get(PER_TRANSACTION_SETTINGS_OPTION)
    return engine.dialect.name == "postgresql" and not per_transaction


@contextmanager
def single_statement_read(engine: Engine) -> Iterator[Connection]:
    """A read-only connection for a read of one statement, which sees one snapshot on its own:
    on PostgreSQL without a transaction around it (autocommit: no BEGIN and no COMMIT, two round
    trips of the three, and nothing for psycopg to forget); on SQLite, and where the timeouts are
    set per transaction (behind a transaction-mode pooler), as ``read_transaction``.
    Running a second statement on it is a programming error: the two would see two snapshots."""
    if not _statements_run_alone(engine):
        with read_transaction(engine) as connection:
            yield connection
        return
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        yield connection
        # Ends SQLAlchemy's own bookkeeping as read_transaction does; in autocommit the driver
        # sends nothing for it.
        connection.commit()


@contextmanager
def single_statement_write(engine: Engine) -> Iterator[Connection]:
    """A connection for a write whose one statement is its own transaction: on PostgreSQL in
    autocommit, so the statement commits or fails whole without a BEGIN and a COMMIT around it
    (two round trips of the three, ADR 0065); on SQLite, and where the timeouts are set per
    transaction (behind a transaction-mode pooler), as ``engine.begin()``. The caller sends one
    write statement, or reads first only what that statement re-checks itself: nothing it sent
    can be rolled back. SQLAlchemy's commit and rollback events still run, after the statement
    (a signature joins the ledger's memory only on commit, as in a transaction)."""
    if not _statements_run_alone(engine):
        with engine.begin() as connection:
            yield connection
        return
    autocommit = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    with autocommit as connection, connection.begin():
        yield connection


def snapshot_connection(engine: Engine) -> Connection:
    """A read-only connection whose statements all see one snapshot: REPEATABLE READ on
    PostgreSQL (one snapshot for the whole transaction); on SQLite a DEFERRED transaction under
    WAL already reads one snapshot from its first statement."""
    connection = read_only_connection(engine)
    if engine.dialect.name == "postgresql":
        connection = connection.execution_options(isolation_level="REPEATABLE READ")
    return connection


class CountingQueuePool(QueuePool):
    """The default pool, counting the callers waiting for a connection (``waiting``): the
    metrics' "pool waiting" gauge (services.ledger.observability). A caller counts from the
    start of its checkout until it holds a connection, so a brief 1 is normal; a steady count
    means the pool and its overflow are exhausted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waiting_lock = threading.Lock()
        self.waiting = 0

    def _do_get(self) -> ConnectionPoolEntry:
        with self._waiting_lock:
            self.waiting += 1
        try:
            return super()._do_get()
        finally:
            with self._waiting_lock:
                self.waiting -= 1


def make_engine(url: str, settings: DatabaseSettings | None = None, **options: Any) -> Engine:
    """An engine for ``url``. SQLite gets WAL, a busy timeout, foreign keys, and BEGIN IMMEDIATE
    transactions so concurrent writers queue instead of failing on lock upgrades. PostgreSQL
    gets READ COMMITTED on every transaction, the pool, keepalives, server-side prepares and the
    timeouts of ``settings`` (the defaults when None): set on each server session when it opens,
    or, with server prepares off (a transaction-mode pooler is between), in every transaction."""
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
    settings = settings or DatabaseSettings()
    # A caller may ask for another level (tests do, to prove the retries); the ledger's start-up
    # check refuses to serve unless writes really run at WRITE_ISOLATION.
    options.setdefault("isolation_level", WRITE_ISOLATION)
    options.setdefault("pool_size", settings.pool_size)
    options.setdefault("max_overflow", settings.max_overflow)
    options.setdefault("poolclass", CountingQueuePool)
    connect_args = {**_postgres_connect_args(settings), **options.pop("connect_args", {})}
    engine = create_engine(url, connect_args=connect_args, **options)
    event.listen(engine, "checkout", _refuse_a_closed_socket)
    per_transaction = not settings.server_prepares
    timeouts = _timeouts(settings, per_transaction=per_transaction)
    if settings.idle_in_stream_timeout_ms:
        # Validated integer, never caller text; SET LOCAL: it ends with the transaction.
        stream_idle = (
            "SELECT set_config('idle_in_transaction_session_timeout', "
            f"'{int(settings.idle_in_stream_timeout_ms)}', true)"
        )
        engine.update_execution_options(**{STREAM_IDLE_OPTION: stream_idle})
    if timeouts and per_transaction:
        engine.update_execution_options(**{PER_TRANSACTION_SETTINGS_OPTION: True})

        @event.listens_for(engine, "begin")
        def _limit(connection: Any) -> None:
            # Behind a transaction-mode pooler (server prepares off) consecutive transactions
            # may run on different server sessions: SET LOCAL semantics, one statement each.
            connection.exec_driver_sql(timeouts)

    elif timeouts:

        @event.listens_for(engine, "connect")
        def _limit_session(dbapi_connection: Any, _record: Any) -> None:
            # Connected directly, the server session is this connection's alone: the timeouts
            # are set once when it opens, not by one more round trip in every transaction
            # (docs/performance-history.md, round 4).
            autocommit = dbapi_connection.autocommit
            dbapi_connection.autocommit = True
            with dbapi_connection.cursor() as cursor:
                cursor.execute(timeouts)
            dbapi_connection.autocommit = autocommit

    return _unavailable_on_disconnect(engine)


def _postgres_connect_args(settings: DatabaseSettings) -> dict[str, Any]:
    """psycopg connection arguments: TCP keepalives (a peer that vanished without a FIN is
    noticed instead of hanging a thread forever) and, when server-side prepares are off,
    ``prepare_threshold=None`` (PgBouncer in transaction mode before 1.21 cannot follow a
    prepared statement from one server session to the next)."""
    arguments: dict[str, Any] = {"keepalives": 0, "connect_timeout": CONNECT_TIMEOUT_SECONDS}
    if settings.keepalive_idle_seconds:
        arguments = {
            "connect_timeout": CONNECT_TIMEOUT_SECONDS,
            "keepalives": 1,
            "keepalives_idle": settings.keepalive_idle_seconds,
            "keepalives_interval": KEEPALIVE_INTERVAL_SECONDS,
            "keepalives_count": KEEPALIVE_COUNT,
        }
    if not settings.server_prepares:
        arguments["prepare_threshold"] = None
    return arguments


def _timeouts(settings: DatabaseSettings, *, per_transaction: bool) -> str:
    """One statement setting each configured timeout, for the current transaction only
    (``per_transaction``: ``set_config(..., true)`` is ``SET LOCAL``) or for the session; "" when
    every timeout is 0, which leaves the server's own settings in force."""
    values = {
        "lock_timeout": settings.lock_timeout_ms,
        "statement_timeout": settings.statement_timeout_ms,
        "idle_in_transaction_session_timeout": settings.idle_in_transaction_timeout_ms,
    }
    # The values are validated integers, never caller text.
    local = "true" if per_transaction else "false"
    calls = [f"set_config('{name}', '{int(ms)}', {local})" for name, ms in values.items() if ms]
    return f"SELECT {', '.join(calls)}" if calls else ""


def _refuse_a_closed_socket(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """Replace a pooled connection whose server end has gone, without a round trip.

    An idle PostgreSQL connection has nothing to read: a readable socket means the server (or
    anything between) closed it or sent its termination notice. The pool discards a connection
    refused here and checks out (or opens) another, so the caller never sees the dead one. This
    is the pre-ping's guarantee for connections cut while idle, at the cost of one local ``poll``
    instead of a ``SELECT 1`` round trip on every checkout (docs/performance-history.md, round 3); a
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
        timeout = TIMEOUT_SQLSTATES.get(sqlstate(context.original_exception))
        if timeout is not None:
            # The server rolled the transaction back: nothing was written, and a retry after
            # the holder of the lock lets go succeeds. Not retried here: waiting again would
            # only stack more callers behind the same lock.
            raise Unavailable(
                "DATABASE_TIMEOUT",
                f"the ledger's database {timeout} expired (another transaction holds a lock "
                "this one needs, or the database is overloaded); nothing was written: retry "
                "with the same request id after a backoff",
                metadata={"timeout": timeout},
            ) from context.original_exception

    return engine


def require_write_isolation(engine: Engine) -> None:
    """FAILED_PRECONDITION ``DATABASE_ISOLATION_UNSUPPORTED`` unless a write transaction really
    runs at READ COMMITTED. The engine asks for it on every transaction; a server that answers
    with another level (an engine that only offers SERIALIZABLE, a proxy that rewrites BEGIN)
    would silently break the policy lock's re-read, so the ledger refuses to serve on it."""
    if engine.dialect.name != "postgresql":
        return  # SQLite serializes writers with BEGIN IMMEDIATE; there is no level to check
    with engine.begin() as connection:
        level = str(connection.exec_driver_sql("SHOW transaction_isolation").scalar_one())
    if level.lower() != WRITE_ISOLATION.lower():
        raise FailedPrecondition(
            "DATABASE_ISOLATION_UNSUPPORTED",
            f"write transactions run at {level.upper()}, the ledger requires {WRITE_ISOLATION}:"
            " serve from a PostgreSQL that honours BEGIN ISOLATION LEVEL READ COMMITTED",
            metadata={
                "isolation_level": level.lower(),
                "required_isolation_level": WRITE_ISOLATION.lower(),
            },
        )


def _alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade(engine: Engine) -> None:
    """Apply every pending migration (idempotent)."""
    _move(engine, command.upgrade, "head")


def downgrade(engine: Engine, revision: str) -> None:
    """Undo the migrations after ``revision`` (the migration tests check a backfill this way)."""
    _move(engine, command.downgrade, revision)


def _move(engine: Engine, step: Callable[[Config, str], None], revision: str) -> None:
    config = _alembic_config()
    with engine.connect() as connection:
        config.attributes["connection"] = connection
        step(config, revision)
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
