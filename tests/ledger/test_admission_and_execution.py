"""The native admission transaction, fenced worker claims and the command ledger, through the
real ledger service on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import (
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    ledger_pb2,
    ledger_pb2_grpc,
    policy_pb2,
)
from services.demo.seed import CONFIGURATION_DIGEST, SeededRun, load_fixture, seed_held_run
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from shared.canonical import digest_of, sha256_digest
from shared.errors import from_rpc_error
from shared.qualification import DEFAULT_QUALIFIED_PROFILE
from shared.timeutil import to_timestamp
from tests.errors import expect_error
from tests.ledger.conftest import LedgerClients
from tests.support import row_counts, serve

FIXTURE = load_fixture("v1_basic")
DERIVED = b'{"derived": "checkpoint"}'
S = common_pb2.ExecutionRequestState


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
    with serve("ledger", bindings(Ledger(engine, clock))) as served:
        yield LedgerClients(served)


def enable_policy(clients: LedgerClients, **settings: object) -> common_pb2.Policy:
    current = clients.policy().GetPolicy(policy_pb2.GetPolicyRequest()).policy
    values: dict[str, object] = {"enabled": True, "window_seconds": 3600}
    values.update(settings)
    return (
        clients.policy()
        .PutPolicy(
            policy_pb2.PutPolicyRequest(
                expected_revision=current.revision, settings=common_pb2.PolicySettings(**values)
            )
        )
        .policy
    )


def execution(
    clients: LedgerClients, token: str = "worker-token"
) -> execution_pb2_grpc.ExecutionServiceStub:
    return execution_pb2_grpc.ExecutionServiceStub(clients.channel(token))


def seed(clients: LedgerClients, run_id: str = "run-1", **options: object) -> SeededRun:
    seeded = seed_held_run(clients.ledger(), FIXTURE, run_id, **options)  # type: ignore[arg-type]
    clients.ledger("service-token").PutBlob(ledger_pb2.PutBlobRequest(content=DERIVED))
    return seeded


def commit_request(
    clients: LedgerClients, seeded: SeededRun, request_id: str = "req-1", **overrides: object
) -> ledger_pb2.CommitAdmissionRequest:
    policy = clients.policy("reader-token").GetPolicy(policy_pb2.GetPolicyRequest()).policy
    fields: dict[str, object] = {
        "run_id": seeded.run_id,
        "request_id": request_id,
        "operator_identity": "olga-operator",
        "request_content_digest": digest_of({"request": request_id, "valid_for_seconds": 1800}),
        "expected_head_hash": seeded.head_hash,
        "policy_revision": policy.revision,
        "digests": common_pb2.ContinuityDigests(
            candidate_digest=digest_of("candidate"),
            run_digest=digest_of("run"),
            journal_digest=seeded.head_hash,
            policy_digest=policy.digest,
        ),
        "version": 1,
        "valid_for_seconds": 1800,
        "derived_checkpoint_digest": sha256_digest(DERIVED),
        "consumed_response_digest": seeded.response_digest,
        "witness_digest": digest_of("witness"),
    }
    fields.update(overrides)
    return ledger_pb2.CommitAdmissionRequest(**fields)  # type: ignore[arg-type]


def commit(
    clients: LedgerClients, request: ledger_pb2.CommitAdmissionRequest
) -> ledger_pb2.CommitAdmissionResponse:
    return clients.ledger("service-token").CommitAdmission(request)


def journal_kinds(clients: LedgerClients, run_id: str) -> list[str]:
    entries = (
        clients.ledger("reader-token")
        .ReadJournal(ledger_pb2.ReadJournalRequest(run_id=run_id, page_size=1000))
        .entries
    )
    return [
        common_pb2.JournalEntryKind.Name(e.kind).removeprefix("JOURNAL_ENTRY_KIND_").lower()
        for e in entries
    ]


def claim_request(
    clients: LedgerClients, execution_request_id: str, **overrides: object
) -> execution_pb2.ClaimExecutionRequestRequest:
    """A claim presenting the run's own source and its original attempt."""
    queued = execution(clients, "reader-token").GetExecutionRequest(
        execution_pb2.GetExecutionRequestRequest(execution_request_id=execution_request_id)
    )
    run = (
        clients.ledger("reader-token")
        .GetRun(ledger_pb2.GetRunRequest(run_id=queued.execution_request.run_id))
        .run
    )
    fields: dict[str, object] = {
        "execution_request_id": execution_request_id,
        "attempt_id": run.attempt_id,
        "source_revision": "git:4f1c2a9",
        "configuration_digest": CONFIGURATION_DIGEST,
        "source_profile": DEFAULT_QUALIFIED_PROFILE,
    }
    fields.update(overrides)
    return execution_pb2.ClaimExecutionRequestRequest(**fields)  # type: ignore[arg-type]


