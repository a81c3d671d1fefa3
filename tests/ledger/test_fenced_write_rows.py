"""On PostgreSQL a journal writer's change of its execution request, its note on the run row and
its entry are one statement (repository/journal.py). The rows are exactly those the statements one
by one write (the path SQLite takes): the same claims, worker records, command charges,
completions and failures, in two fresh schemas on the same clock, leave every table equal, column
for column."""

from __future__ import annotations

import json

import pytest

from forge.continuity.v1 import common_pb2, execution_pb2, ledger_pb2
from services.ledger.repository import journal
from shared.continuity.canonical import digest_of
from tests.ledger.admission_support import (
    claim_request,
    commit,
    commit_request,
    enable_policy,
    execution,
    seed,
)
from tests.ledger.conftest import LedgerClients, counted
from tests.ledger.one_statement_support import Rows, every_row, served_ledger


def _admitted(clients: LedgerClients, run_id: str) -> str:
    seeded = seed(clients, run_id)
    ticket = commit(clients, commit_request(clients, seeded, request_id=f"req-{run_id}")).ticket
    return ticket.execution_request.execution_request_id


def _worked(clients: LedgerClients) -> None:
    """A request claimed, a worker's own record, a command charged, completed; one failed by its
    worker after its claim; one failed unclaimed."""
    worker = execution(clients)
    completed = _admitted(clients, "run-completed")
    head = worker.ClaimExecutionRequest(claim_request(clients, completed)).worker_claimed_entry.hash
    clients.ledger("worker-token").AppendJournalEntry(
        ledger_pb2.AppendJournalEntryRequest(
            run_id="run-completed",
            expected_head_hash=head,
            kind=common_pb2.JOURNAL_ENTRY_KIND_TOOL_INTENT,
            payload_json=json.dumps(
                {"call_id": "c1", "execution_request_id": completed, "lease_generation": 1}
            ),
        )
    )
    worker.RecordCommand(
        execution_pb2.RecordCommandRequest(
            execution_request_id=completed,
            lease_generation=1,
            command_id="c1",
            command_digest=digest_of("c1"),
        )
    )
    worker.CompleteExecutionRequest(
        execution_pb2.CompleteExecutionRequestRequest(
            execution_request_id=completed, lease_generation=1
        )
    )
    failed = _admitted(clients, "run-failed")
    worker.ClaimExecutionRequest(claim_request(clients, failed))
    worker.FailExecutionRequest(
        execution_pb2.FailExecutionRequestRequest(
            execution_request_id=failed, lease_generation=1, reason="the model provider is down"
        )
    )
    unclaimed = _admitted(clients, "run-unclaimed")
    execution(clients, "admin-token").FailUnclaimedExecutionRequest(
        execution_pb2.FailUnclaimedExecutionRequestRequest(
            execution_request_id=unclaimed, reason="no worker can run this profile"
        )
    )


def _rows(*, one_statement: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Rows, list[str]]:
    """Every table's rows after :func:`_worked`, and the statements it ran."""
    with served_ledger(journal, one_statement=one_statement, monkeypatch=monkeypatch) as (
        clients,
        engine,
    ):
        enable_policy(clients, pending_ticket_limit=10)
        with counted(engine) as statements:
            _worked(clients)
        return every_row(engine), statements


def _plain_inserts(statements: list[str]) -> int:
    return sum(s.startswith("INSERT INTO journal_entries") for s in statements)


def test_one_statement_writes_the_rows_the_statements_one_by_one_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one, one_ran = _rows(one_statement=True, monkeypatch=monkeypatch)
    by_one, by_one_ran = _rows(one_statement=False, monkeypatch=monkeypatch)
    # the paths under test were the ones taken: two claims, a completion and two failures wrote
    # their request with their entry; they, the worker's own record and the command charge
    # inserted no entry on its own
    assert sum(s.startswith("WITH changed") for s in one_ran) == 5
    assert not any(s.startswith("WITH changed") for s in by_one_ran)
    assert _plain_inserts(by_one_ran) - _plain_inserts(one_ran) == 7
    assert len(one["execution_requests"]) == 3
    assert one == by_one
