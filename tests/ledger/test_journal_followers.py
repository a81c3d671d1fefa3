"""Journal followers are bounded so they can never occupy the server threads that admissions,
claims and commands need; and a journal read does not block writers."""

from __future__ import annotations

import contextvars
import inspect
import json
import sqlite3
import time
from collections.abc import Iterator

import grpc
import pytest
from sqlalchemy import Engine, make_url

from forge.continuity.v1 import common_pb2, ledger_pb2, ledger_pb2_grpc
from services.ledger.repository import journal_reads
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from services.ledger.transactions.base import LedgerContext
from shared.runtime.limits import (
    DEFAULT_MAX_JOURNAL_FOLLOWERS,
    DEFAULT_SERVER_THREADS,
    StreamBounds,
    journal_follower_limit,
    server_threads,
)
from shared.runtime.server import start_server
from tests.errors import expect_error
from tests.ledger.conftest import LedgerClients, run_request
from tests.support import serve, token_roles

LIMIT = 3
# These tests follow under one token; the bound per caller has its own tests (test_stream_bounds).
ONE_CALLER_MAY_TAKE_ALL = StreamBounds(followers=LIMIT, followers_per_caller=LIMIT)


@pytest.fixture
def bounded(engine: Engine) -> Iterator[LedgerClients]:
    with serve(
        "ledger",
        bindings(Ledger(engine, stream_limits=ONE_CALLER_MAY_TAKE_ALL, authority=token_roles)),
    ) as served:
        yield LedgerClients(served)


def append(clients: LedgerClients, head: str, reason: str) -> common_pb2.JournalEntry:
    return (
        clients.ledger()
        .AppendJournalEntry(
            ledger_pb2.AppendJournalEntryRequest(
                run_id="run-1",
                expected_head_hash=head,
                kind=common_pb2.JOURNAL_ENTRY_KIND_RUN_HELD,
                payload_json=json.dumps({"reason": reason}),
            ),
            timeout=10,
        )
        .entry
    )


class Follower:
    """One following stream on its own channel; closing the channel cancels the stream.

    The client's tracing interceptor makes the stream's span current while the stream is open;
    each stream runs in its own context so open streams never leak a span into the test."""

    def __init__(self, clients: LedgerClients, token: str = "reader-token") -> None:
        self.channel = clients.channel(token)
        self._context = contextvars.copy_context()
        self.stream = self._context.run(
            ledger_pb2_grpc.LedgerServiceStub(self.channel).StreamJournal,
            ledger_pb2.StreamJournalRequest(run_id="run-1", from_sequence=1, follow=True),
            timeout=30,
        )

    def next_sequence(self) -> int:
        response: ledger_pb2.StreamJournalResponse = self._context.run(next, self.stream)
        return int(response.entry.sequence)

    def close(self) -> None:
        self.channel.close()
        # With the client interceptors the call is a generator; closing it ends its span here.
        close = getattr(self.stream, "close", None)
        if close is not None:
            self._context.run(close)


def refused_follower(clients: LedgerClients) -> None:
    follower = Follower(clients)
    try:
        follower.next_sequence()
    finally:
        follower.close()


def test_beyond_the_bound_a_follower_is_refused_and_writes_still_succeed(
    bounded: LedgerClients,
) -> None:
    bounded.ledger().CreateRun(run_request())
    first = append(bounded, "", "r0")
    stub = ledger_pb2_grpc.LedgerServiceStub(bounded.channel("reader-token"))
    followers = [Follower(bounded) for _ in range(LIMIT)]
    assert [f.next_sequence() for f in followers] == [1] * LIMIT  # each holds its slot
    # More followers than the server has threads: every one beyond the bound is refused at once.
    for _ in range(DEFAULT_SERVER_THREADS):
        error = expect_error(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "JOURNAL_FOLLOWERS_EXHAUSTED",
            lambda: refused_follower(bounded),
        )
        assert error.metadata["limit"] == str(LIMIT)
    # The write path is not starved, and the bounded followers see the new entry.
    second = append(bounded, first.hash, "r1")
    assert [f.next_sequence() for f in followers] == [second.sequence] * LIMIT
    # Reading pages is never bounded.
    page = stub.ReadJournal(ledger_pb2.ReadJournalRequest(run_id="run-1"), timeout=10)
    assert page.head.sequence == 2
    # A follower that goes away frees its slot.
    followers[0].close()
    deadline = time.monotonic() + 10
    while True:
        replacement = Follower(bounded)
        try:
            assert replacement.next_sequence() == 1
            break
        except grpc.RpcError:
            assert time.monotonic() < deadline, "a cancelled follower never freed its slot"
            time.sleep(0.1)
        finally:
            replacement.close()
    for follower in followers[1:]:
        follower.close()


def test_a_plain_stream_does_not_take_a_follower_slot(bounded: LedgerClients) -> None:
    bounded.ledger().CreateRun(run_request())
    append(bounded, "", "r0")
    stub = ledger_pb2_grpc.LedgerServiceStub(bounded.channel("reader-token"))
    followers = [Follower(bounded) for _ in range(LIMIT)]
    for follower in followers:
        follower.next_sequence()
    once = stub.StreamJournal(
        ledger_pb2.StreamJournalRequest(run_id="run-1", from_sequence=1), timeout=10
    )
    assert [r.entry.sequence for r in once] == [1]
    for follower in followers:
        follower.close()


def test_the_follower_bound_stays_below_the_server_thread_pool() -> None:
    pool = inspect.signature(start_server).parameters["max_workers"].default
    assert pool == DEFAULT_SERVER_THREADS
    assert pool > DEFAULT_MAX_JOURNAL_FOLLOWERS
    assert journal_follower_limit({}) == DEFAULT_MAX_JOURNAL_FOLLOWERS
    assert journal_follower_limit({"FORGE_MAX_JOURNAL_FOLLOWERS": "4"}) == 4
    assert journal_follower_limit({"FORGE_MAX_JOURNAL_FOLLOWERS": ""}) == 8
    for bad in ("0", "-1", str(DEFAULT_SERVER_THREADS), "many"):
        with pytest.raises(ValueError, match="FORGE_MAX_JOURNAL_FOLLOWERS"):
            journal_follower_limit({"FORGE_MAX_JOURNAL_FOLLOWERS": bad})
    # A larger pool (FORGE_SERVER_THREADS) admits more followers, still at most half of it.
    assert server_threads({}) == DEFAULT_SERVER_THREADS
    larger = {"FORGE_SERVER_THREADS": "100", "FORGE_MAX_JOURNAL_FOLLOWERS": "50"}
    assert journal_follower_limit(larger) == 50
    with pytest.raises(ValueError, match="FORGE_MAX_JOURNAL_FOLLOWERS"):
        journal_follower_limit({**larger, "FORGE_MAX_JOURNAL_FOLLOWERS": "51"})
    for bad in ("1", "0", "many"):
        with pytest.raises(ValueError, match="FORGE_SERVER_THREADS"):
            server_threads({"FORGE_SERVER_THREADS": bad})


def test_a_journal_read_on_sqlite_does_not_take_the_write_lock(engine: Engine) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("SQLite only: PostgreSQL reads never block writers")
    with LedgerContext(engine).read() as connection:  # exactly how the ledger's reads connect
        journal_reads.journal_head(connection, "run-1")
        other = sqlite3.connect(str(make_url(str(engine.url)).database), timeout=0)
        try:
            other.execute("BEGIN IMMEDIATE")  # a writer elsewhere, without waiting
            other.execute("ROLLBACK")
        finally:
            other.close()
