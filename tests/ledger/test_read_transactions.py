"""A ledger read ends its transaction with COMMIT, also when it ends in a refusal: on PostgreSQL
a ROLLBACK makes psycopg forget every statement it prepared on the pooled connection, so the
statements the next transaction runs there would be parsed and planned again (docs/performance.md,
round 4, eighth pass). The database's own trouble and any other error still roll back."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, Engine, event, text

from services.ledger.database import make_engine
from services.ledger.repository import runs as run_rows
from services.ledger.schema_revisions import database_revision
from services.ledger.transactions import runs as run_transactions
from services.ledger.transactions import snapshot
from services.ledger.transactions.base import LedgerContext, run_not_found
from shared.runtime.config import DatabaseSettings
from shared.runtime.errors import NotFound, Unavailable
from tests.ledger.conftest import run_spec

# psycopg prepares a statement on the server at its sixth run on a connection (prepare_threshold).
PAST_THRESHOLD = 8


@pytest.fixture
def one_connection(database_url: str) -> Iterator[Engine]:
    """An engine whose pool holds one connection, so every transaction runs on the same one."""
    engine = make_engine(database_url, pool_size=1, max_overflow=0)
    yield engine
    engine.dispose()


@pytest.fixture
def endings(one_connection: Engine) -> Counter[str]:
    """How the engine's transactions ended, by "commit" and "rollback"."""
    seen: Counter[str] = Counter()
    event.listen(one_connection, "commit", lambda _connection: seen.update(["commit"]))
    event.listen(one_connection, "rollback", lambda _connection: seen.update(["rollback"]))
    return seen


def _missing_run(connection: Connection) -> None:
    if run_rows.get_run(connection, "no-such-run") is None:
        raise run_not_found("no-such-run")


def test_a_read_commits(one_connection: Engine, endings: Counter[str]) -> None:
    with LedgerContext(one_connection).read() as connection:
        assert run_rows.get_run(connection, "no-such-run") is None
    assert endings == Counter(commit=1)


def test_a_read_ending_in_a_refusal_commits_and_raises_the_refusal(
    one_connection: Engine, endings: Counter[str]
) -> None:
    with pytest.raises(NotFound) as refused, LedgerContext(one_connection).read() as connection:
        _missing_run(connection)
    assert refused.value.reason == "RUN_NOT_FOUND"
    assert endings == Counter(commit=1)


@pytest.mark.parametrize(
    "error", [RuntimeError("a bug"), Unavailable("DATABASE_TIMEOUT", "the database's own trouble")]
)
def test_any_other_error_rolls_the_read_back(
    one_connection: Engine, endings: Counter[str], error: Exception
) -> None:
    with pytest.raises(type(error)), LedgerContext(one_connection).read() as connection:
        run_rows.get_run(connection, "no-such-run")
        raise error
    assert endings == Counter(rollback=1)


def test_a_snapshot_read_ending_in_a_refusal_commits(
    one_connection: Engine, endings: Counter[str]
) -> None:
    with pytest.raises(NotFound):
        list(snapshot.read(LedgerContext(one_connection), "no-such-run"))
    assert endings == Counter(commit=1)


def test_a_snapshot_stream_closed_midway_rolls_back(
    one_connection: Engine, endings: Counter[str]
) -> None:
    """A reader that goes away mid-stream ends the read with a rollback, as before: the read is
    not complete."""
    context = LedgerContext(one_connection)
    run_transactions.create(context, run_spec(), "writer")  # the one commit counted below
    parts = snapshot.read(context, "run-1")
    assert isinstance(next(parts), snapshot.SnapshotHeader)
    parts.close()
    assert endings == Counter(commit=1, rollback=1)


