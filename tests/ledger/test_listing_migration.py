"""Migration 0008 backfills the listing columns of existing runs from their journal and
execution requests exactly as the ledger keeps them live: the same states, update times and
current requests after a downgrade to 0007 and an upgrade again, on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import Engine

from forge.continuity.v1 import ledger_pb2
from services.ledger.database import downgrade, upgrade
from tests.ledger.admission_support import (
    claim_request,
    commit,
    commit_request,
    enable_policy,
    execution,
    seed,
)
from tests.ledger.conftest import Clock, LedgerClients, run_request
from tests.support import owner_engine


def listed(clients: LedgerClients) -> list[tuple[str, int, str, str]]:
    page = clients.ledger("reader-token").ListRuns(ledger_pb2.ListRunsRequest(page_size=500))
    return [
        (
            row.run.run_id,
            row.continuity_state,
            row.updated_at.ToJsonString(),
            row.current_execution_request_id,
        )
        for row in page.runs
    ]


def test_the_backfill_matches_what_the_ledger_keeps(
    clients: LedgerClients, clock: Clock, engine: Engine
) -> None:
    clients.ledger().CreateRun(run_request("run-plain"))
    clock.advance(1)
    seed(clients, "run-held")
    clock.advance(1)
    enable_policy(clients, per_run_ticket_limit=1, pending_ticket_limit=10)
    admitted = seed(clients, "run-admitted")
    commit(clients, commit_request(clients, admitted))
    clock.advance(1)
    running = seed(clients, "run-running")
    ticket = commit(clients, commit_request(clients, running, "req-2")).ticket
    clock.advance(1)
    execution(clients).ClaimExecutionRequest(
        claim_request(clients, ticket.execution_request.execution_request_id)
    )
    before = listed(clients)
    assert [(run_id, state) for run_id, state, _, _ in before] == [
        ("run-running", ledger_pb2.RUN_CONTINUITY_STATE_RUNNING),
        ("run-admitted", ledger_pb2.RUN_CONTINUITY_STATE_ADMITTED),
        ("run-held", ledger_pb2.RUN_CONTINUITY_STATE_HELD),
        ("run-plain", ledger_pb2.RUN_CONTINUITY_STATE_ACTIVE),
    ]
    with owner_engine(engine) as owner:
        downgrade(owner, "0007")
        upgrade(owner)
    assert listed(clients) == before
