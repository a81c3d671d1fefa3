"""The native admission transaction through the real ledger service on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
from datetime import UTC, timedelta
from typing import Any

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import (
    common_pb2,
    ledger_pb2,
    ledger_pb2_grpc,
)
from services.demo.seed import load_fixture, seed_held_run
from services.reconstruction.domain import (
    OBSERVATION_UNAVAILABLE as UNAVAILABLE,
)
from services.reconstruction.domain import ReconstructionResult, reconstruct_invalid_read
from shared.continuity.canonical import canonical_bytes, digest_of, sha256_digest
from shared.continuity.sdk_epochs import PUBLISHED_SOURCE_READER
from shared.continuity.timeutil import to_timestamp
from shared.runtime.errors import from_rpc_error
from tests.errors import expect_error
from tests.ledger.admission_support import (
    DERIVED,
    FIXTURE,
    WITNESS,
    S,
    claim_request,
    commit,
    commit_request,
    derived_fields,
    enable_policy,
    execution,
    journal_kinds,
    reconstructed,
    seed,
)
from tests.ledger.conftest import Clock, LedgerClients
from tests.support import row_counts, whole_journal

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
    entries = whole_journal(clients.ledger("reader-token"), "run-1")
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


def _altered_limits() -> bytes:
    envelope = json.loads(DERIVED)
    envelope["state"]["limits"]["request_limit"] += 10
    envelope["state_digest"] = digest_of(envelope["state"])
    return canonical_bytes(envelope)


def _other_turn() -> ReconstructionResult:
    other = load_fixture("v1_first_turn")
    return reconstruct_invalid_read(other.checkpoint, other.raw_response, 1, other.consumed_at)


@pytest.mark.parametrize(
    ("alter", "field"),
    [
        # the version-2 reconstruction admitted as version 1
        (
            lambda: (reconstructed(2).derived_checkpoint, reconstructed(2).witness_digest, 1),
            "version",
        ),
        # another run's consumed turn: another source checkpoint (and response)
        (
            lambda: (_other_turn().derived_checkpoint, _other_turn().witness_digest, 1),
            "checkpoint_digest",
        ),
        # another consumption time than the journal's
        (
            lambda: (
                reconstruct_invalid_read(
                    FIXTURE.checkpoint, FIXTURE.raw_response, 1, "2026-10-20T11:00:00.000000Z"
                ).derived_checkpoint,
                WITNESS,
                1,
            ),
            "consumed_at",
        ),
        # a witness other than the one admitted
        (lambda: (DERIVED, digest_of("witness"), 1), "witness_digest"),
        # changed limits, sealed again
        (lambda: (_altered_limits(), WITNESS, 1), "state.limits"),
    ],
    ids=["version", "other-turn", "consumed-at", "witness", "limits"],
)
def test_the_derived_checkpoint_envelope_is_bound_to_the_journal(
    clients: LedgerClients, engine: Engine, alter: Any, field: str
) -> None:
    """The bytes hash to the digest sent with them, but do not continue this journal's consumed
    turn: the ledger compares the envelope with the rows it reads and refuses, writing nothing."""
    seeded = seed(clients)
    enable_policy(clients, allow_unavailable_source_observations=True)
    content, witness, version = alter()
    request = commit_request(
        clients,
        seeded,
        version=version,
        derived_checkpoint=content,
        derived_checkpoint_digest=sha256_digest(content),
        witness_digest=witness,
    )
    counts = row_counts(engine)
    error = expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "RECONSTRUCTION_MISMATCH",
        lambda: commit(clients, request),
    )
    assert field in error.message
    assert row_counts(engine) == counts


def _reading_the_source(source_reader: object) -> bytes:
    """The genuine version-2 derived checkpoint with a source reader's result appended, naming
    ``source_reader`` (None: naming none)."""
    envelope = json.loads(reconstructed(2).derived_checkpoint)
    rebuilt = envelope["reconstruction"]
    rebuilt["appended_results"].append(
        {"tool_call_id": "call_list_2", "tool_name": "list_files", "content": UNAVAILABLE}
    )
    if source_reader is not None:
        rebuilt["source_reader"] = source_reader
    return canonical_bytes(envelope)


@pytest.mark.parametrize(
    "source_reader",
    [None, {**PUBLISHED_SOURCE_READER.pin(), "source_hash": digest_of("another reader")}],
    ids=["absent", "another"],
)
def test_a_source_observation_must_name_the_pinned_source_reader(
    clients: LedgerClients, engine: Engine, source_reader: object
) -> None:
    """Step 9.8: a derived checkpoint that appends a source reader's result names the published
    historical source reader the ledger pins, or the commit is refused and writes nothing."""
    seeded = seed(clients)
    enable_policy(clients, allow_unavailable_source_observations=True)
    content = _reading_the_source(source_reader)
    request = commit_request(
        clients,
        seeded,
        version=2,
        derived_checkpoint=content,
        derived_checkpoint_digest=sha256_digest(content),
        witness_digest=reconstructed(2).witness_digest,
    )
    counts = row_counts(engine)
    error = expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "SOURCE_READER_UNPINNED",
        lambda: commit(clients, request),
    )
    assert error.metadata["expected"] == PUBLISHED_SOURCE_READER.source_hash
    assert row_counts(engine) == counts


@pytest.mark.parametrize(
    ("requested", "window", "provider_timeout", "deadline_in", "expected", "winner"),
    [
        (1800, 3600, 900, None, 900, "PROVIDER_TIMEOUT"),
        (300, 3600, 900, None, 300, "REQUESTED"),
        (3600, 600, 900, None, 600, "POLICY_WINDOW"),
        (7200, 7200, 10_000, None, 7200, "POLICY_WINDOW"),  # a tie: the bound that caps
        (900, 3600, 900, None, 900, "PROVIDER_TIMEOUT"),
        (3600, 3600, 900, 120, 120, "ACTIVE_DEADLINE"),
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
    winner: str,
) -> None:
    deadline = None
    if deadline_in is not None:
        deadline = to_timestamp(
            (clock.now + timedelta(seconds=deadline_in)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        )
    seeded = seed(clients, provider_timeout_seconds=provider_timeout, active_deadline=deadline)
    enable_policy(clients, window_seconds=window)
    # The run answer reports the window a grant made now may carry (what the console offers).
    grantable = _grantable(clients, "run-1")
    assert grantable == min(b for b in (window, provider_timeout, deadline_in) if b is not None)
    ticket = commit(clients, commit_request(clients, seeded, valid_for_seconds=requested)).ticket
    assert ticket.execution_request.lease.seconds == expected == min(requested, grantable)
    expires = ticket.execution_request.lease.expires_at.ToDatetime(tzinfo=UTC)
    assert expires == clock.now + timedelta(seconds=expected)
    # The ticket says which bounds applied and which one won, as stored with it.
    bounds = ticket.lease_bounds
    assert (bounds.requested_seconds, bounds.policy_window_seconds) == (requested, window)
    assert bounds.provider_timeout_seconds == provider_timeout
    assert bounds.deadline_remaining_seconds == (-1 if deadline_in is None else deadline_in)
    assert (bounds.maximum_seconds, bounds.granted_seconds) == (7200, expected)
    assert common_pb2.LeaseBound.Name(bounds.limited_by) == f"LEASE_BOUND_{winner}"
    read_back = clients.ledger().GetAdmission(
        ledger_pb2.GetAdmissionRequest(run_id="run-1", request_id=ticket.request_id)
    )
    assert read_back.ticket.lease_bounds == bounds


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
    first_turn = load_fixture("v1_first_turn")
    late = seed_held_run(
        clients.ledger(),
        first_turn,
        "run-late",
        active_deadline=to_timestamp(
            (clock.now - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        ),
    )
    counts = row_counts(engine)
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "ACTIVE_DEADLINE_PASSED",
        lambda: commit(clients, commit_request(clients, late, **derived_fields(first_turn))),
    )
    assert row_counts(engine) == counts
    # Neither run may be granted any lease, and its run answer says so.
    assert [_grantable(clients, run_id) for run_id in ("run-old", "run-late")] == [0, 0]


def _grantable(clients: LedgerClients, run_id: str) -> int:
    answer = clients.ledger().GetRun(ledger_pb2.GetRunRequest(run_id=run_id))
    return int(answer.grantable_lease_seconds)


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


# --- atomicity of what the transaction stores ----------------------------------------------------


def test_the_derived_checkpoint_is_stored_only_with_the_settlement(
    clients: LedgerClients, engine: Engine
) -> None:
    seeded = seed_held_run(clients.ledger(), FIXTURE, "run-1")
    enable_policy(clients)
    derived = DERIVED  # not stored by seed_held_run: only the settlement stores it
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


def test_each_committed_state_change_leaves_one_event_line(
    clients: LedgerClients, caplog: pytest.LogCaptureFixture
) -> None:
    """Successful writes are logged once (who, what, run and request, outcome); an identical
    repeat that writes nothing leaves no line."""
    seeded = seed(clients)
    with caplog.at_level("INFO", logger="forge.events"):
        enable_policy(clients)
        request = commit_request(clients, seeded)
        ticket = commit(clients, request).ticket
        commit(clients, request)  # the identical repeat
    events = [r.getMessage() for r in caplog.records if r.name == "forge.events"]
    assert [line.split()[0] for line in events] == ["event=policy_written", "event=admission"]
    admitted = events[1]
    assert f"run_id={ticket.run_id} request_id={ticket.request_id}" in admitted
    assert f"actor={ticket.operator_identity}" in admitted
    assert admitted.endswith("outcome=queued")
    assert f"lease_seconds={ticket.execution_request.lease.seconds}" in admitted


def test_an_absent_answer_is_not_logged_as_a_refusal_at_info(
    clients: LedgerClients, caplog: pytest.LogCaptureFixture
) -> None:
    """A read answered NOT_FOUND changed nothing: its line is DEBUG, so the INFO log keeps one
    line per state change."""
    with (
        caplog.at_level("DEBUG", logger="forge.server"),
        pytest.raises(grpc.RpcError) as absent,
    ):
        clients.ledger().GetRun(ledger_pb2.GetRunRequest(run_id="run-nobody-wrote"))
    assert absent.value.code() == grpc.StatusCode.NOT_FOUND
    refusals = [r for r in caplog.records if r.getMessage().startswith("refused method=")]
    assert [r.levelname for r in refusals] == ["DEBUG"], refusals
