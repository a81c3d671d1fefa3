"""Fenced worker claims and the command ledger through the real ledger service on SQLite and
PostgreSQL."""

from __future__ import annotations

import json

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import (
    common_pb2,
    execution_pb2,
    ledger_pb2,
)
from shared.continuity.canonical import digest_of
from tests.errors import expect_error
from tests.ledger.admission_support import (
    S,
    admitted,
    claim_request,
    execution,
    journal_kinds,
)
from tests.ledger.conftest import Clock, LedgerClients
from tests.support import row_counts, whole_journal

# --- worker claims and leases ---------------------------------------------------------------------


def test_claim_complete_and_fencing(clients: LedgerClients) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    claimed = (
        execution(clients).ClaimExecutionRequest(claim_request(clients, exr)).execution_request
    )
    assert (claimed.state, claimed.lease.generation, claimed.owner) == (
        S.EXECUTION_REQUEST_STATE_CLAIMED,
        1,
        "wanda-worker",
    )
    assert journal_kinds(clients, "run-1")[-1] == "worker_claimed"
    # A claimed ticket is never claimed (requeued) again.
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "EXECUTION_REQUEST_NOT_QUEUED",
        lambda: execution(clients).ClaimExecutionRequest(claim_request(clients, exr)),
    )
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "LEASE_GENERATION_STALE",
        lambda: execution(clients).CompleteExecutionRequest(
            execution_pb2.CompleteExecutionRequestRequest(
                execution_request_id=exr, lease_generation=0
            )
        ),
    )
    done = (
        execution(clients)
        .CompleteExecutionRequest(
            execution_pb2.CompleteExecutionRequestRequest(
                execution_request_id=exr, lease_generation=1
            )
        )
        .execution_request
    )
    assert done.state == S.EXECUTION_REQUEST_STATE_COMPLETED
    assert journal_kinds(clients, "run-1")[-1] == "request_event"
    read_back = (
        clients.ledger("reader-token")
        .GetAdmission(ledger_pb2.GetAdmissionRequest(run_id="run-1", request_id="req-1"))
        .ticket
    )
    assert read_back.execution_request.state == S.EXECUTION_REQUEST_STATE_COMPLETED


@pytest.mark.parametrize(
    ("override", "subject"),
    [
        ({"source_revision": "git:other"}, "source_revision"),
        ({"configuration_digest": digest_of("other")}, "configuration_digest"),
        ({"source_profile": "forge-worker/other"}, "source_profile"),
        ({"attempt_id": "run-1-attempt-2"}, "attempt_id"),
        ({"attempt_id": ""}, "attempt_id"),
    ],
)
def test_claim_repeats_the_source_checks(
    clients: LedgerClients, engine: Engine, override: dict[str, str], subject: str
) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    counts = row_counts(engine)
    error = expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "CLAIM_CHECK_FAILED",
        lambda: execution(clients).ClaimExecutionRequest(claim_request(clients, exr, **override)),
    )
    assert [v.subject for v in error.precondition_violations] == [subject]
    assert row_counts(engine) == counts
    state = execution(clients, "reader-token").GetExecutionRequest(
        execution_pb2.GetExecutionRequestRequest(execution_request_id=exr)
    )
    assert state.execution_request.state == S.EXECUTION_REQUEST_STATE_QUEUED


def test_an_expired_lease_cannot_be_claimed_or_written(
    clients: LedgerClients, clock: Clock
) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    execution(clients).ClaimExecutionRequest(claim_request(clients, exr))
    clock.advance(ticket.execution_request.lease.seconds)
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "LEASE_EXPIRED",
        lambda: execution(clients).RecordCommand(
            execution_pb2.RecordCommandRequest(
                execution_request_id=exr,
                lease_generation=1,
                command_id="c-new",
                command_digest=digest_of("c"),
            )
        ),
    )
    # Owner loss is not requeued: the request stays claimed for explicit reconciliation.
    state = execution(clients, "reader-token").GetExecutionRequest(
        execution_pb2.GetExecutionRequestRequest(execution_request_id=exr)
    )
    assert state.execution_request.state == S.EXECUTION_REQUEST_STATE_CLAIMED


def test_only_the_lease_owner_may_write(clients: LedgerClients) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    execution(clients).ClaimExecutionRequest(claim_request(clients, exr))
    other = execution(clients, "worker2-token")
    expect_error(
        grpc.StatusCode.PERMISSION_DENIED,
        "NOT_LEASE_OWNER",
        lambda: other.CompleteExecutionRequest(
            execution_pb2.CompleteExecutionRequestRequest(
                execution_request_id=exr, lease_generation=1
            )
        ),
    )
    expect_error(
        grpc.StatusCode.PERMISSION_DENIED,
        "NOT_LEASE_OWNER",
        lambda: other.FailExecutionRequest(
            execution_pb2.FailExecutionRequestRequest(
                execution_request_id=exr, lease_generation=1, reason="x"
            )
        ),
    )


