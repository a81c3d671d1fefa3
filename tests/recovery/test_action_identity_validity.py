"""Action identities of recovery and reconciliation expire (ADR 0038): an identical repeat within
the validity reads the saved action back; after it, the repeat is refused and writes nothing,
and the saved action is still read back by its own read. Real ledger server (SQLite and
PostgreSQL) with a clock the test moves; the rule itself for every expiring key."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import reconciliation_pb2
from services.ledger.service import Ledger
from shared.continuity.idempotency import (
    ACTION_IDENTITY_VALIDITY,
    StoredAction,
    replay_or_conflict,
)
from shared.continuity.timeutil import utc_now
from shared.runtime.errors import FailedPrecondition
from tests.admission.conftest import Stack
from tests.recovery.conftest import Authority
from tests.recovery.test_reconciliation import (
    ACK,
    MARK,
    EvidenceVerifier,
    claimed_request,
    decision,
    inspect,
    nothing_written,
    reconciliations,
)


class MovableClock:
    """Wall-clock time plus an offset the test moves forward (the ledger's clock only)."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return utc_now() + self.offset


@pytest.fixture
def clock() -> MovableClock:
    return MovableClock()


@pytest.fixture
def ledger(engine: Engine, authority: Authority, clock: MovableClock) -> Ledger:
    return Ledger(engine, clock, authority=authority, verifier=EvidenceVerifier())


def test_a_reconciliation_repeated_after_its_identity_expired_is_refused(
    stack: Stack, engine: Engine, clock: MovableClock
) -> None:
    owned = claimed_request(stack, commands=1)
    snapshot = inspect(stack, owned)
    admin = reconciliations(stack)
    assert admin.ReconcileExecutionRequest(decision(snapshot, MARK, **ACK)).created
    clock.offset = ACTION_IDENTITY_VALIDITY - timedelta(seconds=5)
    assert not admin.ReconcileExecutionRequest(decision(snapshot, MARK, **ACK)).created  # a retry
    clock.offset = ACTION_IDENTITY_VALIDITY + timedelta(seconds=1)
    error = nothing_written(
        stack,
        engine,
        grpc.StatusCode.FAILED_PRECONDITION,
        "ACTION_IDENTITY_EXPIRED",
        lambda: admin.ReconcileExecutionRequest(decision(snapshot, MARK, **ACK)),
    )
    assert error.metadata["reconciliation_id"] == snapshot.reconciliation_id
    saved = admin.GetReconciliation(
        reconciliation_pb2.GetReconciliationRequest(
            run_id="run-1", execution_request_id=owned.execution_request_id
        )
    ).reconciliation
    assert saved.reconciliation_id == snapshot.reconciliation_id


@pytest.mark.parametrize("id_field", ["recovery_id", "reconciliation_id", "request_id"])
def test_only_recovery_and_reconciliation_identities_expire(id_field: str) -> None:
    stored_at = datetime(2026, 12, 1, 12, tzinfo=UTC)
    stored = StoredAction("ada", "sha256:" + "a" * 64, stored_at=stored_at)

    def repeat(after: timedelta) -> None:
        replay_or_conflict(
            id_field=id_field,
            action_id="act-1",
            stored=stored,
            identity="ada",
            content_digest=stored.content_digest,
            now=stored_at + after,
        )

    repeat(ACTION_IDENTITY_VALIDITY - timedelta(microseconds=1))  # still a retry
    if id_field == "request_id":  # an admission's key is bound to its run and ticket instead
        repeat(ACTION_IDENTITY_VALIDITY * 10)
        return
    with pytest.raises(FailedPrecondition) as expired:
        repeat(ACTION_IDENTITY_VALIDITY)
    assert expired.value.reason == "ACTION_IDENTITY_EXPIRED"
    assert expired.value.metadata[id_field] == "act-1"
