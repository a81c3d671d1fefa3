"""No input costs more than it is worth (ADR 0041): a journaled reason is short, every entry the
ledger seals is within the payload bound (not only native appends), and failing an unclaimed
request is not a lever for any worker against any run. Refusals are typed and write nothing."""

from __future__ import annotations

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import execution_pb2
from services.ledger.domain.journal import MAX_PAYLOAD_BYTES, MAX_REASON_CHARS, EntryKind, seal
from shared.runtime.errors import InvalidArgument, from_rpc_error
from tests.ledger.admission_support import (
    claim_request,
    commit,
    commit_request,
    enable_policy,
    execution,
    seed,
)
from tests.ledger.conftest import LedgerClients
from tests.support import row_counts

LONG = "x" * (MAX_REASON_CHARS + 1)


def _queued(clients: LedgerClients, run_id: str = "run-1") -> str:
    seeded = seed(clients, run_id)
    enable_policy(clients)
    ticket = commit(clients, commit_request(clients, seeded, request_id=f"req-{run_id}")).ticket
    return ticket.execution_request.execution_request_id


def _refused(call: object, engine: Engine) -> None:
    before = row_counts(engine)
    with pytest.raises(grpc.RpcError) as refused:
        call()  # type: ignore[operator]
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    error = from_rpc_error(refused.value)
    assert error.reason == "REASON_TOO_LONG"
    assert error.metadata == {"field": "reason", "limit_chars": str(MAX_REASON_CHARS)}
    assert row_counts(engine) == before


def test_a_long_reason_is_refused_by_every_rpc_that_journals_one(
    clients: LedgerClients, engine: Engine
) -> None:
    queued = _queued(clients)
    admin = execution(clients, "admin-token")
    _refused(
        lambda: admin.FailUnclaimedExecutionRequest(
            execution_pb2.FailUnclaimedExecutionRequestRequest(
                execution_request_id=queued, reason=LONG
            )
        ),
        engine,
    )
    _refused(
        lambda: admin.CancelExecutionRequest(
            execution_pb2.CancelExecutionRequestRequest(execution_request_id=queued, reason=LONG)
        ),
        engine,
    )
    worker = execution(clients)
    worker.ClaimExecutionRequest(claim_request(clients, queued))
    _refused(
        lambda: worker.FailExecutionRequest(
            execution_pb2.FailExecutionRequestRequest(
                execution_request_id=queued, lease_generation=1, reason=LONG
            )
        ),
        engine,
    )
    # A reason at the limit is journaled.
    failed = worker.FailExecutionRequest(
        execution_pb2.FailExecutionRequestRequest(
            execution_request_id=queued, lease_generation=1, reason=LONG[:-1]
        )
    )
    assert failed.execution_request.state


def test_every_sealed_entry_is_within_the_payload_bound() -> None:
    # Not only native appends: a workflow's entry is sealed the same way.
    payload = '{"reason":"' + "y" * MAX_PAYLOAD_BYTES + '"}'
    with pytest.raises(InvalidArgument) as refused:
        seal("run-1", 1, EntryKind.REQUEST_FAILED, payload, "0" * 64, "worker-1", "now")
    assert refused.value.reason == "JOURNAL_PAYLOAD_TOO_LARGE"
    # Multi-byte characters count as their UTF-8 bytes.
    wide = '{"reason":"' + "é" * (MAX_PAYLOAD_BYTES // 2) + '"}'
    with pytest.raises(InvalidArgument):
        seal("run-1", 1, EntryKind.REQUEST_FAILED, wide, "0" * 64, "worker-1", "now")
    assert seal("run-1", 1, EntryKind.REQUEST_FAILED, '{"reason":"ok"}', "0" * 64, "w", "now")


def test_a_worker_cannot_fail_an_unclaimed_request(clients: LedgerClients, engine: Engine) -> None:
    queued = _queued(clients)
    before = row_counts(engine)
    with pytest.raises(grpc.RpcError) as refused:
        execution(clients).FailUnclaimedExecutionRequest(
            execution_pb2.FailUnclaimedExecutionRequestRequest(
                execution_request_id=queued, reason="dispatch_refused"
            )
        )
    assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
    assert row_counts(engine) == before
    failed = execution(clients, "admin-token").FailUnclaimedExecutionRequest(
        execution_pb2.FailUnclaimedExecutionRequestRequest(
            execution_request_id=queued, reason="dispatch_refused"
        )
    )
    assert failed.execution_request.lease.generation == 0