# --- the admission transaction ------------------------------------------------------------------


def test_admission_appends_settlement_and_adjacent_claim_and_queues_the_checkpoint(
    clients: LedgerClients,
) -> None:
    seeded = seed(clients)
    enable_policy(clients)
    before = journal_kinds(clients, "run-1")
    response = commit(clients, commit_request(clients, seeded))
    ticket = response.ticket
    assert response.created
    assert journal_kinds(clients, "run-1") == [*before, "migration_settlement", "ownership_claim"]
    assert ticket.claim_sequence == ticket.settlement_sequence + 1 == len(before) + 2
    queued = ticket.execution_request
    assert queued.state == S.EXECUTION_REQUEST_STATE_QUEUED and queued.lease.generation == 0
    assert queued.checkpoint_digest == sha256_digest(DERIVED)
    assert queued.attempt_id == seeded.attempt_id
    assert queued.lease.seconds == 900  # bounded by the frozen provider timeout
    entries = (
        clients.ledger("reader-token")
        .ReadJournal(ledger_pb2.ReadJournalRequest(run_id="run-1", page_size=1000))
        .entries
    )
    assert {e.actor for e in entries[-2:]} == {"olga-operator"}  # the operator, not the service
    # The old claim and deadline stay recorded unchanged: the prefix is byte-identical.
    assert [e.hash for e in entries[: len(before)]] == [e.hash for e in seeded.entries]
    read_back = clients.ledger("reader-token").GetAdmission(
        ledger_pb2.GetAdmissionRequest(run_id="run-1", request_id="req-1")
    )
    assert read_back.ticket == ticket


def test_identical_repeat_returns_the_stored_ticket_and_writes_nothing(
    clients: LedgerClients, engine: Engine
) -> None:
    seeded = seed(clients)
    enable_policy(clients)
    first = commit(clients, commit_request(clients, seeded))
    counts = row_counts(engine)
    # The head has moved since: an identical repeat must still get the stored ticket.
    again = commit(
        clients, commit_request(clients, seeded, policy_revision=first.ticket.policy_revision)
    )
    assert not again.created and again.ticket == first.ticket
    assert row_counts(engine) == counts


def test_conflicts_are_refused_and_write_nothing(clients: LedgerClients, engine: Engine) -> None:
    seeded = seed(clients)
    enable_policy(clients)
    commit(clients, commit_request(clients, seeded))
    counts = row_counts(engine)
    expect_error(
        grpc.StatusCode.ALREADY_EXISTS,
        "REQUEST_ID_CONFLICT",
        lambda: commit(
            clients, commit_request(clients, seeded, request_content_digest=digest_of("other"))
        ),
    )
    expect_error(
        grpc.StatusCode.ALREADY_EXISTS,
        "REQUEST_ID_OWNED_BY_ANOTHER_IDENTITY",
        lambda: commit(clients, commit_request(clients, seeded, operator_identity="otto-operator")),
    )
    expect_error(
        grpc.StatusCode.ALREADY_EXISTS,
        "CONSUMED_GRAPH_ALREADY_ADMITTED",
        lambda: commit(
            clients,
            commit_request(clients, seeded, request_id="req-2", operator_identity="otto-operator"),
        ),
    )
    assert row_counts(engine) == counts


@pytest.mark.parametrize(
    ("prepare", "code", "reason"),
    [
        ("policy-disabled", grpc.StatusCode.FAILED_PRECONDITION, "POLICY_DISABLED"),
        ("policy-moved", grpc.StatusCode.FAILED_PRECONDITION, "POLICY_REVISION_CHANGED"),
        ("stale-head", grpc.StatusCode.ABORTED, "JOURNAL_HEAD_STALE"),
        ("no-derived-blob", grpc.StatusCode.FAILED_PRECONDITION, "DERIVED_CHECKPOINT_MISSING"),
        ("bad-version", grpc.StatusCode.INVALID_ARGUMENT, "ADMISSION_INVALID"),
        ("window-too-long", grpc.StatusCode.INVALID_ARGUMENT, "ADMISSION_INVALID"),
        ("v2-not-allowed", grpc.StatusCode.FAILED_PRECONDITION, "POLICY_DISABLED"),
        ("unknown-run", grpc.StatusCode.NOT_FOUND, "RUN_NOT_FOUND"),
    ],
)
def test_refusals_write_nothing(
    clients: LedgerClients, engine: Engine, prepare: str, code: grpc.StatusCode, reason: str
) -> None:
    seeded = seed(clients)
    overrides: dict[str, object] = {}
    if prepare != "policy-disabled":
        enable_policy(clients)
    if prepare == "policy-moved":
        request = commit_request(clients, seeded)
        enable_policy(clients, window_seconds=60)
    elif prepare == "stale-head":
        overrides["expected_head_hash"] = seeded.entries[-2].hash
    elif prepare == "no-derived-blob":
        overrides["derived_checkpoint_digest"] = sha256_digest(b"never stored")
    elif prepare == "bad-version":
        overrides["version"] = 3
    elif prepare == "window-too-long":
        overrides["valid_for_seconds"] = 7201
    elif prepare == "v2-not-allowed":
        overrides["version"] = 2
    elif prepare == "unknown-run":
        overrides["run_id"] = "run-unknown"
    if prepare != "policy-moved":
        request = commit_request(clients, seeded, **overrides)
    counts = row_counts(engine)
    expect_error(code, reason, lambda: commit(clients, request))
    assert row_counts(engine) == counts


