"""Scenario 6: the pending-ticket queue under 5 × its capacity of concurrent admissions, each
for its own held run, through the four real services.

Invariant: the number of tickets never exceeds the cap (sampled during the flood and counted
after it); every refusal is RESOURCE_EXHAUSTED PENDING_TICKET_LIMIT, and a refusal writes
nothing (the ledger holds exactly ``cap`` tickets, execution requests and settlements).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from sqlalchemy import Engine

from services.demo.seed import load_fixture, seed_held_run
from shared.runtime.errors import from_rpc_error
from tests.admission.conftest import Stack, submission
from tests.reliability.scale import FULL, report, scale
from tests.support import row_counts

FIXTURE = load_fixture("v1_basic")
CAP = scale(fast=2, full=8)
OVERLOAD = 5


@pytest.mark.parametrize(
    "database_url", ["sqlite", "postgresql"] if FULL else ["postgresql"], indirect=True
)
def test_the_pending_ticket_cap_holds_under_five_times_its_capacity(
    stack: Stack, engine: Engine, database_url: str
) -> None:
    runs = [f"run-{index}" for index in range(CAP * OVERLOAD)]
    for run_id in runs:
        seed_held_run(stack.ledger_stub(), FIXTURE, run_id)
    stack.set_policy(pending_ticket_limit=CAP)
    requests = {run_id: submission(stack.candidate_of(run_id)) for run_id in runs}
    before = row_counts(engine)
    stub = stack.admissions()
    barrier = threading.Barrier(len(runs))
    flooding = threading.Event()
    flooding.set()
    peak = 0

    def sample() -> None:
        nonlocal peak
        while flooding.is_set():
            peak = max(peak, row_counts(engine)["admission_tickets"])
            time.sleep(0.01)

    def submit(run_id: str) -> str:
        barrier.wait()
        try:
            stub.RequestInvalidReadContinuity(requests[run_id], timeout=120)
            return "OK"
        except grpc.RpcError as error:
            return f"{error.code().name}:{from_rpc_error(error).reason}"  # type: ignore[attr-defined]

    sampler = threading.Thread(target=sample)
    sampler.start()
    with ThreadPoolExecutor(len(runs)) as pool:
        outcomes = list(pool.map(submit, runs))
    flooding.clear()
    sampler.join()
    after = row_counts(engine)
    tally = {outcome: outcomes.count(outcome) for outcome in set(outcomes)}
    report(
        "queue_caps",
        backend=database_url.split(":", 1)[0].split("+", 1)[0],
        cap=CAP,
        concurrent=len(runs),
        admitted=tally.get("OK", 0),
        peak_sampled=peak,
        outcomes=tally,
    )
    assert tally == {"OK": CAP, "RESOURCE_EXHAUSTED:PENDING_TICKET_LIMIT": len(runs) - CAP}
    assert max(peak, after["admission_tickets"]) <= CAP
    assert after["admission_tickets"] - before["admission_tickets"] == CAP
    assert after["execution_requests"] - before["execution_requests"] == CAP
