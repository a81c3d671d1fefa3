"""Expiry on time (ADR 0039): a queued request past its lease reads ``expired`` at once, before
any sweep wrote it, in every read (the request, the run's requests, the listing and its state
filter, the admission's read-back); the ledger's scheduled sweep then writes the expiry, which
releases the never-claimed recovery with nobody calling ``ExpireExecutionRequests``; on
PostgreSQL one replica at a time sweeps. Four real services, SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, execution_pb2, ledger_pb2
from services.demo.seed import seed_held_run
from services.ledger.expiry_sweep import ExpirySweeper
from services.ledger.repository.execution_requests import take_sweep_turn
from services.ledger.service import Ledger
from tests.admission.conftest import Stack, submission
from tests.recovery.test_never_claimed import ADA, FIXTURE, execution, recovery_candidate

EXPIRED = common_pb2.EXECUTION_REQUEST_STATE_EXPIRED
QUEUED = common_pb2.EXECUTION_REQUEST_STATE_QUEUED


def admitted_for_one_second(stack: Stack) -> ledger_pb2.AdmissionTicket:
    seed_held_run(stack.ledger_stub(), FIXTURE, "run-1")
    stack.set_policy()
    candidate = stack.candidate_of("run-1")
    assert candidate.eligible, candidate.holds
    ticket = (
        stack.admissions(ADA)
        .RequestInvalidReadContinuity(submission(candidate, valid_for_seconds=1))
        .ticket
    )
    assert ticket.execution_request.state == QUEUED
    return ticket


def expired_entries(stack: Stack) -> list[common_pb2.JournalEntry]:
    page = stack.ledger_stub().ReadJournal(
        ledger_pb2.ReadJournalRequest(run_id="run-1", from_sequence=1, page_size=1000)
    )
    return [
        e
        for e in page.entries
        if e.kind == common_pb2.JOURNAL_ENTRY_KIND_REQUEST_EVENT and '"expired"' in e.payload_json
    ]


def test_a_request_past_its_lease_reads_expired_before_any_sweep(stack: Stack) -> None:
    ticket = admitted_for_one_second(stack)
    request_id = ticket.execution_request.execution_request_id
    time.sleep(1.1)
    worker = execution(stack)
    one = worker.GetExecutionRequest(
        execution_pb2.GetExecutionRequestRequest(execution_request_id=request_id)
    ).execution_request
    assert one.state == EXPIRED
    of_run = worker.ListExecutionRequests(
        execution_pb2.ListExecutionRequestsRequest(run_id="run-1")
    ).execution_requests
    assert [r.state for r in of_run] == [EXPIRED]
    # a worker looking for queued work finds none; a reader asking for expired finds it
    queued = worker.ListExecutionRequests(
        execution_pb2.ListExecutionRequestsRequest(run_id="run-1", states=[QUEUED])
    ).execution_requests
    assert list(queued) == []
    listing = execution(stack)

    def listed(text: str) -> list[str]:
        page = listing.ListAllExecutionRequests(
            execution_pb2.ListAllExecutionRequestsRequest(filter=text)
        )
        return [r.execution_request_id for r in page.execution_requests]

    assert listed("state = queued") == []
    assert listed("state = expired") == [request_id]
    assert listed("state != queued") == [request_id]
    assert listed("state != expired") == []
    read_back = (
        stack.ledger_stub()
        .GetAdmission(ledger_pb2.GetAdmissionRequest(run_id="run-1", request_id="req-1"))
        .ticket
    )
    assert read_back.execution_request.state == EXPIRED
    assert read_back.current_execution_request.state == EXPIRED
    # derived, not written: no sweep ran, so the journal holds no expiry yet
    assert expired_entries(stack) == []


@pytest.fixture
def sweeper(ledger: Ledger) -> Iterator[ExpirySweeper]:
    running = ExpirySweeper(ledger.sweep_expired, 0.2).start()
    yield running
    running.stop()


def test_the_scheduled_sweep_releases_the_never_claimed_recovery(
    stack: Stack, sweeper: ExpirySweeper
) -> None:
    admitted_for_one_second(stack)
    assert not recovery_candidate(stack).eligible
    # Nobody calls ExpireExecutionRequests: the ledger's own schedule writes the expiry (a
    # generous bound: the sweep runs every 0.2 s).
    deadline = time.monotonic() + 15
    while not expired_entries(stack) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(expired_entries(stack)) == 1
    reviewed = recovery_candidate(stack)
    assert reviewed.eligible, reviewed.holds
    time.sleep(0.5)
    assert len(expired_entries(stack)) == 1  # later rounds find nothing due


def test_one_replica_at_a_time_takes_the_sweeps_turn(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite serves one ledger process")
    with engine.connect() as first, engine.connect() as second:
        with first.begin():
            assert take_sweep_turn(first)
            with second.begin():
                assert not take_sweep_turn(second)
        with second.begin():
            assert take_sweep_turn(second)  # the turn ends with the transaction that took it
