"""ReadRunSnapshot through the real ledger gRPC service, on SQLite and PostgreSQL: one stream
with the same run, head, policy, execution requests, entries and verification as the separate
reads, a tampered row reported where VerifyJournal reports it, and a missing run refused."""

from __future__ import annotations

import grpc
import pytest
from sqlalchemy import Engine, text

from forge.continuity.v1 import (
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    ledger_pb2,
    policy_pb2,
)
from services.ledger.transactions import snapshot
from tests.errors import expect_error
from tests.ledger.conftest import LedgerClients, run_request
from tests.ledger.test_journal import K, append, journal


def read_snapshot(
    clients: LedgerClients, run_id: str = "run-1"
) -> tuple[
    ledger_pb2.RunSnapshotHeader,
    list[common_pb2.JournalEntry],
    ledger_pb2.VerifyJournalResponse,
    list[str],
]:
    parts = list(
        clients.ledger("reader-token").ReadRunSnapshot(
            ledger_pb2.ReadRunSnapshotRequest(run_id=run_id)
        )
    )
    order = [str(part.WhichOneof("part")) for part in parts]
    entries = [e for part in parts if part.HasField("entries") for e in part.entries.entries]
    return parts[0].header, entries, parts[-1].verification, order


def seeded(clients: LedgerClients, count: int) -> str:
    clients.ledger().CreateRun(run_request())
    head = ""
    for index in range(count):
        head = append(
            clients,
            "run-1",
            head,
            K.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
            {"annotation": f"n{index}"},
        ).hash
    return head


def test_the_snapshot_equals_the_separate_reads(
    ledger_server: LedgerClients, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small batches, so the journal arrives in several messages.
    monkeypatch.setattr(snapshot, "SNAPSHOT_BATCH", 2)
    head = seeded(ledger_server, 5)
    header, entries, verification, order = read_snapshot(ledger_server)
    assert order == ["header", "entries", "entries", "entries", "verification"]
    reader = ledger_server.ledger("reader-token")
    got = reader.GetRun(ledger_pb2.GetRunRequest(run_id="run-1"))
    assert header.run == got.run
    assert (header.head.sequence, header.head.hash) == (5, head)
    assert header.policy == ledger_server.policy().GetPolicy(policy_pb2.GetPolicyRequest()).policy
    listed = execution_pb2_grpc.ExecutionServiceStub(
        ledger_server.channel("reader-token")
    ).ListExecutionRequests(execution_pb2.ListExecutionRequestsRequest(run_id="run-1"))
    assert list(header.execution_requests) == list(listed.execution_requests)
    assert entries == journal(ledger_server, "run-1")
    verified = reader.VerifyJournal(ledger_pb2.VerifyJournalRequest(run_id="run-1"))
    assert verification == verified
    assert verification.valid and verification.entries_checked == 5


@pytest.mark.parametrize("column", ["payload_json", "hash", "prev_hash", "actor"])
def test_a_row_changed_after_a_snapshot_is_reported_in_the_next_one(
    ledger_server: LedgerClients, engine: Engine, column: str
) -> None:
    """The snapshot verifies the rows it sends with the same remembered-intact rows as
    VerifyJournal: an altered row is recomputed and reported, and it is still sent."""
    seeded(ledger_server, 5)
    assert read_snapshot(ledger_server)[2].valid
    with engine.begin() as connection:
        value = connection.execute(
            text(f"SELECT {column} FROM journal_entries WHERE run_id = 'run-1' AND sequence = 3")
        ).scalar_one()
        middle = len(value) // 2
        replacement = "0" if value[middle] != "0" else "1"
        connection.execute(
            text(
                f"UPDATE journal_entries SET {column} = :v WHERE run_id = 'run-1' AND sequence = 3"
            ),
            {"v": value[:middle] + replacement + value[middle + 1 :]},
        )
    header, entries, verification, _ = read_snapshot(ledger_server)
    assert not verification.valid
    assert verification.first_broken_sequence == 3
    assert len(entries) == 5 and header.head.sequence == 5
    verified = ledger_server.ledger("reader-token").VerifyJournal(
        ledger_pb2.VerifyJournalRequest(run_id="run-1")
    )
    assert (verification.first_broken_sequence, verification.problem) == (
        verified.first_broken_sequence,
        verified.problem,
    )


def test_an_empty_journal_is_a_header_and_a_valid_verification(
    ledger_server: LedgerClients,
) -> None:
    ledger_server.ledger().CreateRun(run_request())
    header, entries, verification, order = read_snapshot(ledger_server)
    assert order == ["header", "verification"]
    assert entries == [] and header.head.sequence == 0
    assert verification.valid and verification.entries_checked == 0


def test_a_missing_run_is_not_found(ledger_server: LedgerClients) -> None:
    expect_error(
        grpc.StatusCode.NOT_FOUND, "RUN_NOT_FOUND", lambda: read_snapshot(ledger_server, "nope")
    )
    expect_error(
        grpc.StatusCode.INVALID_ARGUMENT, "FIELD_REQUIRED", lambda: read_snapshot(ledger_server, "")
    )
