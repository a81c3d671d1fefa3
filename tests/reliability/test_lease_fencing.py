"""Scenario 5: a worker paused past its lease while another worker tries to claim.

The ledger's clock is moved past the lease while the first worker is paused (between its claim
and its writes). Invariant: every write of the stale worker is refused (record, complete,
fail), the other worker's claim is refused too (an expired claim is never requeued behind the
owner's back), and nothing is written by any refused call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import execution_pb2, execution_pb2_grpc
from shared.continuity.canonical import digest_of
from shared.runtime.errors import from_rpc_error
from tests.ledger.admission_support import (
    claim_request,
    commit,
    commit_request,
    enable_policy,
    execution,
    seed,
)
from tests.ledger.conftest import Clock, LedgerClients
from tests.reliability.scale import FULL, report, scale
from tests.support import row_counts

ROUNDS = scale(fast=3, full=100)


def _stale_writes(exr: str, generation: int) -> list[tuple[str, Callable[..., object]]]:
    return [
        (
            "RecordCommand",
            lambda stub: stub.RecordCommand(
                execution_pb2.RecordCommandRequest(
                    execution_request_id=exr,
                    lease_generation=generation,
                    command_id="cmd-stale",
                    command_digest=digest_of("stale"),
                )
            ),
        ),
        (
            "CompleteExecutionRequest",
            lambda stub: stub.CompleteExecutionRequest(
                execution_pb2.CompleteExecutionRequestRequest(
                    execution_request_id=exr, lease_generation=generation
                )
            ),
        ),
        (
            "FailExecutionRequest",
            lambda stub: stub.FailExecutionRequest(
                execution_pb2.FailExecutionRequestRequest(
                    execution_request_id=exr, lease_generation=generation, reason="stale"
                )
            ),
        ),
    ]


def _outcome(error: grpc.RpcError) -> str:
    return f"{error.code().name}:{from_rpc_error(error).reason}"  # type: ignore[attr-defined]


def _paused_worker(
    worker: execution_pb2_grpc.ExecutionServiceStub,
    exr: str,
    generation: int,
    resumed: threading.Event,
    outcomes: list[str],
) -> None:
    """Holds its claim, paused while its lease runs out and another worker claims; then writes."""
    resumed.wait(timeout=30)
    for _name, write in _stale_writes(exr, generation):
        try:
            write(worker)
            outcomes.append("OK")
        except grpc.RpcError as error:
            outcomes.append(_outcome(error))


@pytest.mark.parametrize(
    "database_url", ["sqlite", "postgresql"] if FULL else ["sqlite"], indirect=True
)
def test_a_paused_worker_past_its_lease_writes_nothing(
    clients: LedgerClients, clock: Clock, engine: Engine, database_url: str
) -> None:
    enable_policy(clients, pending_ticket_limit=ROUNDS + 1)
    worker, other = execution(clients), execution(clients, "worker2-token")
    refusals: dict[str, int] = {}
    stale_writes = 0
    for round_number in range(ROUNDS):
        seeded = seed(clients, run_id=f"run-{round_number}")
        ticket = commit(clients, commit_request(clients, seeded, f"req-{round_number}")).ticket
        exr = ticket.execution_request.execution_request_id
        claimed = worker.ClaimExecutionRequest(claim_request(clients, exr)).execution_request
        resumed = threading.Event()
        outcomes: list[str] = []
        thread = threading.Thread(
            target=_paused_worker,
            args=(worker, exr, claimed.lease.generation, resumed, outcomes),
        )
        thread.start()
        clock.advance(ticket.execution_request.lease.seconds + 1)
        counts = row_counts(engine)
        try:
            other.ClaimExecutionRequest(claim_request(clients, exr))
            outcomes.append("OK")
        except grpc.RpcError as error:
            outcomes.append(_outcome(error))
        resumed.set()
        thread.join(timeout=60)
        stale_writes += 3
        for outcome in outcomes:
            refusals[outcome] = refusals.get(outcome, 0) + 1
        assert "OK" not in outcomes, (round_number, outcomes)
        assert all(o.split(":")[0] not in ("INTERNAL", "UNKNOWN") for o in outcomes)
        assert row_counts(engine) == counts, round_number
    report(
        "lease_fencing",
        backend=database_url.split(":", 1)[0].split("+", 1)[0],
        rounds=ROUNDS,
        stale_writes=stale_writes,
        accepted=refusals.get("OK", 0),
        refusals=refusals,
    )
