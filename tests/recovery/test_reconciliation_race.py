"""A late write of the old owner racing the reconciliation commit: exactly one outcome, and the
stored state agrees with it (SQLite and PostgreSQL, real servers)."""

from __future__ import annotations

import threading

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, execution_pb2
from services.ledger.service import Ledger
from tests.admission.conftest import Stack
from tests.recovery.conftest import Authority
from tests.recovery.test_never_claimed import execution, kinds
from tests.recovery.test_reconciliation import (
    CLAIMED,
    FP,
    EvidenceVerifier,
    claimed_request,
    decision,
    inspect,
    nothing_written,
    reconciliations,
    record,
    verify,
)


@pytest.fixture
def ledger(engine: Engine, authority: Authority) -> Ledger:
    return Ledger(engine, authority=authority, verifier=EvidenceVerifier())


@pytest.mark.parametrize("late", ["complete", "command"])
def test_a_late_write_racing_the_decision_has_exactly_one_outcome(
    stack: Stack, engine: Engine, late: str
) -> None:
    owned = claimed_request(stack, commands=0)
    snapshot = inspect(stack, owned)
    verify(stack, snapshot)
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def old_owner() -> None:
        barrier.wait()
        try:
            if late == "complete":
                execution(stack).CompleteExecutionRequest(
                    execution_pb2.CompleteExecutionRequestRequest(
                        execution_request_id=owned.execution_request_id, lease_generation=1
                    )
                )
            else:
                record(stack, owned, "cmd-racing")
            outcomes["late"] = "ok"
        except grpc.RpcError as error:
            outcomes["late"] = _reason(error)

    def administrator() -> None:
        barrier.wait()
        try:
            reconciliations(stack).ReconcileExecutionRequest(decision(snapshot))
            outcomes["decision"] = "ok"
        except grpc.RpcError as error:
            outcomes["decision"] = _reason(error)

    threads = [threading.Thread(target=old_owner), threading.Thread(target=administrator)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    stored = (
        execution(stack, "reader-token")
        .GetExecutionRequest(
            execution_pb2.GetExecutionRequestRequest(
                execution_request_id=owned.execution_request_id
            )
        )
        .execution_request
    )
    if outcomes["decision"] == "ok":
        assert outcomes["late"] == "LEASE_FENCED_BY_RECONCILIATION"
        assert stored.state == common_pb2.EXECUTION_REQUEST_STATE_RECONCILED
        assert "cmd-racing" not in inspect(stack, owned).commands.charged_under_request
    else:
        assert outcomes["late"] == "ok"
        expected = (
            "RECONCILIATION_STATE_CHANGED" if late == "complete" else "RECONCILIATION_DIGEST_STALE"
        )
        assert outcomes["decision"] == expected
        assert stored.state == (
            common_pb2.EXECUTION_REQUEST_STATE_COMPLETED if late == "complete" else CLAIMED
        )
        assert "reconciliation_settlement" not in kinds(stack)


def _reason(error: grpc.RpcError) -> str:
    from shared.runtime.errors import from_rpc_error

    return from_rpc_error(error).reason


def test_a_late_write_committed_first_needs_fresh_review(stack: Stack, engine: Engine) -> None:
    """Both orders deterministically: a write that commits first moves the state or the digest;
    the decision that then commits first fences the writer (the other test races them)."""
    owned = claimed_request(stack, commands=0)
    snapshot = inspect(stack, owned)
    verify(stack, snapshot)
    record(stack, owned, "cmd-first")
    admin = reconciliations(stack)
    nothing_written(
        stack, engine, FP, "RECONCILIATION_DIGEST_STALE",
        lambda: admin.ReconcileExecutionRequest(decision(snapshot)),
    )  # fmt: skip
    execution(stack).CompleteExecutionRequest(
        execution_pb2.CompleteExecutionRequestRequest(
            execution_request_id=owned.execution_request_id, lease_generation=1
        )
    )
    fresh = inspect(stack, owned, "rcn-2")
    nothing_written(
        stack, engine, FP, "RECONCILIATION_STATE_CHANGED",
        lambda: admin.ReconcileExecutionRequest(decision(fresh, expected_state=CLAIMED)),
    )  # fmt: skip
    error = nothing_written(
        stack, engine, FP, "RECONCILIATION_UNRESOLVED",
        lambda: admin.ReconcileExecutionRequest(decision(fresh)),
    )  # fmt: skip
    assert "REQUEST_NOT_CLAIMED" in error.metadata["holds"]
