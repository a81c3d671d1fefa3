from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from sqlalchemy import Engine, create_engine, event, text

from forge.continuity.v1 import common_pb2, ledger_pb2, ledger_pb2_grpc, policy_pb2_grpc
from services.ledger.domain.runs import RunSpec
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from tests.support import Served, serve, token_roles

CONFIGURATION_DIGEST = "sha256:" + "c" * 64


@dataclass
class LedgerClients:
    served: Served

    def ledger(self, token: str = "writer-token") -> ledger_pb2_grpc.LedgerServiceStub:
        return ledger_pb2_grpc.LedgerServiceStub(self.served.channel(token))

    def policy(self, token: str = "admin-token") -> policy_pb2_grpc.PolicyServiceStub:
        return policy_pb2_grpc.PolicyServiceStub(self.served.channel(token))

    def channel(self, token: str) -> grpc.Channel:
        return self.served.channel(token)


@dataclass
class Clock:
    now: datetime = field(default_factory=lambda: datetime(2026, 12, 1, 12, 0, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def clients(engine: Engine, clock: Clock) -> Iterator[LedgerClients]:
    with serve("ledger", bindings(Ledger(engine, clock, authority=token_roles))) as served:
        yield LedgerClients(served)


@pytest.fixture
def ledger_server(ledger: Ledger) -> Iterator[LedgerClients]:
    with serve("ledger", bindings(ledger)) as served:
        yield LedgerClients(served)


# The run every ledger test registers unless it says otherwise (besides its id).
_RUN_FIELDS: dict[str, object] = {
    "task_id": "task-1",
    "attempt_id": "attempt-1",
    "source_revision": "rev-abc",
    "configuration_digest": CONFIGURATION_DIGEST,
    "provider_timeout_seconds": 900,
    "command_limit": 22,
    "time_budget_protocol": "provider-timeout-v1",
    "source_profile": "profile-2026-11",
}


def run_request(run_id: str = "run-1", **overrides: object) -> ledger_pb2.CreateRunRequest:
    fields = {"run_id": run_id, **_RUN_FIELDS, **overrides}
    return ledger_pb2.CreateRunRequest(**fields)  # type: ignore[arg-type]


def run_spec(run_id: str = "run-1", **overrides: object) -> RunSpec:
    """The run :func:`run_request` registers, as the domain's spec (for tests of the ledger's
    facade and repository, without gRPC)."""
    fields = {"run_id": run_id, "active_deadline": None, **_RUN_FIELDS, **overrides}
    return RunSpec(**fields)  # type: ignore[arg-type]


@contextmanager
def counted(
    engine: Engine, on_statement: Callable[[str, list[str]], None] | None = None
) -> Iterator[list[str]]:
    """Every statement ``engine`` runs meanwhile, in order (SQLAlchemy's
    ``before_cursor_execute``); ``on_statement`` is called with each, and those seen so far,
    before it runs."""
    statements: list[str] = []

    def count(*arguments: object) -> None:
        statements.append(str(arguments[2]))
        if on_statement is not None:
            on_statement(statements[-1], statements)

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", count)


def append_entry(
    clients: LedgerClients,
    run_id: str,
    head: str,
    kind: common_pb2.JournalEntryKind.ValueType,
    payload: dict[str, object],
) -> common_pb2.JournalEntry:
    """Append ``payload`` as an entry of ``kind`` after ``head`` (the writer's token); the entry."""
    request = ledger_pb2.AppendJournalEntryRequest(
        run_id=run_id, expected_head_hash=head, kind=kind, payload_json=json.dumps(payload)
    )
    return clients.ledger().AppendJournalEntry(request).entry


def annotate(clients: LedgerClients, run_id: str, head: str, note: str) -> str:
    """Append a native annotation after ``head``; the new head."""
    kind = common_pb2.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION
    return append_entry(clients, run_id, head, kind, {"annotation": note}).hash


def waiting_for_locks(engine: Engine, application_name: str | None = None) -> int:
    """PostgreSQL sessions waiting for a lock now (only ``application_name``'s, if named)."""
    query = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
    if application_name is not None:
        query += " AND application_name = :name"
    with engine.connect() as connection:
        return int(connection.execute(text(query), {"name": application_name}).scalar_one())


@pytest.fixture
def application_name() -> str:
    """The name the served ledger's PostgreSQL sessions carry (a module's ``database_url`` fixture
    gives it to its schema), so that a test counts only its ledger's sessions waiting for a lock."""
    return f"ledger-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def holder(database_url: str) -> Iterator[Engine]:
    """Another client of the same schema (its own sessions, never counted as the ledger's), on the
    ``database_url`` of the module that asks for it."""
    engine = create_engine(database_url, connect_args={"application_name": "lock-holder"})
    yield engine
    engine.dispose()


def in_threads(calls: list[Callable[[], str]]) -> tuple[list[threading.Thread], list[str]]:
    """Start each call in a thread of its own; its outcome is appended when it ends."""
    outcomes: list[str] = []
    lock = threading.Lock()

    def run(call: Callable[[], str]) -> None:
        outcome = call()
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    return threads, outcomes
