"""The ledger's clock on PostgreSQL (services/ledger/database_clock.py, ADR 0057), on a real server:
anchored on the database's clock_timestamp(), advanced by the monotonic clock without a statement,
sampled again on schedule, its error bound half the round trip, never going back."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import Engine, event, text

from services.ledger.database import make_engine
from services.ledger.database_clock import DatabaseClock, started_clock, take_sample
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from shared.continuity.timeutil import Clock, utc_now
from shared.runtime.errors import Unavailable
from tests.conftest import postgres_schema
from tests.ledger.admission_support import (
    claim_request,
    commit,
    commit_request,
    enable_policy,
    execution,
    seed,
)
from tests.ledger.conftest import LedgerClients, counted
from tests.support import serve, token_roles

POSTGRESQL = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


class Monotonic:
    """The process's monotonic clock plus ``shift`` seconds."""

    def __init__(self) -> None:
        self.shift = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.shift


def database_now(engine: Engine) -> datetime:
    with engine.connect() as connection:
        value: datetime = connection.execute(text("SELECT clock_timestamp()")).scalar_one()
    return value


@pytest.fixture
def statements(engine: Engine) -> Iterator[list[str]]:
    """Every statement the engine sends, from here on."""
    sent: list[str] = []

    def note(*args: Any) -> None:
        sent.append(args[2])

    event.listen(engine, "before_cursor_execute", note)
    yield sent
    event.remove(engine, "before_cursor_execute", note)


@POSTGRESQL
def test_the_clock_reads_the_databases_time_within_its_error_bound(engine: Engine) -> None:
    clock = DatabaseClock(engine)
    sample = clock.resample()
    before = database_now(engine)
    now = clock()
    after = database_now(engine)
    bound = timedelta(seconds=sample.error_bound + 0.005)  # + the monotonic drift, generously
    assert before - bound <= now <= after + bound
    assert sample.round_trip > 0 and sample.error_bound == sample.round_trip / 2


@POSTGRESQL
def test_between_samples_it_advances_by_the_monotonic_clock_without_a_statement(
    engine: Engine, statements: list[str]
) -> None:
    monotonic = Monotonic()
    clock = DatabaseClock(engine, monotonic=monotonic)
    clock.resample()
    statements.clear()
    first = clock()
    monotonic.shift += 90
    later = clock()
    assert abs((later - first).total_seconds() - 90) < 0.05
    assert statements == []


@POSTGRESQL
def test_the_error_bound_is_half_the_round_trip(engine: Engine) -> None:
    # Each reading of this monotonic clock is 4 ms after the one before, however long the
    # statement between the two takes.
    ticks = iter(range(100))
    sample = take_sample(engine, lambda: 0.004 * next(ticks))
    assert sample.round_trip == pytest.approx(0.004)
    assert sample.error_bound == pytest.approx(0.002)


@POSTGRESQL
def test_a_new_sample_corrects_a_monotonic_clock_that_fell_behind(engine: Engine) -> None:
    monotonic = Monotonic()
    clock = DatabaseClock(engine, monotonic=monotonic)
    clock.resample()
    monotonic.shift -= 100  # the anchor now extrapolates 100 s behind the database
    assert (database_now(engine) - clock()).total_seconds() > 99
    clock.resample()
    assert abs((database_now(engine) - clock()).total_seconds()) < 0.5


@POSTGRESQL
def test_the_time_never_goes_back_within_a_process(engine: Engine) -> None:
    monotonic = Monotonic()
    clock = DatabaseClock(engine, monotonic=monotonic)
    clock.resample()
    monotonic.shift += 100  # the anchor extrapolates 100 s ahead of the database
    ahead = clock()
    clock.resample()  # the new anchor is 100 s behind what was already answered
    assert clock() == ahead
    monotonic.shift += 101  # (the new sample's extrapolation passes it again)
    assert clock() > ahead


@POSTGRESQL
def test_the_thread_samples_again_on_schedule(engine: Engine) -> None:
    clock = DatabaseClock(engine, resample_seconds=0.05).start()
    try:
        first = clock.sample
        assert first is not None and clock.unread() is None
        deadline = time.monotonic() + 10
        while clock.sample is first and time.monotonic() < deadline:
            time.sleep(0.02)
        assert clock.sample is not first
    finally:
        clock.stop()


def test_before_the_first_sample_the_clock_is_unavailable() -> None:
    engine = make_engine("postgresql+psycopg://postgres@127.0.0.1:1/nothing_test")
    clock = DatabaseClock(engine).start()
    try:
        assert clock.sample is None
        assert clock.unread() == "a reading of the database's clock"
        with pytest.raises(Unavailable) as refused:
            clock()
        assert refused.value.reason == "DATABASE_UNAVAILABLE"
    finally:
        clock.stop()
        engine.dispose()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_sqlite_keeps_the_hosts_clock(engine: Engine) -> None:
    assert started_clock(engine) is None


@POSTGRESQL
def test_postgresql_runs_on_the_databases_clock(engine: Engine) -> None:
    clock = started_clock(engine)
    assert clock is not None
    try:
        assert clock.sample is not None
    finally:
        clock.stop()


@POSTGRESQL
def test_a_started_clock_exports_its_error_bound_and_the_hosts_offset(engine: Engine) -> None:
    clock = DatabaseClock(engine).start()
    try:
        sample = clock.sample
        assert sample is not None
        values = {
            name: REGISTRY.get_sample_value(f"forge_ledger_{name}")
            for name in (
                "clock_error_bound_seconds",
                "clock_sample_age_seconds",
                "host_clock_offset_seconds",
            )
        }
        assert values["clock_error_bound_seconds"] == sample.error_bound
        assert values["clock_sample_age_seconds"] is not None
        assert 0 <= values["clock_sample_age_seconds"] < 30
        # This host is the database's: its wall clock is the same within the round trip.
        assert values["host_clock_offset_seconds"] is not None
        assert abs(values["host_clock_offset_seconds"]) < 0.5
    finally:
        clock.stop()


def _statements_of_one_admission_and_claim(clock_of: Callable[[Engine], Clock]) -> list[str]:
    """Every statement a ledger on a fresh schema sends to seed, admit and claim one request."""
    with postgres_schema() as url:
        engine = make_engine(url)
        try:
            ledger = Ledger(engine, clock_of(engine), authority=token_roles)
            with serve("ledger", bindings(ledger)) as served:
                clients = LedgerClients(served)
                enable_policy(clients)
                seeded = seed(clients)
                with counted(engine) as statements:
                    ticket = commit(clients, commit_request(clients, seeded)).ticket
                    exr = ticket.execution_request.execution_request_id
                    execution(clients).ClaimExecutionRequest(claim_request(clients, exr))
                return statements
        finally:
            engine.dispose()


def test_the_databases_clock_adds_no_statement_to_a_transaction() -> None:
    def database_clock(engine: Engine) -> Clock:
        clock = DatabaseClock(engine)
        clock.resample()
        return clock

    on_the_host = _statements_of_one_admission_and_claim(lambda _engine: utc_now)
    on_the_database = _statements_of_one_admission_and_claim(database_clock)
    assert on_the_host and on_the_database == on_the_host
    assert not any("clock_timestamp" in statement for statement in on_the_database)