@pytest.mark.parametrize(
    ("requested", "window", "provider_timeout", "deadline_in", "expected"),
    [
        (1800, 3600, 900, None, 900),
        (300, 3600, 900, None, 300),
        (3600, 600, 900, None, 600),
        (7200, 7200, 10_000, None, 7200),
        (3600, 3600, 900, 120, 120),
    ],
)
def test_lease_is_the_minimum_of_its_bounds(
    clients: LedgerClients,
    clock: Clock,
    requested: int,
    window: int,
    provider_timeout: int,
    deadline_in: int | None,
    expected: int,
) -> None:
    deadline = None
    if deadline_in is not None:
        deadline = to_timestamp(
            (clock.now + timedelta(seconds=deadline_in)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        )
    seeded = seed(clients, provider_timeout_seconds=provider_timeout, active_deadline=deadline)
    enable_policy(clients, window_seconds=window)
    ticket = commit(clients, commit_request(clients, seeded, valid_for_seconds=requested)).ticket
    assert ticket.execution_request.lease.seconds == expected
    expires = ticket.execution_request.lease.expires_at.ToDatetime(tzinfo=UTC)
    assert expires == clock.now + timedelta(seconds=expected)


def test_unsupported_time_budget_and_passed_deadline_refuse_admission(
    clients: LedgerClients, clock: Clock, engine: Engine
) -> None:
    enable_policy(clients)
    old = seed(clients, "run-old", time_budget_protocol="wall-clock-v0")
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "TIME_BUDGET_UNSUPPORTED",
        lambda: commit(clients, commit_request(clients, old)),
    )
    late = seed_held_run(
        clients.ledger(),
        load_fixture("v1_first_turn"),
        "run-late",
        active_deadline=to_timestamp(
            (clock.now - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        ),
    )
    counts = row_counts(engine)
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "ACTIVE_DEADLINE_PASSED",
        lambda: commit(clients, commit_request(clients, late)),
    )
    assert row_counts(engine) == counts


def test_sixty_four_concurrent_identical_commits_make_one_ticket(
    clients: LedgerClients, engine: Engine
) -> None:
    seeded = seed(clients)
    enable_policy(clients)
    request = commit_request(clients, seeded)
    results: list[ledger_pb2.CommitAdmissionResponse] = []
    errors: list[Exception] = []
    lock = threading.Lock()
    barrier = threading.Barrier(64)

    def submit() -> None:
        stub = ledger_pb2_grpc.LedgerServiceStub(clients.channel("service-token"))
        barrier.wait()
        try:
            response = stub.CommitAdmission(request)
            with lock:
                results.append(response)
        except Exception as error:  # noqa: BLE001 - collected and asserted below
            with lock:
                errors.append(error)

    threads = [threading.Thread(target=submit) for _ in range(64)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sum(r.created for r in results) == 1
    assert len({r.ticket.SerializeToString() for r in results}) == 1
    assert journal_kinds(clients, "run-1").count("migration_settlement") == 1
    assert row_counts(engine)["admission_tickets"] == 1


def test_concurrent_admissions_across_runs_never_exceed_the_pending_cap(
    clients: LedgerClients, engine: Engine
) -> None:
    runs = [seed(clients, f"run-{index}") for index in range(8)]
    enable_policy(clients, pending_ticket_limit=3)
    requests = [commit_request(clients, seeded) for seeded in runs]
    outcomes: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(requests))

    def submit(request: ledger_pb2.CommitAdmissionRequest) -> None:
        stub = ledger_pb2_grpc.LedgerServiceStub(clients.channel("service-token"))
        barrier.wait()
        try:
            stub.CommitAdmission(request)
            outcome = "ok"
        except grpc.RpcError as error:
            outcome = from_rpc_error(error).reason
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=submit, args=(r,)) for r in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["PENDING_TICKET_LIMIT"] * 5 + ["ok"] * 3
    assert row_counts(engine)["admission_tickets"] == 3


