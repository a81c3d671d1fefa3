"""The execution-time rules (ADR 0014) through the real ledger service on SQLite and PostgreSQL:
what stops a continuation (revocation, a changed source, unknown effects, cancellation, expiry)
and what does not (any other policy edit)."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, execution_pb2, ledger_pb2
from services.demo.seed import CONFIGURATION_DIGEST
from shared.continuity.canonical import digest_of
from shared.continuity.qualification import (
    DEFAULT_QUALIFIED_PROFILE,
    PROFILES_FILE_VARIABLE,
)
from tests.errors import expect_error
from tests.ledger.admission_support import (
    S,
    admitted,
    claim_request,
    commit,
    commit_request,
    enable_policy,
    execution,
    journal_kinds,
    seed,
)
from tests.ledger.conftest import Clock, LedgerClients
from tests.support import registry_of_other_migration_code, row_counts, whole_journal

FP = grpc.StatusCode.FAILED_PRECONDITION


def claimed_request(clients: LedgerClients, exr: str) -> common_pb2.ExecutionRequest:
    return execution(clients).ClaimExecutionRequest(claim_request(clients, exr)).execution_request


def record(
    clients: LedgerClients, claimed: common_pb2.ExecutionRequest, command_id: str, **extra: object
) -> execution_pb2.RecordCommandResponse:
    return execution(clients).RecordCommand(
        execution_pb2.RecordCommandRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=claimed.lease.generation,
            command_id=command_id,
            command_digest=digest_of(command_id),
            **extra,  # type: ignore[arg-type]
        )
    )


def complete(clients: LedgerClients, claimed: common_pb2.ExecutionRequest) -> object:
    return execution(clients).CompleteExecutionRequest(
        execution_pb2.CompleteExecutionRequestRequest(
            execution_request_id=claimed.execution_request_id,
            lease_generation=claimed.lease.generation,
        )
    )


def fail(
    clients: LedgerClients, claimed: common_pb2.ExecutionRequest
) -> common_pb2.ExecutionRequest:
    return (
        execution(clients)
        .FailExecutionRequest(
            execution_pb2.FailExecutionRequestRequest(
                execution_request_id=claimed.execution_request_id,
                lease_generation=claimed.lease.generation,
                reason="stopped",
            )
        )
        .execution_request
    )


def last_payload(clients: LedgerClients, run_id: str = "run-1") -> dict[str, object]:
    entries = whole_journal(clients.ledger("reader-token"), run_id)
    payload = json.loads(entries[-1].payload_json)
    assert isinstance(payload, dict)
    return payload


def state_of(clients: LedgerClients, exr: str) -> common_pb2.ExecutionRequest:
    return (
        execution(clients, "reader-token")
        .GetExecutionRequest(execution_pb2.GetExecutionRequestRequest(execution_request_id=exr))
        .execution_request
    )


# --- 1 policy edits ---------------------------------------------------------------------------


def test_policy_edits_that_keep_the_ticket_do_not_stop_it(clients: LedgerClients) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    # Larger caps, a shorter window, an unrelated switch: none revokes the ticket.
    enable_policy(clients, pending_ticket_limit=900, per_run_ticket_limit=70)
    enable_policy(clients, window_seconds=60, allow_pre_admission_recovery=True)
    claimed = claimed_request(clients, exr)
    enable_policy(clients, pending_ticket_limit=1000)
    assert record(clients, claimed, "cmd-new").charged
    complete(clients, claimed)
    assert state_of(clients, exr).state == S.EXECUTION_REQUEST_STATE_COMPLETED


def test_revocation_stops_the_claim_and_re_enabling_revives_nothing(
    clients: LedgerClients, engine: Engine
) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    disabled = enable_policy(clients, enabled=False)
    error = expect_error(FP, "POLICY_REVOKED", lambda: claimed_request(clients, exr))
    assert (error.metadata["policy_revision"], error.metadata["revoked"]) == (
        str(disabled.revision),
        "enabled",
    )
    # The refusal while entering the policy epoch: one admission-refusal record, and the request
    # is ineligible for automatic scheduling (it stays queued, claims nothing).
    assert journal_kinds(clients, "run-1")[-1] == "admission_refusal"
    assert last_payload(clients)["reason"] == "POLICY_REVOKED"
    parked = state_of(clients, exr)
    assert (parked.state, parked.admission_refusal) == (
        S.EXECUTION_REQUEST_STATE_QUEUED,
        "POLICY_REVOKED",
    )
    enable_policy(clients)
    counts = row_counts(engine)
    error = expect_error(FP, "POLICY_REVOKED", lambda: claimed_request(clients, exr))
    # Still the revision that revoked it; the record is written once per request.
    assert error.metadata["policy_revision"] == str(disabled.revision)
    assert row_counts(engine) == counts


def test_revocation_stops_every_write_but_the_failure_report(clients: LedgerClients) -> None:
    _seeded, ticket = admitted(clients)
    claimed = claimed_request(clients, ticket.execution_request.execution_request_id)
    enable_policy(clients, enabled=False)
    expect_error(FP, "POLICY_REVOKED", lambda: record(clients, claimed, "cmd-new"))
    expect_error(FP, "POLICY_REVOKED", lambda: complete(clients, claimed))
    # The worker reports that it stopped; the failure names why instead of being refused.
    assert fail(clients, claimed).state == S.EXECUTION_REQUEST_STATE_FAILED
    assert last_payload(clients)["stop_reasons"] == ["POLICY_REVOKED"]


def test_turning_off_the_tickets_switch_revokes_it(clients: LedgerClients) -> None:
    seeded = seed(clients)
    enable_policy(clients, allow_unavailable_source_observations=True)
    ticket = commit(clients, commit_request(clients, seeded, version=2)).ticket
    enable_policy(clients, allow_unavailable_source_observations=False)
    error = expect_error(
        FP,
        "POLICY_REVOKED",
        lambda: claimed_request(clients, ticket.execution_request.execution_request_id),
    )
    assert error.metadata["revoked"] == "allow_unavailable_source_observations"


# --- 2 changed source, unknown effects, cancellation -------------------------------------------


def test_a_write_presenting_another_source_is_refused(clients: LedgerClients) -> None:
    _seeded, ticket = admitted(clients)
    claimed = claimed_request(clients, ticket.execution_request.execution_request_id)
    source = {
        "source_revision": "git:4f1c2a9",
        "configuration_digest": CONFIGURATION_DIGEST,
        "source_profile": DEFAULT_QUALIFIED_PROFILE,
        "attempt_id": claimed.attempt_id,
    }
    assert record(clients, claimed, "cmd-a", source=execution_pb2.WorkerSource(**source)).charged
    changed = execution_pb2.WorkerSource(**{**source, "source_revision": "git:other"})
    error = expect_error(
        FP, "WORKER_SOURCE_CHANGED", lambda: record(clients, claimed, "cmd-b", source=changed)
    )
    assert error.metadata["mismatched"] == "source_revision"


def test_a_registry_for_other_migration_code_stops_the_claim(
    clients: LedgerClients, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Qualification is re-checked at the claim against the installed profile digest (ADR 0023):
    the registered profile naming other migration code refuses it, saying which part differs."""
    _seeded, ticket = admitted(clients)
    other = "sha256:" + "cd" * 32
    registry = registry_of_other_migration_code(tmp_path, other)
    monkeypatch.setenv(PROFILES_FILE_VARIABLE, str(registry))
    error = expect_error(
        FP,
        "PROFILE_NOT_QUALIFIED",
        lambda: claimed_request(clients, ticket.execution_request.execution_request_id),
    )
    assert f"migration code differs (registered {other}, installed " in error.message
    monkeypatch.delenv(PROFILES_FILE_VARIABLE)
    assert claimed_request(clients, ticket.execution_request.execution_request_id).lease.generation