def test_a_snapshot_read_of_the_known_head_commits(
    one_connection: Engine, endings: Counter[str]
) -> None:
    """The read that stops after the header, its known head being the head (ADR 0030), ends
    with COMMIT as a whole read does (on PostgreSQL it runs in autocommit, so nothing is sent
    for it: test_a_known_head_read_runs_outside_a_transaction)."""
    context = LedgerContext(one_connection)
    run_transactions.create(context, run_spec(), "writer")  # the first commit counted below
    head = snapshot.read_whole(context, "run-1").header.head  # the second
    unchanged = snapshot.read_whole(context, "run-1", known_head=head)
    assert unchanged.verification is None and unchanged.entries == []
    assert endings == Counter(commit=3)


def test_a_known_head_read_runs_outside_a_transaction(one_connection: Engine) -> None:
    """On PostgreSQL the known head's read is one statement, which sees one snapshot on its own:
    no BEGIN and no COMMIT are sent around it (two round trips of three); the whole read still
    runs in its REPEATABLE READ transaction."""
    if one_connection.dialect.name != "postgresql":
        pytest.skip("SQLite reads in a local transaction, without round trips")
    context = LedgerContext(one_connection)
    run_transactions.create(context, run_spec(), "writer")
    statuses: list[str] = []

    def note(connection: Connection, *_: object) -> None:
        info = connection.connection.dbapi_connection.info  # type: ignore[union-attr]
        statuses.append(info.transaction_status.name)

    event.listen(one_connection, "after_cursor_execute", note)
    head = snapshot.read_whole(context, "run-1").header.head
    whole = list(statuses)
    statuses.clear()
    snapshot.read_whole(context, "run-1", known_head=head)
    assert set(whole) == {"INTRANS"}
    assert statuses == ["IDLE"]


def test_behind_a_transaction_mode_pooler_the_known_head_read_keeps_its_transaction(
    database_url: str,
) -> None:
    """Where the timeouts are set in every transaction (server prepares off: a transaction-mode
    pooler is between), a statement outside a transaction would run without them (SET LOCAL
    there does nothing): there the known head's read runs in a transaction like any other read,
    its timeouts set first."""
    if not database_url.startswith("postgresql"):
        pytest.skip("the per-transaction timeouts are PostgreSQL's")
    engine = make_engine(database_url, DatabaseSettings(server_prepares=False), pool_size=1)
    seen: list[tuple[str, str]] = []

    def note(connection: Connection, _cursor: object, statement: str, *_: object) -> None:
        info = connection.connection.dbapi_connection.info  # type: ignore[union-attr]
        seen.append((statement, info.transaction_status.name))

    try:
        context = LedgerContext(engine)
        run_transactions.create(context, run_spec(), "writer")
        head = snapshot.read_whole(context, "run-1").header.head
        event.listen(engine, "after_cursor_execute", note)
        snapshot.read_whole(context, "run-1", known_head=head)
    finally:
        engine.dispose()
    assert len(seen) == 2
    assert "set_config('statement_timeout'" in seen[0][0]
    assert [status for _, status in seen] == ["INTRANS", "INTRANS"]


def _prepared(engine: Engine) -> list[str]:
    """The statements prepared on the server session of the pool's one connection (read in a
    transaction that commits, so the reading forgets nothing)."""
    with engine.begin() as connection:
        rows = connection.execute(text("SELECT statement FROM pg_prepared_statements"))
        return [str(row.statement) for row in rows]


def test_reads_keep_the_connections_prepared_statements(one_connection: Engine) -> None:
    """Past psycopg's threshold a read's statement is prepared, and stays prepared through more
    reads, reads ending in a refusal, and the readiness check's reads."""
    if one_connection.dialect.name != "postgresql":
        pytest.skip("server-side prepared statements are PostgreSQL's")
    context = LedgerContext(one_connection)
    for _ in range(PAST_THRESHOLD):
        with context.read() as connection:
            run_rows.get_run(connection, "no-such-run")
    [statement] = [s for s in _prepared(one_connection) if "FROM runs" in s]
    for _ in range(PAST_THRESHOLD):
        with pytest.raises(NotFound), context.read() as connection:
            _missing_run(connection)
        assert database_revision(one_connection) is not None
    assert statement in _prepared(one_connection)