# --- worker claims and leases ---------------------------------------------------------------------


def admitted(
    clients: LedgerClients, **policy: object
) -> tuple[SeededRun, ledger_pb2.AdmissionTicket]:
    seeded = seed(clients)
    enable_policy(clients, **policy)
    return seeded, commit(clients, commit_request(clients, seeded)).ticket


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


def test_policy_revocation_stops_dispatch(clients: LedgerClients) -> None:
    _seeded, ticket = admitted(clients)
    exr = ticket.execution_request.execution_request_id
    enable_policy(clients, enabled=False)
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "POLICY_REVOKED",
        lambda: execution(clients).ClaimExecutionRequest(claim_request(clients, exr)),
    )
    enable_policy(clients)
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "POLICY_REVISION_CHANGED",
        lambda: execution(clients).ClaimExecutionRequest(claim_request(clients, exr)),
    )


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
    entries = (
        clients.ledger("reader-token")
        .ReadJournal(ledger_pb2.ReadJournalRequest(run_id="run-1", page_size=1000))
        .entries
    )
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


# --- atomicity of what the transaction stores ----------------------------------------------------


def test_the_derived_checkpoint_is_stored_only_with_the_settlement(
    clients: LedgerClients, engine: Engine
) -> None:
    seeded = seed_held_run(clients.ledger(), FIXTURE, "run-1")
    enable_policy(clients)
    derived = b'{"derived": "only-with-the-settlement"}'
    stale = commit_request(
        clients,
        seeded,
        expected_head_hash=seeded.entries[-2].hash,
        derived_checkpoint=derived,
        derived_checkpoint_digest=sha256_digest(derived),
    )
    counts = row_counts(engine)
    expect_error(grpc.StatusCode.ABORTED, "JOURNAL_HEAD_STALE", lambda: commit(clients, stale))
    expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "ADMISSION_INVALID",
        lambda: commit(clients, commit_request(clients, seeded, derived_checkpoint=b"other bytes")),
    )
    assert row_counts(engine) == counts
    ticket = commit(
        clients,
        commit_request(
            clients,
            seeded,
            derived_checkpoint=derived,
            derived_checkpoint_digest=sha256_digest(derived),
        ),
    ).ticket
    stored = clients.ledger("reader-token").GetBlob(
        ledger_pb2.GetBlobRequest(digest=ticket.derived_checkpoint_digest)
    )
    assert stored.content == derived


@pytest.mark.parametrize("operation", ["admission", "claim"])
def test_a_revocation_committed_while_waiting_for_the_policy_lock_is_seen(
    clients: LedgerClients, engine: Engine, operation: str
) -> None:
    """The policy write inserts a new revision; a transaction that queued behind it must judge
    against that new revision, not the one it first locked."""
    from services.ledger.domain.policy import PolicyRevision, PolicySettings, policy_digest
    from services.ledger.repository import policy as repository

    seeded = seed(clients)
    enable_policy(clients)
    request = commit_request(clients, seeded)
    exr = ""
    if operation == "claim":
        exr = commit(clients, request).ticket.execution_request.execution_request_id
    outcome: list[str] = []

    def act() -> None:
        try:
            if operation == "admission":
                commit(clients, request)
            else:
                execution(clients).ClaimExecutionRequest(claim_request(clients, exr))
            outcome.append("ok")
        except grpc.RpcError as error:
            outcome.append(from_rpc_error(error).reason)

    with engine.connect() as connection, connection.begin():
        current = repository.lock_current_policy(connection)
        disabled = PolicySettings(False, 3600, 50, 500, False, False, False)
        revision = current.revision + 1
        repository.insert_policy_revision(
            connection,
            PolicyRevision(
                revision,
                disabled,
                "alice-admin",
                "2026-12-01T12:00:00.000000Z",
                policy_digest(revision, disabled),
            ),
        )
        waiter = threading.Thread(target=act)
        waiter.start()
        waiter.join(timeout=1.5)
        assert waiter.is_alive(), "the second transaction should be waiting for the policy lock"
    waiter.join(timeout=60)
    assert outcome == ["POLICY_DISABLED" if operation == "admission" else "POLICY_REVOKED"]


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
    expect_error(
        grpc.StatusCode.ALREADY_EXISTS,
        "COMMAND_ALREADY_RECORDED",
        lambda: append(common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED, {"command_id": "cmd-01"}),
    )
    assert row_counts(engine) == counts
    for index in range(11):
        append(common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED, {"command_id": f"native-{index}"})
    expect_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "COMMAND_LIMIT_REACHED",
        lambda: append(common_pb2.JOURNAL_ENTRY_KIND_COMMAND_EXECUTED, {"command_id": "native-23"}),
    )
    assert seeded.run_id == "run-1"
