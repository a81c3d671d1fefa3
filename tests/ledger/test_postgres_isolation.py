"""What several ledger replicas on one PostgreSQL rely on: writes at READ COMMITTED whatever the
role or database default says, serialization failures run again, and a held lock answered with
a retryable refusal instead of a stalled thread (docs/adr/0016-postgresql-isolation-retries-
timeouts.md). PostgreSQL only: SQLite serializes its writers with BEGIN IMMEDIATE.

Every schema here is reached with ``default_transaction_isolation = 'repeatable read'`` as its
connection default, the setting under which the policy lock's re-read would silently go wrong.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import grpc
import pytest
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.exc import DBAPIError

from forge.continuity.v1 import ledger_pb2
from services.ledger.database import (
    make_engine,
    require_write_isolation,
    snapshot_connection,
    sqlstate,
)
from services.ledger.repository import policy as policy_rows
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from services.ledger.transactions.base import TRANSACTION_RETRIES
from shared.runtime.config import DatabaseSettings
from shared.runtime.errors import FailedPrecondition, from_rpc_error
from tests.conftest import postgres_schema
from tests.errors import expect_error
from tests.ledger.admission_support import commit, commit_request, enable_policy, seed
from tests.ledger.conftest import Clock, LedgerClients, in_threads, waiting_for_locks
from tests.support import row_counts, serve

REPEATABLE_READ_DEFAULT = {"default_transaction_isolation": "repeatable read"}
# How long the test waits for the racing transactions to queue behind the held lock.
QUEUE_DEADLINE_SECONDS = 60.0
# The served ledger waits for locks as long as it takes, so the tests decide when they end.
NO_TIMEOUTS = DatabaseSettings(lock_timeout_ms=0, statement_timeout_ms=0)


@pytest.fixture
def database_url(application_name: str) -> Iterator[str]:
    with postgres_schema(REPEATABLE_READ_DEFAULT, application_name) as url:
        yield url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url, NO_TIMEOUTS)
    yield engine
    engine.dispose()


def _race_behind_the_policy_lock(
    holder: Engine, application_name: str, calls: list[Callable[[], str]]
) -> list[str]:
    """Hold the policy row lock, start ``calls`` in threads, wait until every one of them is
    queued behind the lock, release it and return their outcomes."""
    with holder.connect() as connection, connection.begin():
        policy_rows.lock_current_policy(connection)
        threads, outcomes = in_threads(calls)
        deadline = time.monotonic() + QUEUE_DEADLINE_SECONDS
        while waiting_for_locks(holder, application_name) < len(calls):
            assert time.monotonic() < deadline, "the calls never queued behind the policy lock"
            time.sleep(0.02)
    for thread in threads:
        thread.join()
    return sorted(outcomes)


def _admission(clients: LedgerClients, request: ledger_pb2.CommitAdmissionRequest) -> str:
    try:
        commit(clients, request)
        return "ok"
    except grpc.RpcError as error:
        return f"{error.code().name} {from_rpc_error(error).reason}"


def _requests(
    clients: LedgerClients, runs: int, cap: int
) -> list[ledger_pb2.CommitAdmissionRequest]:
    """One admission request for each of ``runs`` held runs, under a pending cap of ``cap``."""
    seeded = [seed(clients, f"run-{index}") for index in range(runs)]
    enable_policy(clients, pending_ticket_limit=cap)
    return [commit_request(clients, s, request_id=f"req-{s.run_id}") for s in seeded]


def _admissions(clients: LedgerClients, runs: int, cap: int) -> list[Callable[[], str]]:
    return [
        lambda request=request: _admission(clients, request)
        for request in _requests(clients, runs, cap)
    ]


# --- the level is set and checked -----------------------------------------------------------


def test_writes_run_at_read_committed_whatever_the_connection_default(engine: Engine) -> None:
    with engine.begin() as connection:
        assert connection.exec_driver_sql("SHOW default_transaction_isolation").scalar_one() == (
            "repeatable read"
        )
        assert connection.exec_driver_sql("SHOW transaction_isolation").scalar_one() == (
            "read committed"
        )
    # Snapshot reads still ask for one snapshot, and the next write is back at READ COMMITTED.
    with snapshot_connection(engine) as connection, connection.begin():
        level = connection.exec_driver_sql("SHOW transaction_isolation").scalar_one()
        assert level == "repeatable read"
    require_write_isolation(engine)


@pytest.mark.parametrize("level", ["REPEATABLE READ", "SERIALIZABLE"])
def test_a_database_that_runs_writes_at_another_level_is_refused(
    database_url: str, level: str
) -> None:
    """As a server that only offers one level (or a proxy that rewrites BEGIN) would."""
    engine = make_engine(database_url, isolation_level=level)
    try:
        with pytest.raises(FailedPrecondition) as refused:
            require_write_isolation(engine)
    finally:
        engine.dispose()
    assert refused.value.reason == "DATABASE_ISOLATION_UNSUPPORTED"
    assert refused.value.metadata == {
        "isolation_level": level.lower(),
        "required_isolation_level": "read committed",
    }


# --- caps and retries under contention -------------------------------------------------------


def test_the_pending_cap_holds_for_admissions_queued_behind_the_policy_lock(
    clients: LedgerClients, engine: Engine, holder: Engine, application_name: str
) -> None:
    """Under the connection's REPEATABLE READ default each queued admission would count the
    pending tickets in a snapshot taken before the others committed, and all would pass."""
    calls = _admissions(clients, runs=6, cap=2)
    outcomes = _race_behind_the_policy_lock(holder, application_name, calls)
    assert outcomes == ["RESOURCE_EXHAUSTED PENDING_TICKET_LIMIT"] * 4 + ["ok"] * 2
    assert row_counts(engine)["admission_tickets"] == 2


def test_serialization_failures_are_run_again_and_the_cap_still_holds(
    database_url: str, holder: Engine, application_name: str, clock: Clock
) -> None:
    """At SERIALIZABLE (a server could force it) the admission that waited for the policy lock
    conflicts with the one that committed first and fails with SQLSTATE 40001; the ledger runs
    it again, and the second run is judged against the committed ticket."""
    engine = make_engine(database_url, NO_TIMEOUTS, isolation_level="SERIALIZABLE")
    try:
        with serve("ledger", bindings(Ledger(engine, clock))) as served:
            clients = LedgerClients(served)
            calls = _admissions(clients, runs=2, cap=1)
            before = TRANSACTION_RETRIES.snapshot().get("40001", 0)
            outcomes = _race_behind_the_policy_lock(holder, application_name, calls)
            retried = TRANSACTION_RETRIES.snapshot().get("40001", 0) - before
        assert outcomes == ["RESOURCE_EXHAUSTED PENDING_TICKET_LIMIT", "ok"]
        assert retried >= 1
        assert row_counts(engine)["admission_tickets"] == 1
    finally:
        engine.dispose()


# --- the fenced writes' shared policy lock (ADR 0014) -------------------------------------------


def _lock_within(connection: Connection, milliseconds: int, *, shared: bool) -> None:
    connection.execute(text(f"SET LOCAL lock_timeout = '{milliseconds}ms'"))
    policy_rows.lock_current_policy(connection, shared=shared)


def test_fenced_writes_share_the_policy_lock_and_a_policy_write_is_not_overtaken(
    database_url: str, holder: Engine, application_name: str
) -> None:
    """Two fenced writes hold the policy row at once; a policy write waits for them; and a fenced
    write arriving while it waits queues behind it instead of joining the holders (a row share
    lock alone would let a stream of them keep the policy write waiting)."""
    exclusive = create_engine(database_url, connect_args={"application_name": application_name})
    locked: list[bool] = []

    def policy_write() -> None:
        with exclusive.connect() as connection, connection.begin():
            policy_rows.lock_current_policy(connection)
            locked.append(True)

    writer = threading.Thread(target=policy_write)
    try:
        with holder.connect() as first, first.begin():
            _lock_within(first, 200, shared=True)
            with holder.connect() as second, second.begin():
                _lock_within(second, 200, shared=True)  # does not wait for the first
            writer.start()
            deadline = time.monotonic() + QUEUE_DEADLINE_SECONDS
            while waiting_for_locks(holder, application_name) < 1:
                assert time.monotonic() < deadline, "the policy write never queued"
                time.sleep(0.02)
            with holder.connect() as late, late.begin(), pytest.raises(DBAPIError) as waited:
                _lock_within(late, 200, shared=True)
            assert sqlstate(waited.value) == "55P03"
            assert not locked
        writer.join()
        assert locked == [True]
    finally:
        exclusive.dispose()


def _policy_row_lockers(engine: Engine) -> list[str]:
    """Each policy revision's ``xmax``: 0 for a row no transaction ever locked or deleted (a
    lock leaves its locker's id, or a MultiXact's when several shared it, and a WAL record)."""
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT xmax::text FROM policy_revisions ORDER BY revision")
        ).scalars()
        return list(rows)


def test_the_policy_lock_locks_no_policy_row(clients: LedgerClients, engine: Engine) -> None:
    """ADR 0067: the policy lock is the schema's advisory gate alone. A policy write, an
    admission and fenced writes' shared locks leave every revision's row as it was inserted:
    each held lock on the one row every writer reads cost a WAL record on its page, and two
    holders at once a MultiXact."""
    assert _policy_row_lockers(engine) == ["0"]
    [request] = _requests(clients, runs=1, cap=5)  # a policy write, then an admission
    assert commit(clients, request).created
    with engine.connect() as first, first.begin():
        policy_rows.lock_current_policy(first, shared=True)
        with engine.connect() as second, second.begin():
            policy_rows.lock_policy_row(second, shared=True)  # a fenced write's first statement
    with engine.connect() as connection, connection.begin():
        policy_rows.lock_current_policy(connection)  # a recovery's or reconciliation's
    assert _policy_row_lockers(engine) == ["0", "0"]


# --- timeouts ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("timeout", "settings"),
    [
        ("lock_timeout", DatabaseSettings(lock_timeout_ms=200)),
        ("statement_timeout", DatabaseSettings(lock_timeout_ms=0, statement_timeout_ms=200)),
    ],
)
def test_a_held_policy_lock_is_a_retryable_refusal_not_a_stall(
    clients: LedgerClients,
    database_url: str,
    holder: Engine,
    clock: Clock,
    timeout: str,
    settings: DatabaseSettings,
) -> None:
    """A replica frozen while holding the policy row lock must not stall every other replica:
    the waiting admission is refused UNAVAILABLE DATABASE_TIMEOUT, writes nothing, and the same
    request succeeds once the lock is released."""
    [request] = _requests(clients, runs=1, cap=5)
    timed = make_engine(database_url, settings)
    try:
        with serve("ledger", bindings(Ledger(timed, clock))) as served:
            stub = LedgerClients(served).ledger("service-token")
            counts = row_counts(timed)
            with holder.connect() as connection, connection.begin():
                policy_rows.lock_current_policy(connection)
                refused = expect_error(
                    grpc.StatusCode.UNAVAILABLE,
                    "DATABASE_TIMEOUT",
                    lambda: stub.CommitAdmission(request),
                )
            assert refused.metadata == {"timeout": timeout}
            assert row_counts(timed) == counts
            assert stub.CommitAdmission(request).created
    finally:
        timed.dispose()
    # The same request again, through another ledger on the same schema: an identical repeat.
    assert not commit(clients, request).created


def test_timeouts_are_set_per_transaction_and_never_on_the_session(database_url: str) -> None:
    """SET LOCAL semantics: behind PgBouncer in transaction mode the next transaction may run on
    another client's server session, which must not inherit this one's settings."""
    settings = DatabaseSettings(
        pool_size=1,
        max_overflow=0,
        lock_timeout_ms=1234,
        statement_timeout_ms=0,
        idle_in_transaction_timeout_ms=4321,
        server_prepares=False,
    )
    engine = make_engine(database_url, settings)
    try:
        with engine.begin() as connection:
            shown = [
                connection.exec_driver_sql(f"SHOW {name}").scalar_one()
                for name in (
                    "lock_timeout",
                    "statement_timeout",
                    "idle_in_transaction_session_timeout",
                )
            ]
        assert shown == ["1234ms", "0", "4321ms"]
        raw = engine.raw_connection()  # the same pooled session, outside any ledger transaction
        try:
            driver = raw.driver_connection
            assert driver is not None
            cursor = driver.cursor()
            cursor.execute("SHOW lock_timeout")
            assert cursor.fetchone() == ("0",)
            assert driver.prepare_threshold is None
            assert driver.info.get_parameters()["keepalives_idle"] == "30"
        finally:
            raw.close()
    finally:
        engine.dispose()


def test_directly_connected_sessions_carry_the_timeouts_and_transactions_send_none(
    database_url: str,
) -> None:
    """With server prepares on (no transaction-mode pooler between), each server session is the
    ledger's own: the timeouts are set once when it opens, and a transaction sends only its own
    statements (one round trip fewer per transaction)."""
    settings = DatabaseSettings(
        pool_size=1, max_overflow=0, lock_timeout_ms=1234, idle_in_transaction_timeout_ms=4321
    )
    engine = make_engine(database_url, settings)
    sent: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: sent.append(args[2]))
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql("SELECT 1")
        assert sent == ["SELECT 1"]
        raw = engine.raw_connection()  # the same pooled session, outside any ledger transaction
        try:
            driver = raw.driver_connection
            assert driver is not None
            cursor = driver.cursor()
            shown = []
            for name in (
                "lock_timeout",
                "statement_timeout",
                "idle_in_transaction_session_timeout",
            ):
                cursor.execute(f"SHOW {name}")
                shown.append(cursor.fetchone())
            assert shown == [("1234ms",), ("30s",), ("4321ms",)]
        finally:
            raw.close()
    finally:
        engine.dispose()