def test_a_new_unknown_tool_outcome_stops_execution(clients: LedgerClients) -> None:
    _seeded, ticket = admitted(clients)
    claimed = claimed_request(clients, ticket.execution_request.execution_request_id)
    # The worker records, under its lease, an outcome it cannot know (a platform writer's native
    # tool row is refused while the ticket is outstanding: tests/ledger/test_outstanding_ticket.py)
    writer = clients.ledger("worker-token")
    head = writer.GetRun(ledger_pb2.GetRunRequest(run_id="run-1")).head.hash
    lease = {
        "execution_request_id": claimed.execution_request_id,
        "lease_generation": claimed.lease.generation,
    }
    writer.AppendJournalEntry(
        ledger_pb2.AppendJournalEntryRequest(
            run_id="run-1",
            expected_head_hash=head,
            kind=common_pb2.JOURNAL_ENTRY_KIND_TOOL_OUTCOME,
            payload_json=json.dumps({"call_id": "call-9", "status": "unknown", **lease}),
        )
    )
    error = expect_error(
        FP, "UNKNOWN_EFFECT_OUTSTANDING", lambda: record(clients, claimed, "cmd-new")
    )
    assert error.metadata["call_ids"] == "call-9"
    expect_error(FP, "UNKNOWN_EFFECT_OUTSTANDING", lambda: complete(clients, claimed))
    fail(clients, claimed)
    assert last_payload(clients)["stop_reasons"] == ["UNKNOWN_EFFECT_OUTSTANDING"]


