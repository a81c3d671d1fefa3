"""Scenario 1: 64 concurrent identical admissions per round, through the four real services.

Invariant per round: exactly one ticket and one settlement, all 64 responses identical (one of
them ``created``), and not one INTERNAL or UNKNOWN.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import admission_pb2, common_pb2
from services.demo.seed import load_fixture, seed_held_run
from tests.admission.conftest import Stack, submission
from tests.reliability.scale import FULL, report, scale
from tests.support import row_counts, whole_journal

FIXTURE = load_fixture("v1_basic")
CALLERS = 64
# FORGE_RELIABILITY_ROUNDS overrides the count (a full run of 50 rounds takes ~10 min here).
ROUNDS = int(os.environ.get("FORGE_RELIABILITY_ROUNDS", scale(fast=1, full=50)))
SETTLEMENT = common_pb2.JOURNAL_ENTRY_KIND_MIGRATION_SETTLEMENT


def _settlements(stack: Stack, run_id: str) -> int:
    entries = whole_journal(stack.ledger_stub("reader-token"), run_id)
    return sum(entry.kind == SETTLEMENT for entry in entries)


@pytest.mark.parametrize(
    "database_url", ["sqlite", "postgresql"] if FULL else ["postgresql"], indirect=True
)
def test_identical_concurrent_admissions_make_one_ticket_per_round(
    stack: Stack, engine: Engine, database_url: str
) -> None:
    stack.set_policy(pending_ticket_limit=ROUNDS + 1, per_run_ticket_limit=1)
    stub = stack.admissions()
    codes: dict[str, int] = {}
    started = time.monotonic()
    with ThreadPoolExecutor(CALLERS) as pool:
        for round_number in range(ROUNDS):
            run_id = f"run-{round_number}"
            seed_held_run(stack.ledger_stub(), FIXTURE, run_id)
            request = submission(stack.candidate_of(run_id), request_id=f"req-{round_number}")
            barrier = threading.Barrier(CALLERS)

            def submit(
                request: admission_pb2.RequestInvalidReadContinuityRequest = request,
                barrier: threading.Barrier = barrier,
            ) -> admission_pb2.RequestInvalidReadContinuityResponse | grpc.StatusCode:
                barrier.wait()
                try:
                    return stub.RequestInvalidReadContinuity(request, timeout=120)
                except grpc.RpcError as error:
                    return error.code()  # type: ignore[attr-defined, no-any-return]

            outcomes = list(pool.map(lambda _i: submit(), range(CALLERS)))
            failures = [o for o in outcomes if isinstance(o, grpc.StatusCode)]
            for code in failures:
                codes[code.name] = codes.get(code.name, 0) + 1
            assert failures == [], (round_number, failures)
            responses = [
                o
                for o in outcomes
                if isinstance(o, admission_pb2.RequestInvalidReadContinuityResponse)
            ]
            assert sum(r.created for r in responses) == 1, round_number
            assert len({r.ticket.SerializeToString() for r in responses}) == 1, round_number
            assert _settlements(stack, run_id) == 1, round_number
            assert row_counts(engine)["admission_tickets"] == round_number + 1
    elapsed = time.monotonic() - started
    report(
        "concurrent_identical_admissions",
        backend=database_url.split(":", 1)[0].split("+", 1)[0],
        rounds=ROUNDS,
        callers=CALLERS,
        requests=ROUNDS * CALLERS,
        tickets=row_counts(engine)["admission_tickets"],
        errors=codes or 0,
        seconds=round(elapsed, 1),
    )
