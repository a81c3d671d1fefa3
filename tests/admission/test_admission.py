"""Invalid-read continuity v1 admission end to end: four real services, SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import (
    admission_pb2,
    common_pb2,
)
from services.demo.seed import load_fixture, seed_held_run
from tests.admission.conftest import Stack, rpc_reason, submission
from tests.errors import expect_error
from tests.support import row_counts, whole_journal

FIXTURE = load_fixture("v1_basic")


def kinds(stack: Stack, run_id: str) -> list[str]:
    entries = whole_journal(stack.ledger_stub("reader-token"), run_id)
    return [
        common_pb2.JournalEntryKind.Name(e.kind).removeprefix("JOURNAL_ENTRY_KIND_").lower()
        for e in entries
    ]


def test_admit_read_back_and_resubmit(stack: Stack) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    candidate = stack.candidate_of("run-1")
    assert candidate.eligible, candidate.holds
    request = submission(candidate)
    first = stack.admissions().RequestInvalidReadContinuity(request)
    assert first.created
    ticket = first.ticket
    assert ticket.operator_identity == "olga-operator"
    assert ticket.digests == candidate.digests
    assert ticket.execution_request.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED
    assert ticket.execution_request.checkpoint_digest == candidate.proof.derived_checkpoint_digest
    assert kinds(stack, "run-1")[-2:] == ["migration_settlement", "ownership_claim"]
    read_back = stack.admissions("reader-token").GetInvalidReadContinuity(
        admission_pb2.GetInvalidReadContinuityRequest(run_id="run-1", request_id="req-1")
    )
    assert read_back.ticket == ticket
    again = stack.admissions().RequestInvalidReadContinuity(request)
    assert not again.created and again.ticket == ticket
    assert kinds(stack, "run-1").count("migration_settlement") == 1
    # After admission the candidate is held: a queued claim exists; it supplies no second claim.
    after = stack.candidate_of("run-1")
    assert not after.eligible
    assert common_pb2.HOLD_REASON_CLAIM_OUTSTANDING in [h.reason for h in after.holds]


BAD_INPUT: list[tuple[str, dict[str, object], str, set[str]]] = [
    ("version", {"version": 2}, "VERSION_UNSUPPORTED", {"version"}),
    (
        "ack-grant",
        {"acknowledge_no_new_grant": False},
        "ACKNOWLEDGEMENT_REQUIRED",
        {"acknowledge_no_new_grant"},
    ),
    (
        "ack-all",
        {
            "acknowledge_no_new_grant": False,
            "acknowledge_original_consumption": False,
            "acknowledge_renewed_same_attempt_lease": False,
        },
        "ACKNOWLEDGEMENT_REQUIRED",
        {
            "acknowledge_no_new_grant",
            "acknowledge_original_consumption",
            "acknowledge_renewed_same_attempt_lease",
        },
    ),
    ("window-zero", {"valid_for_seconds": 0}, "FIELD_INVALID", {"valid_for_seconds"}),
    ("window-long", {"valid_for_seconds": 7201}, "FIELD_INVALID", {"valid_for_seconds"}),
    ("request-id", {"request_id": "has spaces"}, "FIELD_INVALID", {"request_id"}),
    (
        "digest",
        {"digests": common_pb2.ContinuityDigests(candidate_digest="sha256:xyz")},
        "FIELD_INVALID",
        {
            "digests.candidate_digest",
            "digests.run_digest",
            "digests.journal_digest",
            "digests.policy_digest",
        },
    ),
]


@pytest.mark.parametrize(
    ("name", "overrides", "reason", "fields"), BAD_INPUT, ids=[case[0] for case in BAD_INPUT]
)
def test_bad_input_is_refused_and_writes_nothing(
    stack: Stack,
    engine: Engine,
    name: str,
    overrides: dict[str, object],
    reason: str,
    fields: set[str],
) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    candidate = stack.candidate_of("run-1")
    counts = row_counts(engine)
    error = expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        reason,
        lambda: stack.admissions().RequestInvalidReadContinuity(submission(candidate, **overrides)),
    )
    assert {v.field for v in error.field_violations} == fields
    assert row_counts(engine) == counts


def test_stale_digests_are_named_and_nothing_is_written(stack: Stack, engine: Engine) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    candidate = stack.candidate_of("run-1")
    stack.set_policy(window_seconds=1200)  # the policy moves after the operator read the candidate
    counts = row_counts(engine)
    error = expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "CANDIDATE_DIGEST_STALE",
        lambda: stack.admissions().RequestInvalidReadContinuity(submission(candidate)),
    )
    assert {v.subject for v in error.precondition_violations} == {
        "policy_digest",
        "candidate_digest",
    }
    assert all(v.type == "DIGEST" for v in error.precondition_violations)
    assert row_counts(engine) == counts


def test_a_held_candidate_supplies_no_claim(stack: Stack, engine: Engine) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")  # policy stays disabled
    candidate = stack.candidate_of("run-1")
    assert not candidate.eligible
    counts = row_counts(engine)
    error = expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "CANDIDATE_HELD",
        lambda: stack.admissions().RequestInvalidReadContinuity(submission(candidate)),
    )
    assert "POLICY_DISABLED" in error.metadata["holds"].split(",")
    assert "POLICY" in error.metadata["requirements"].split(",")
    assert row_counts(engine) == counts


def test_idempotency_conflicts(stack: Stack, engine: Engine) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    candidate = stack.candidate_of("run-1")
    stack.admissions().RequestInvalidReadContinuity(submission(candidate))
    counts = row_counts(engine)
    expect_error(
        grpc.StatusCode.ALREADY_EXISTS,
        "REQUEST_ID_CONFLICT",
        lambda: stack.admissions().RequestInvalidReadContinuity(
            submission(candidate, valid_for_seconds=60)
        ),
    )
    expect_error(
        grpc.StatusCode.ALREADY_EXISTS,
        "REQUEST_ID_OWNED_BY_ANOTHER_IDENTITY",
        lambda: stack.admissions("operator2-token").RequestInvalidReadContinuity(
            submission(candidate)
        ),
    )
    # Another identity with its own request id gets no second ticket for the same consumed graph.
    with pytest.raises(grpc.RpcError) as caught:
        stack.admissions("operator2-token").RequestInvalidReadContinuity(
            submission(candidate, request_id="req-2")
        )
    assert rpc_reason(caught.value) in {"CANDIDATE_DIGEST_STALE", "CONSUMED_GRAPH_ALREADY_ADMITTED"}
    assert row_counts(engine) == counts


def _concurrently(count: int, work: Callable[[int], object]) -> tuple[list[object], list[str]]:
    results: list[object] = []
    refusals: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(count)

    def run(index: int) -> None:
        barrier.wait()
        try:
            outcome = work(index)
            with lock:
                results.append(outcome)
        except grpc.RpcError as error:
            with lock:
                refusals.append(rpc_reason(error))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, refusals


def test_sixty_four_identical_submissions_make_exactly_one_ticket(
    stack: Stack, engine: Engine
) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    request = submission(stack.candidate_of("run-1"))
    stub = stack.admissions()
    results, refusals = _concurrently(
        64, lambda _i: stub.RequestInvalidReadContinuity(request, timeout=120)
    )
    assert refusals == []
    responses = [
        r for r in results if isinstance(r, admission_pb2.RequestInvalidReadContinuityResponse)
    ]
    assert len(responses) == 64
    assert sum(r.created for r in responses) == 1
    assert len({r.ticket.SerializeToString() for r in responses}) == 1
    assert kinds(stack, "run-1").count("migration_settlement") == 1
    assert row_counts(engine)["admission_tickets"] == 1


def test_sixty_four_identities_get_exactly_one_ticket(stack: Stack, engine: Engine) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    candidate = stack.candidate_of("run-1")
    results, refusals = _concurrently(
        64,
        lambda i: stack.admissions(f"op-{i}-token").RequestInvalidReadContinuity(
            submission(candidate, request_id=f"req-{i}"), timeout=120
        ),
    )
    assert len(results) == 1
    assert set(refusals) <= {
        "CANDIDATE_DIGEST_STALE",
        "CONSUMED_GRAPH_ALREADY_ADMITTED",
        "CLAIM_OUTSTANDING",
        "JOURNAL_HEAD_STALE",
    }
    assert row_counts(engine)["admission_tickets"] == 1
    assert kinds(stack, "run-1").count("migration_settlement") == 1


def test_concurrent_admissions_across_runs_respect_the_pending_cap(
    stack: Stack, engine: Engine
) -> None:
    runs = [f"run-{index}" for index in range(6)]
    for run_id in runs:
        seed_held_run(stack.ledger_stub(), FIXTURE, run_id)
    stack.set_policy(pending_ticket_limit=2)
    candidates = {run_id: stack.candidate_of(run_id) for run_id in runs}
    stub = stack.admissions()
    results, refusals = _concurrently(
        len(runs),
        lambda i: stub.RequestInvalidReadContinuity(submission(candidates[runs[i]]), timeout=120),
    )
    assert len(results) == 2
    assert sorted(refusals) == ["PENDING_TICKET_LIMIT"] * 4
    assert row_counts(engine)["admission_tickets"] == 2


def test_only_execution_operators_submit(stack: Stack) -> None:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    candidate = stack.candidate_of("run-1")
    for token in ("admin-token", "reader-token", "worker-token", "writer-token"):
        expect_error(
            grpc.StatusCode.PERMISSION_DENIED,
            "ROLE_REQUIRED",
            lambda token=token: stack.admissions(token).RequestInvalidReadContinuity(
                submission(candidate)
            ),
        )