def test_cancellation_by_the_operator_or_an_administrator(
    clients: LedgerClients, engine: Engine
) -> None:
    def cancel(exr: str, token: str) -> common_pb2.ExecutionRequest:
        return (
            execution(clients, token)
            .CancelExecutionRequest(
                execution_pb2.CancelExecutionRequestRequest(
                    execution_request_id=exr, reason="operator stopped it"
                )
            )
            .execution_request
        )

    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    counts = row_counts(engine)
    # Another operator, or a worker, may not cancel it; nothing is written.
    expect_error(
        grpc.StatusCode.PERMISSION_DENIED,
        "CANCEL_NOT_PERMITTED",
        lambda: cancel(exr, "operator2-token"),
    )
    expect_error(
        grpc.StatusCode.PERMISSION_DENIED, "ROLE_REQUIRED", lambda: cancel(exr, "worker-token")
    )
    assert row_counts(engine) == counts
    claimed = claimed_request(clients, exr)
    # The operator who admitted it cancels the claimed request: terminal, fenced for ever.
    assert cancel(exr, "operator-token").state == S.EXECUTION_REQUEST_STATE_CANCELLED
    assert journal_kinds(clients, "run-1")[-1] == "request_event"
    assert last_payload(clients)["event"] == "cancelled"
    journal = journal_kinds(clients, "run-1")
    assert cancel(exr, "admin-token").state == S.EXECUTION_REQUEST_STATE_CANCELLED
    assert journal_kinds(clients, "run-1") == journal  # a repeat reads it back
    expect_error(FP, "EXECUTION_REQUEST_CANCELLED", lambda: record(clients, claimed, "cmd-new"))
    expect_error(FP, "EXECUTION_REQUEST_CANCELLED", lambda: complete(clients, claimed))


def test_a_finished_request_is_not_cancellable(clients: LedgerClients) -> None:
    _seeded, ticket = admitted(clients)
    claimed = claimed_request(clients, ticket.execution_request.execution_request_id)
    complete(clients, claimed)
    error = expect_error(
        FP,
        "EXECUTION_REQUEST_NOT_CANCELLABLE",
        lambda: execution(clients, "admin-token").CancelExecutionRequest(
            execution_pb2.CancelExecutionRequestRequest(
                execution_request_id=claimed.execution_request_id, reason="late"
            )
        ),
    )
    assert error.metadata["state"] == "completed"


# --- 4 expired queued requests ----------------------------------------------------------------


def test_a_cap_filled_with_expired_tickets_admits_again(
    clients: LedgerClients, clock: Clock
) -> None:
    first, ticket = admitted(clients, pending_ticket_limit=1)
    second = seed(clients, "run-2")
    expect_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "PENDING_TICKET_LIMIT",
        lambda: commit(clients, commit_request(clients, second, "req-2")),
    )
    clock.advance(ticket.execution_request.lease.seconds)
    # The expired, never-claimed ticket frees its place inside the next admission.
    admitted_again = commit(clients, commit_request(clients, second, "req-2")).ticket
    assert admitted_again.execution_request.state == S.EXECUTION_REQUEST_STATE_QUEUED
    exr = ticket.execution_request.execution_request_id
    assert state_of(clients, exr).state == S.EXECUTION_REQUEST_STATE_EXPIRED
    assert last_payload(clients, first.run_id) == {
        "event": "expired",
        "execution_request_id": exr,
        "lease_expires_at": last_payload(clients, first.run_id)["lease_expires_at"],
        "lease_generation": 0,
    }
    expect_error(FP, "LEASE_EXPIRED", lambda: claimed_request(clients, exr))
    # An explicit sweep finds nothing more to expire.
    swept = execution(clients).ExpireExecutionRequests(
        execution_pb2.ExpireExecutionRequestsRequest()
    )
    assert list(swept.expired) == []


def test_a_refused_admission_still_expires_what_was_due(
    clients: LedgerClients, clock: Clock
) -> None:
    # The sweep runs inside the admission's transaction; a refusal rolls that back, and what was
    # due still expires (once) before the refusal is answered, as a sweep run first would have.
    first, ticket = admitted(clients)
    second = seed(clients, "run-2")
    clock.advance(ticket.execution_request.lease.seconds)
    stale = commit_request(clients, second, "req-2", expected_head_hash="sha256:" + "0" * 64)
    expect_error(grpc.StatusCode.ABORTED, "JOURNAL_HEAD_STALE", lambda: commit(clients, stale))
    exr = ticket.execution_request.execution_request_id
    assert state_of(clients, exr).state == S.EXECUTION_REQUEST_STATE_EXPIRED
    assert last_payload(clients, first.run_id)["event"] == "expired"
    assert journal_kinds(clients, first.run_id).count("request_event") == 1
    sweep = execution_pb2.ExpireExecutionRequestsRequest()
    assert list(execution(clients).ExpireExecutionRequests(sweep).expired) == []


def test_an_explicit_sweep_expires_a_queued_request(clients: LedgerClients, clock: Clock) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    clock.advance(ticket.execution_request.lease.seconds - 1)
    sweep = execution_pb2.ExpireExecutionRequestsRequest()
    assert list(execution(clients, "admin-token").ExpireExecutionRequests(sweep).expired) == []
    clock.advance(1)
    expired = execution(clients, "admin-token").ExpireExecutionRequests(sweep).expired
    assert [(e.execution_request_id, e.state) for e in expired] == [
        (exr, S.EXECUTION_REQUEST_STATE_EXPIRED)
    ]
