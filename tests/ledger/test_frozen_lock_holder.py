"""A lock holder that stops talking (a frozen or partitioned replica) keeps the policy lock only
until PostgreSQL ends its session after the idle limit the ledger sets on its sessions; a
streamed snapshot, which waits for its reader inside a transaction that locks no row, gets a
longer limit for itself (ADR 0042). PostgreSQL only: SQLite has one process writing.
tests/scale freezes a real replica with SIGSTOP; these pin the settings that bound it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from services.demo.seed import load_fixture, seed_held_run
from services.ledger.database import make_engine
from services.ledger.repository.execution_requests import take_sweep_turn
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from services.ledger.transactions.base import lock_policy
from services.ledger.transactions.snapshot import SnapshotHeader
from shared.continuity.journal_chain import Verification
from shared.runtime.config import DatabaseSettings
from shared.runtime.errors import Unavailable
from tests.conftest import postgres_schema
from tests.ledger.conftest import LedgerClients
from tests.support import serve

#: Beyond the ledger's own limits: a loaded machine.
SLACK_SECONDS = 5.0


@pytest.fixture
def database_url() -> Iterator[str]:
    with postgres_schema() as url:
        yield url


def _engine(database_url: str, settings: DatabaseSettings | None = None) -> Engine:
    return make_engine(database_url, settings)


def test_a_lock_holder_that_stops_talking_loses_the_lock_within_the_idle_limit(
    database_url: str,
) -> None:
    """With the defaults the ledger runs with, another replica's policy lock is refused
    (UNAVAILABLE DATABASE_TIMEOUT, nothing written) only until the silent holder's session is
    ended: within two lock waits (the idle limit defaults to the lock timeout), not the
    server's own idle limit or the 60 s the ledger used to set."""
    settings = DatabaseSettings()
    bound = 2 * settings.lock_timeout_ms / 1000
    holder, other = _engine(database_url), _engine(database_url)
    silent = holder.connect()
    try:
        silent.begin()
        lock_policy(silent)  # ...and then nothing, as a process stopped by SIGSTOP
        started = time.monotonic()
        refusals = []
        while True:
            try:
                with other.begin() as connection:
                    lock_policy(connection)
                break
            except Unavailable as refused:
                refusals.append(refused.reason)
            assert time.monotonic() - started <= bound + SLACK_SECONDS, refusals
        waited = time.monotonic() - started
        assert waited <= bound + SLACK_SECONDS
        assert set(refusals) <= {"DATABASE_TIMEOUT"}
        with pytest.raises(Unavailable) as ended:  # the server ended the silent session
            silent.exec_driver_sql("SELECT 1")
        assert ended.value.reason == "DATABASE_UNAVAILABLE"
    finally:
        # Closes the session at once (also when an assertion failed with it still holding the
        # lock): the schema's teardown and every other ledger on the server would wait for it.
        silent.invalidate()
        holder.dispose()
        other.dispose()


def test_a_streamed_snapshot_waits_for_its_reader_past_the_short_idle_limit(
    database_url: str,
) -> None:
    """A reader that pauses between messages longer than the write transactions' idle limit
    still gets the whole snapshot, and the longer limit ends with the snapshot's transaction
    (one pooled session: the next transaction has the short one again)."""
    short = DatabaseSettings(
        pool_size=1, max_overflow=0, idle_in_transaction_timeout_ms=300, lock_timeout_ms=1000
    )
    engine = _engine(database_url, short)
    ledger = Ledger(engine)
    try:
        with serve("ledger", bindings(ledger)) as served:
            seed_held_run(LedgerClients(served).ledger(), load_fixture("v1_basic"), "run-1")
        parts = ledger.read_snapshot("run-1", caller="reader")
        assert isinstance(next(parts), SnapshotHeader)
        time.sleep(1.0)  # the reader is slow to take the next message
        rest = list(parts)
        assert isinstance(rest[-1], Verification) and rest[-1].valid
        with engine.begin() as connection:
            shown = connection.exec_driver_sql("SHOW idle_in_transaction_session_timeout")
            assert shown.scalar_one() == "300ms"
    finally:
        engine.dispose()


def test_a_lock_held_in_one_schema_does_not_stall_another_schemas_ledger(
    database_url: str,
) -> None:
    """The policy gate and the expiry sweep's lock are keyed by the schema: a ledger whose lock
    holder froze stalls its own schema only, never the other ledgers (tenants, test schemas)
    sharing the PostgreSQL server. With one server-wide key the other schema's policy lock waited
    for the holder until its lock timeout (UNAVAILABLE DATABASE_TIMEOUT)."""
    fast = DatabaseSettings(lock_timeout_ms=1000)
    with postgres_schema() as elsewhere:
        holder, other = _engine(database_url), _engine(elsewhere, fast)
        silent = holder.connect()
        try:
            silent.begin()
            lock_policy(silent)
            assert take_sweep_turn(silent)
            with other.begin() as connection:
                lock_policy(connection)
                assert take_sweep_turn(connection)
        finally:
            silent.invalidate()
            holder.dispose()
            other.dispose()