# --- the command ledger: the spec's example ------------------------------------------------------


def test_command_ledger_eleven_of_twenty_two(clients: LedgerClients, engine: Engine) -> None:
    seeded, ticket = admitted(clients)
    usage = (
        execution(clients, "reader-token")
        .GetCommandUsage(execution_pb2.GetCommandUsageRequest(run_id="run-1"))
        .usage
    )
    assert (usage.used, usage.limit) == (11, 22)  # stays 11 through admission
    old_receipts = [
        e.hash for e in seeded.entries if e.kind == common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED
    ]
    exr = ticket.execution_request.execution_request_id
    worker = execution(clients)
    worker.ClaimExecutionRequest(claim_request(clients, exr))

    def record(command_id: str, generation: int = 1) -> execution_pb2.RecordCommandResponse:
        return worker.RecordCommand(
            execution_pb2.RecordCommandRequest(
                execution_request_id=exr,
                lease_generation=generation,
                command_id=command_id,
                command_digest=digest_of(command_id),
            )
        )

    assert record("new-1").usage.used == 12
    second = record("new-2")
    assert (second.charged, second.usage.used, second.usage.limit) == (True, 13, 22)
    again = record("new-2")  # the same completed command again charges nothing
    assert (again.charged, again.usage.used, again.journal_sequence) == (
        False,
        13,
        second.journal_sequence,
    )
    entries = whole_journal(clients.ledger("reader-token"), "run-1")
    assert [e.hash for e in entries if e.kind == common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED][
        :11
    ] == old_receipts
    for index in range(3, 12):
        record(f"new-{index}")
    assert (
        worker.GetCommandUsage(execution_pb2.GetCommandUsageRequest(run_id="run-1")).usage.used
        == 22
    )
    before = row_counts(engine)
    error = expect_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED, "COMMAND_LIMIT_REACHED", lambda: record("new-12")
    )
    assert error.metadata == {"used": "22", "limit": "22"}
    assert row_counts(engine) == before
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "LEASE_GENERATION_STALE",
        lambda: record("new-13", generation=2),
    )


def test_native_appends_cannot_route_around_leases_or_the_command_limit(
    clients: LedgerClients, engine: Engine
) -> None:
    seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    writer = clients.ledger()

    def append(kind: int, payload: dict[str, object]) -> ledger_pb2.AppendJournalEntryResponse:
        head = writer.GetRun(ledger_pb2.GetRunRequest(run_id="run-1")).head.hash
        return writer.AppendJournalEntry(
            ledger_pb2.AppendJournalEntryRequest(
                run_id="run-1", expected_head_hash=head, kind=kind, payload_json=json.dumps(payload)
            )
        )

    counts = row_counts(engine)
    for kind, payload in (
        (
            common_pb2.JOURNAL_ENTRY_KIND_WORKER_CLAIMED,
            {"execution_request_id": exr, "lease_generation": 1},
        ),
        (
            common_pb2.JOURNAL_ENTRY_KIND_REQUEST_FAILED,
            {"execution_request_id": exr, "reason": "x"},
        ),
        (
            common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED,
            {"command_id": "c-x", "execution_request_id": exr},
        ),
    ):
        expect_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            "EXECUTION_REQUEST_FENCED",
            lambda kind=kind, payload=payload: append(kind, payload),
        )
    # While the continuity request is outstanding, no native command runs outside its lease.
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "CONTINUITY_TICKET_OUTSTANDING",
        lambda: append(common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED, {"command_id": "c-y"}),
    )
    assert row_counts(engine) == counts
    # Once it is no longer outstanding, a native command is charged like any other.
    execution(clients, "admin-token").CancelExecutionRequest(
        execution_pb2.CancelExecutionRequestRequest(execution_request_id=exr, reason="test")
    )
    expect_error(
        grpc.StatusCode.ALREADY_EXISTS,
        "COMMAND_ALREADY_RECORDED",
        lambda: append(common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED, {"command_id": "cmd-01"}),
    )
    for index in range(11):
        append(common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED, {"command_id": f"native-{index}"})
    expect_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "COMMAND_LIMIT_REACHED",
        lambda: append(common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED, {"command_id": "native-23"}),
    )
    assert seeded.run_id == "run-1"
