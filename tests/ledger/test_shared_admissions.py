"""Admissions share the policy lock and consume the pending cap with one conditional statement
(docs/adr/0049-admissions-share-the-policy-lock.md), checked with real concurrent sessions on
PostgreSQL (SQLite serializes its writers; the cap's counter is checked on both in
test_queue_depth.py and the cap itself in test_ticket_caps.py):

- an admission no longer waits for a transaction that holds the policy lock shared (a fenced
  worker write, another admission), while a policy write still does;
- an admission that waits for the last place under the cap is refused once the holder of that
  place commits, and nothing it wrote stays;
- many admissions on different runs at once fill the cap exactly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from sqlalchemy import Engine, event, func, select

from forge.continuity.v1 import common_pb2, ledger_pb2, policy_pb2
from services.ledger.database import make_engine
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository import policy as policy_rows
from services.ledger.schema import admission_tickets
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from shared.runtime.config import DatabaseSettings
from shared.runtime.errors import from_rpc_error
from tests.conftest import postgres_schema
from tests.errors import expect_error
from tests.ledger.admission_support import commit, commit_request, enable_policy, seed
from tests.ledger.conftest import Clock, LedgerClients, in_threads, waiting_for_locks
from tests.ledger.test_queue_depth import by_slots
from tests.support import row_counts, serve

# How long a test waits for a session to queue behind a lock (a liveness bound, not a figure).
QUEUE_DEADLINE_SECONDS = 60.0
# The served ledger gives up on a lock after this: long enough for any uncontended statement,
# short enough that the release before ADR 0049 (an admission waiting for the exclusive lock
# behind a shared holder) fails the first test at once with DATABASE_TIMEOUT.
LOCK_TIMEOUT = DatabaseSettings(lock_timeout_ms=2000, statement_timeout_ms=0)


@pytest.fixture
def database_url(application_name: str) -> Iterator[str]:
    with postgres_schema(application_name=application_name) as url:
        yield url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url, LOCK_TIMEOUT)
    yield engine
    engine.dispose()


@pytest.fixture
def clients(engine: Engine, clock: Clock) -> Iterator[LedgerClients]:
    with serve("ledger", bindings(Ledger(engine, clock))) as served:
        yield LedgerClients(served)


def _requests(
    clients: LedgerClients, runs: int, cap: int
) -> list[ledger_pb2.CommitAdmissionRequest]:
    """One admission request for each of ``runs`` held runs, under a pending cap of ``cap``."""
    seeded = [seed(clients, f"run-{index}") for index in range(runs)]
    enable_policy(clients, pending_ticket_limit=cap)
    return [commit_request(clients, s, request_id=f"req-{s.run_id}") for s in seeded]


def _outcome(clients: LedgerClients, request: ledger_pb2.CommitAdmissionRequest) -> str:
    try:
        commit(clients, request)
        return "ok"
    except grpc.RpcError as error:
        return f"{error.code().name} {from_rpc_error(error).reason}"


def _pending(engine: Engine) -> tuple[int, int, int]:
    """(tickets, pending requests as kept, pending requests as the cap's counter has them)."""
    with engine.connect() as connection:
        tickets = connection.execute(select(func.count()).select_from(admission_tickets))
        return (
            int(tickets.scalar_one()),
            request_rows.pending_count(connection),
            by_slots(connection),
        )


def test_admissions_on_different_runs_pass_a_shared_holder_and_a_policy_write_does_not(
    clients: LedgerClients, holder: Engine, engine: Engine
) -> None:
    """A transaction holds the policy lock shared, as a fenced worker write or another admission
    does. Two admissions on different runs, at once, are admitted while it holds it (they took
    the lock exclusively before ADR 0049 and were refused DATABASE_TIMEOUT after waiting for
    it); a policy write still waits for it and is refused, writing nothing."""
    requests = _requests(clients, runs=2, cap=5)
    with holder.connect() as connection, connection.begin():
        policy_rows.lock_current_policy(connection, shared=True)
        threads, outcomes = in_threads(
            [lambda request=request: _outcome(clients, request) for request in requests]
        )
        for thread in threads:
            thread.join(QUEUE_DEADLINE_SECONDS)
        assert outcomes == ["ok", "ok"]
        counts = row_counts(engine)
        current = clients.policy().GetPolicy(policy_pb2.GetPolicyRequest()).policy
        refused = expect_error(
            grpc.StatusCode.UNAVAILABLE,
            "DATABASE_TIMEOUT",
            lambda: clients.policy().PutPolicy(
                policy_pb2.PutPolicyRequest(
                    expected_revision=current.revision,
                    settings=common_pb2.PolicySettings(enabled=False, window_seconds=60),
                )
            ),
        )
        assert refused.metadata == {"timeout": "lock_timeout"}
        assert row_counts(engine) == counts
    assert _pending(engine) == (2, 2, 2)


def _pause_after_first_write(engine: Engine) -> tuple[threading.Event, threading.Event, Any]:
    """Hold the first admission that runs its writing statement (which takes its place under
    the cap) just after it, before its commit: (paused, release, the listener to remove)."""
    paused, release = threading.Event(), threading.Event()

    def after(*arguments: object) -> None:
        if str(arguments[2]).startswith("WITH pending_slot") and not paused.is_set():
            paused.set()
            release.wait(QUEUE_DEADLINE_SECONDS)

    event.listen(engine, "after_cursor_execute", after)
    return paused, release, after


def _second_waits_for_the_first(
    clients: LedgerClients,
    holder: Engine,
    engine: Engine,
    application_name: str,
    first: ledger_pb2.CommitAdmissionRequest,
    second: ledger_pb2.CommitAdmissionRequest,
) -> tuple[list[str], list[str]]:
    """The first admission writes and pauses before committing; the second is sent and waits
    for a lock; then the first commits. Both outcomes, each a list of one."""
    paused, release, listener = _pause_after_first_write(engine)
    try:
        threads, outcomes = in_threads([lambda: _outcome(clients, first)])
        assert paused.wait(QUEUE_DEADLINE_SECONDS), "the first admission never wrote"
        more, later = in_threads([lambda: _outcome(clients, second)])
        deadline = time.monotonic() + QUEUE_DEADLINE_SECONDS
        while waiting_for_locks(holder, application_name) < 1:
            assert time.monotonic() < deadline, "the second admission never queued"
            time.sleep(0.02)
        release.set()
        for thread in threads + more:
            thread.join(QUEUE_DEADLINE_SECONDS)
    finally:
        release.set()
        event.remove(engine, "after_cursor_execute", listener)
    return outcomes, later


def test_an_admission_waiting_for_the_last_place_is_refused_once_it_is_taken(
    clients: LedgerClients, holder: Engine, engine: Engine, application_name: str
) -> None:
    """Cap 1. The first admission has taken the one place and not committed; the second (another
    run, so nothing else orders them) read a pending count of 0 and passed step 9.7, and its
    conditional statement waits for the counter row. When the first commits, the second's
    statement re-checks the row and finds no room: refused PENDING_TICKET_LIMIT, nothing
    written. Without the condition on the counter it would be admitted (2 pending under a cap
    of 1): `make guarantees` removes it to show this test failing."""
    first, second = _requests(clients, runs=2, cap=1)
    outcomes, later = _second_waits_for_the_first(
        clients, holder, engine, application_name, first, second
    )
    assert outcomes == ["ok"]
    assert later == ["RESOURCE_EXHAUSTED PENDING_TICKET_LIMIT"]
    assert _pending(engine) == (1, 1, 1)


def test_concurrent_admissions_on_different_runs_fill_the_cap_exactly(
    clients: LedgerClients, engine: Engine
) -> None:
    """Eight admissions on eight runs released at once under a cap of 3: three admitted, five
    refused by the cap, none lost, and the kept count and the cap's counter agree."""
    requests = _requests(clients, runs=8, cap=3)
    start = threading.Barrier(len(requests))

    def admit(request: ledger_pb2.CommitAdmissionRequest) -> str:
        start.wait(QUEUE_DEADLINE_SECONDS)
        return _outcome(clients, request)

    threads, outcomes = in_threads([lambda request=request: admit(request) for request in requests])
    for thread in threads:
        thread.join(QUEUE_DEADLINE_SECONDS)
    assert sorted(outcomes) == ["RESOURCE_EXHAUSTED PENDING_TICKET_LIMIT"] * 5 + ["ok"] * 3
    assert _pending(engine) == (3, 3, 3)


@pytest.mark.parametrize("same_request", [False, True])
def test_a_second_admission_of_one_graph_waiting_for_the_last_place_is_answered_as_second(
    clients: LedgerClients,
    holder: Engine,
    engine: Engine,
    application_name: str,
    same_request: bool,
) -> None:
    """Found by the model (tests/model/race_rules.py, on PostgreSQL): two admissions of one run
    at once under a cap with one place left. The first has taken the place and not committed;
    the second read no ticket for the graph, passed steps 9.2 and 9.3, and waits for the place.
    When the first commits, no place is left, but the answer is the one any later caller of
    this graph gets: the replayed ticket for the same request id, CONSUMED_GRAPH_ALREADY_ADMITTED
    for another. PENDING_TICKET_LIMIT would be an answer no order of the two explains."""
    seeded = seed(clients, "run-0")
    enable_policy(clients, pending_ticket_limit=1)
    first = commit_request(clients, seeded, request_id="req-a")
    second = first if same_request else commit_request(clients, seeded, request_id="req-b")
    outcomes, later = _second_waits_for_the_first(
        clients, holder, engine, application_name, first, second
    )
    assert outcomes == ["ok"]
    assert later == (["ok"] if same_request else ["ALREADY_EXISTS CONSUMED_GRAPH_ALREADY_ADMITTED"])
    assert _pending(engine) == (1, 1, 1)
