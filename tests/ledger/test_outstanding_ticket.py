"""Generic retry, resume and handoff cannot bypass an outstanding continuity ticket (ADR 0014,
rule 3b, amended): while a continuity request of the run is queued or claimed, a platform
writer's native resume of any kind is refused and writes nothing; once the request ended, the
run is the platform's again. Real ledger server, SQLite and PostgreSQL."""

from __future__ import annotations

import json

import grpc
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, execution_pb2, ledger_pb2
from services.ledger.domain.journal import EntryKind, seal
from services.ledger.repository import journal as journal_rows
from services.ledger.repository import journal_reads
from shared.continuity.canonical import canonical_text
from shared.continuity.timeutil import to_text, utc_now
from tests.errors import expect_error
from tests.ledger.admission_support import admitted, claim_request, execution
from tests.ledger.conftest import Clock, LedgerClients
from tests.support import row_counts, run_row

#: One native resume of each kind a platform writer sends (none names a continuity request).
RESUMES: tuple[tuple[common_pb2.JournalEntryKind.ValueType, dict[str, object]], ...] = (
    (common_pb2.JOURNAL_ENTRY_KIND_RUN_STARTED, {"task_id": "task-1", "attempt_id": "att-2"}),
    (common_pb2.JOURNAL_ENTRY_KIND_CHECKPOINT_STORED, {"checkpoint_digest": "sha256:" + "a" * 64}),
    (
        common_pb2.JOURNAL_ENTRY_KIND_MODEL_REQUEST_SENT,
        {"request_id": "req-native", "checkpoint_digest": "sha256:" + "a" * 64},
    ),
    (
        common_pb2.JOURNAL_ENTRY_KIND_RESPONSE_CONSUMED,
        {"request_id": "req-native", "response_digest": "sha256:" + "b" * 64},
    ),
    (
        common_pb2.JOURNAL_ENTRY_KIND_TOOL_CALL_GRANTED,
        {"call_id": "call-native", "tool_name": "list_files"},
    ),
    (common_pb2.JOURNAL_ENTRY_KIND_TOOL_INTENT, {"call_id": "call-native"}),
    (common_pb2.JOURNAL_ENTRY_KIND_TOOL_OUTCOME, {"call_id": "call-native", "status": "succeeded"}),
    (common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED, {"command_id": "native-cmd"}),
    (
        common_pb2.JOURNAL_ENTRY_KIND_WORKER_CLAIMED,
        {"execution_request_id": "native-exr", "lease_generation": 1},
    ),
    (common_pb2.JOURNAL_ENTRY_KIND_RUN_HELD, {"reason": "the platform held it again"}),
)


def append(
    clients: LedgerClients, kind: common_pb2.JournalEntryKind.ValueType, payload: dict[str, object]
) -> ledger_pb2.AppendJournalEntryResponse:
    writer = clients.ledger()
    head = writer.GetRun(ledger_pb2.GetRunRequest(run_id="run-1")).head.hash
    return writer.AppendJournalEntry(
        ledger_pb2.AppendJournalEntryRequest(
            run_id="run-1", expected_head_hash=head, kind=kind, payload_json=json.dumps(payload)
        )
    )


def refused_everything(clients: LedgerClients, engine: Engine, exr: str) -> None:
    """Every native resume refused, with nothing written: no row, and the run row untouched (on
    PostgreSQL the append at a known head is a statement that commits by itself, ADR 0065)."""
    counts, row = row_counts(engine), run_row(engine)
    for kind, payload in RESUMES:
        error = expect_error(
            grpc.StatusCode.FAILED_PRECONDITION,
            "CONTINUITY_TICKET_OUTSTANDING",
            lambda kind=kind, payload=payload: append(clients, kind, payload),
        )
        assert error.metadata["execution_request_id"] == exr
    assert row_counts(engine) == counts
    assert run_row(engine) == row


def test_a_native_resume_is_refused_while_a_continuity_ticket_is_queued_or_claimed(
    clients: LedgerClients, engine: Engine, clock: Clock
) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    refused_everything(clients, engine, exr)  # queued
    execution(clients).ClaimExecutionRequest(claim_request(clients, exr))
    refused_everything(clients, engine, exr)  # claimed
    # An annotation of the platform's startup recovery resumes nothing: still written.
    append(
        clients,
        common_pb2.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
        {"annotation": "the platform restarted"},
    )
    # ... and a native resume right after it, at the head that append left (on PostgreSQL the
    # one-statement append at a known head, which must refuse it too), is still refused, and
    # later than the run row's time, which that statement must not move either.
    clock.advance(60)
    refused_everything(clients, engine, exr)
    # Once the request ended, the run is the platform's again.
    execution(clients, "admin-token").CancelExecutionRequest(
        execution_pb2.CancelExecutionRequestRequest(execution_request_id=exr, reason="test")
    )
    for kind, payload in RESUMES:
        append(clients, kind, payload)


def test_a_native_entry_written_around_the_ledger_after_admission_stops_the_claim(
    clients: LedgerClients, engine: Engine
) -> None:
    """A changed native ticket stops execution: a native resume that reached the journal after
    the request was queued without the ledger's check (a replica of an earlier release, or a
    write into the database; simulated by inserting the sealed row) makes the claim refuse,
    writing nothing."""
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    with engine.begin() as connection:
        sequence, head = journal_reads.journal_head(connection, "run-1")
        payload = canonical_text({"task_id": "task-1", "attempt_id": "att-2"})
        entry = seal(
            "run-1",
            sequence + 1,
            EntryKind.RUN_STARTED,
            payload,
            head,
            "writer",
            to_text(utc_now()),
        )
        journal_rows.insert_journal_entry(connection, entry)
    counts = row_counts(engine)
    error = expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "NATIVE_JOURNAL_CHANGED",
        lambda: execution(clients).ClaimExecutionRequest(claim_request(clients, exr)),
    )
    assert (error.metadata["sequence"], error.metadata["kind"]) == (
        str(sequence + 1),
        "run_started",
    )
    assert row_counts(engine) == counts
