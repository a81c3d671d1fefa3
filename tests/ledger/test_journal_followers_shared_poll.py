"""Journal followers share one poller per ledger process: N followers of a run cost one poll
statement per tick, and followers racing appends see every entry exactly once, in order, one
entry a message or (``max_entries_per_message``) in batches of what was ready at once."""

from __future__ import annotations

import contextvars
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from sqlalchemy import Engine, event

from forge.continuity.v1 import common_pb2, ledger_pb2, ledger_pb2_grpc
from services.ledger.database import make_engine
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from services.ledger.transactions import followers as followers_module
from shared.runtime.limits import StreamBounds
from tests.errors import expect_error
from tests.ledger.conftest import LedgerClients, run_request
from tests.support import serve, token_roles

FOLLOWERS = 6
WAIT_SECONDS = 60.0


class Statements:
    """Every statement the engine sends to the database (a cursor event on the engine)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.seen: list[str] = []
        self._lock = threading.Lock()
        event.listen(engine, "before_cursor_execute", self._note)

    def _note(self, _connection: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        with self._lock:
            self.seen.append(statement)

    def count(self) -> int:
        with self._lock:
            return len(self.seen)

    def since(self, mark: int) -> list[str]:
        with self._lock:
            return self.seen[mark:]

    def close(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._note)


class Follower:
    """One following stream on its own channel, collecting sequences on its own thread until it
    has seen ``until`` (or its channel closes); with ``batch``, in messages of at most that many
    entries (``messages`` holds each message's sequences)."""

    def __init__(
        self,
        clients: LedgerClients,
        run_id: str,
        from_sequence: int = 1,
        until: int = 0,
        batch: int = 0,
    ) -> None:
        self.until = until
        self.batch = batch
        self.sequences: list[int] = []
        self.messages: list[list[int]] = []
        self.error: grpc.RpcError | None = None
        self.received = threading.Condition()
        self.channel = clients.channel("reader-token")
        request = ledger_pb2.StreamJournalRequest(
            run_id=run_id, from_sequence=from_sequence, follow=True, max_entries_per_message=batch
        )
        stub = ledger_pb2_grpc.LedgerServiceStub(self.channel)
        context = contextvars.copy_context()  # no span of this stream leaks into the test
        self.stream = context.run(stub.StreamJournal, request, timeout=WAIT_SECONDS)
        self.thread = threading.Thread(target=context.run, args=(self._collect,), daemon=True)
        self.thread.start()

    def _collect(self) -> None:
        try:
            for response in self.stream:
                # One shape a stream: `entries` when batching, `entry` otherwise.
                assert response.HasField("entry") != bool(self.batch), response
                entries = list(response.entries) if self.batch else [response.entry]
                assert 1 <= len(entries) <= max(self.batch, 1), response
                with self.received:
                    self.messages.append([int(entry.sequence) for entry in entries])
                    self.sequences += self.messages[-1]
                    self.received.notify_all()
                if self.until and self.sequences[-1] >= self.until:
                    return
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.CANCELLED:
                self.error = error
        finally:
            with self.received:
                self.received.notify_all()

    def wait_for(self, count: int) -> list[int]:
        with self.received:
            self.received.wait_for(
                lambda: len(self.sequences) >= count or not self.thread.is_alive(), WAIT_SECONDS
            )
            assert self.error is None, self.error
            return list(self.sequences)

    def close(self) -> None:
        self.channel.close()
        self.thread.join(timeout=WAIT_SECONDS)


def _append(stub: ledger_pb2_grpc.LedgerServiceStub, run_id: str, head: str, note: str) -> str:
    request = ledger_pb2.AppendJournalEntryRequest(
        run_id=run_id,
        expected_head_hash=head,
        kind=common_pb2.JOURNAL_ENTRY_KIND_RUN_HELD,
        payload_json=json.dumps({"reason": note}),
    )
    return str(stub.AppendJournalEntry(request, timeout=30).entry.hash)


@pytest.fixture
def ledger(engine: Engine) -> Ledger:
    return Ledger(
        engine,
        stream_limits=StreamBounds(followers=FOLLOWERS + 3, followers_per_caller=FOLLOWERS + 3),
        authority=token_roles,
    )


@pytest.fixture
def served(ledger: Ledger) -> Iterator[LedgerClients]:
    with serve("ledger", bindings(ledger)) as running:
        yield LedgerClients(running)


def test_followers_of_one_run_cost_one_poll_statement_per_tick(
    ledger: Ledger, served: LedgerClients, engine: Engine, database_url: str
) -> None:
    served.ledger().CreateRun(run_request())
    head = _append(served.ledger(), "run-1", "", "r0")
    followers = [Follower(served, "run-1") for _ in range(FOLLOWERS)]
    statements = Statements(engine)
    # Appends through another engine (as another ledger process would make them), so every
    # statement on this ledger's engine is the followers'.
    writer_engine = make_engine(database_url)
    try:
        for follower in followers:
            assert follower.wait_for(1) == [1]
        polls, mark = ledger.journal_followers.polls, statements.count()
        with serve("ledger", bindings(Ledger(writer_engine, authority=token_roles))) as other:
            writer = LedgerClients(other).ledger()
            for count, note in enumerate(("r1", "r2", "r3"), start=2):
                head = _append(writer, "run-1", head, note)
                for follower in followers:
                    assert follower.wait_for(count) == list(range(1, count + 1))
            # and a few idle ticks
            deadline = time.monotonic() + WAIT_SECONDS
            while ledger.journal_followers.polls < polls + 8:
                assert time.monotonic() < deadline, "the poller stopped ticking"
                time.sleep(0.05)
        seen = statements.since(mark)
        ticks = ledger.journal_followers.polls - polls
        for follower in followers:
            assert follower.wait_for(4) == [1, 2, 3, 4]
    finally:
        statements.close()
        for follower in followers:
            follower.close()
        writer_engine.dispose()
    polls_seen = [s for s in seen if "journal_entries" in s]
    # The transaction set-up the engine runs for every read (PostgreSQL's per-transaction
    # timeouts; SQLite's BEGIN), once per tick as well.
    set_up = [s for s in seen if "set_config" in s or s.strip().upper().startswith("BEGIN")]
    # One poll statement per tick (the tick in progress at either end of the window may count
    # or not), none per follower: six followers polling on their own would cost six per tick.
    assert ticks - 1 <= len(polls_seen) <= ticks + 1
    assert len(set_up) <= ticks + 1
    assert len(seen) == len(polls_seen) + len(set_up), seen


@pytest.mark.parametrize("batch", [0, 3])
@pytest.mark.parametrize("buffers", ["default", "tiny"])
def test_followers_racing_appends_see_every_entry_once_in_order(
    served: LedgerClients, buffers: str, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    if buffers == "tiny":
        # A page of two rows and a feed of three entries: polls run back to back, followers fall
        # behind the feed and read their missing entries themselves, feeds restart for late
        # followers.
        monkeypatch.setattr(followers_module, "POLL_PAGE", 2)
        monkeypatch.setattr(followers_module, "FEED_BUFFER", 3)
    runs, appends = ("run-a", "run-b", "run-c"), 30
    stub = served.ledger()
    for run_id in runs:
        stub.CreateRun(run_request(run_id))
    final = appends  # sequences 1..appends in every run
    started: list[tuple[Follower, int]] = []
    for run_id in runs:  # two early followers of each run, from the start
        started += [(Follower(served, run_id, 1, final, batch), 1) for _ in range(2)]
    appended = dict.fromkeys(runs, 0)
    lock = threading.Lock()

    def write(run_id: str) -> None:
        writer, head = served.ledger(), ""
        for n in range(appends):
            head = _append(writer, run_id, head, f"{run_id}-{n}")
            with lock:
                appended[run_id] = n + 1

    writers = [threading.Thread(target=write, args=(run_id,)) for run_id in runs]
    for writer in writers:
        writer.start()
    # Late followers join while the appends run, from the start and from where the run is.
    for run_id in runs:
        with lock:
            now = appended[run_id]
        started.append((Follower(served, run_id, max(now, 1), final, batch), max(now, 1)))
    for writer in writers:
        writer.join(timeout=WAIT_SECONDS)
    try:
        for follower, first in started:
            assert follower.wait_for(final - first + 1) == list(range(first, final + 1))
    finally:
        for follower, _ in started:
            follower.close()


def test_a_follower_from_beyond_the_head_and_one_from_the_start_share_the_feed(
    ledger: Ledger, served: LedgerClients
) -> None:
    stub = served.ledger()
    stub.CreateRun(run_request())
    head = _append(stub, "run-1", "", "r0")
    ahead = Follower(served, "run-1", from_sequence=5, until=6)  # waits for entries not yet made
    deadline = time.monotonic() + WAIT_SECONDS
    while ledger.journal_followers.polls < 1:  # subscribed: its feed starts beyond the head (1)
        assert time.monotonic() < deadline, "the follower never subscribed"
        time.sleep(0.02)
    behind = Follower(served, "run-1", from_sequence=1, until=6)  # the feed restarts from 2
    try:
        assert behind.wait_for(1) == [1]
        for note in ("r1", "r2", "r3", "r4", "r5"):
            head = _append(stub, "run-1", head, note)
        assert behind.wait_for(6) == [1, 2, 3, 4, 5, 6]
        assert ahead.wait_for(2) == [5, 6]
    finally:
        ahead.close()
        behind.close()


def test_a_batching_follower_gets_what_is_ready_in_one_message(
    ledger: Ledger, served: LedgerClients, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The catch-up's page is cut into messages of the asked size; entries appended within one
    tick arrive together, not one message an entry."""
    monkeypatch.setattr(followers_module, "FOLLOW_POLL_SECONDS", 1.0)
    stub = served.ledger()
    stub.CreateRun(run_request())
    head = ""
    for n in range(10):
        head = _append(stub, "run-1", head, f"early-{n}")
    follower = Follower(served, "run-1", until=16, batch=4)
    try:
        assert follower.wait_for(10) == list(range(1, 11))
        assert follower.messages == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10]]
        for n in range(6):
            head = _append(stub, "run-1", head, f"late-{n}")
        assert follower.wait_for(16) == list(range(1, 17))
    finally:
        follower.close()
    # Six entries appended well within a second: at most one tick boundary falls among them, so
    # at most three messages (4 + 2, or a split one); one an entry would be six.
    assert len(follower.messages[3:]) <= 3, follower.messages


def test_a_negative_batch_size_is_refused(served: LedgerClients) -> None:
    stub = served.ledger()
    stub.CreateRun(run_request())
    _append(stub, "run-1", "", "r0")
    for follow in (False, True):
        request = ledger_pb2.StreamJournalRequest(
            run_id="run-1", follow=follow, max_entries_per_message=-1
        )
        refused = expect_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            "FIELD_INVALID",
            lambda request=request: list(stub.StreamJournal(request, timeout=WAIT_SECONDS)),
        )
        assert refused.metadata["field"] == "max_entries_per_message"
