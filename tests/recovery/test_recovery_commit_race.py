"""The ledger's one recovery commit runs again when a concurrent transaction wins a race
(services/ledger/transactions/base.py:retry_on_unique_conflict), as admission's does: here an
upload of the same derived checkpoint (content-addressed; an upload takes no policy lock) commits
while the recovery waits to store it. The second run finds the bytes stored and recovers. Real
services on PostgreSQL (SQLite serializes its writers, so the race cannot happen there)."""

from __future__ import annotations

import threading
import time
from typing import Any

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import candidate_pb2
from services.demo.provider import RefusingProvider
from services.ledger.repository.blobs import insert_blob
from services.ledger.transactions.base import TRANSACTION_RETRIES, UNIQUE_CONFLICT
from shared.continuity.derived_format import DERIVED_CHECKPOINT_MEDIA_TYPE
from tests.admission.conftest import Stack
from tests.ledger.conftest import waiting_for_locks
from tests.recovery.test_never_claimed import ADA
from tests.recovery.test_readonly_observation import (
    consumed,
    observation,
    observation_candidate,
    refusal_recovered,
)
from tests.support import row_counts

#: A liveness bound for the recovery to reach the uploader's uncommitted row.
QUEUE_SECONDS = 60.0


def test_a_checkpoint_uploaded_while_the_recovery_stores_it_is_run_again(
    stack: Stack, engine: Engine, provider: RefusingProvider
) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite serializes its writers: no concurrent upload can interleave")
    ticket, sent = refusal_recovered(stack, provider)
    consumed(stack, ticket, sent)
    candidate = observation_candidate(stack)
    assert candidate.eligible, candidate.holds
    inputs = (
        stack.candidates(ADA)
        .GetReadonlyObservationCandidate(
            candidate_pb2.GetReadonlyObservationCandidateRequest(
                run_id="run-1", request_id="req-1", include_commit_inputs=True
            )
        )
        .candidate.commit_inputs
    )
    counts = row_counts(engine)
    answers: list[Any] = []
    before = TRANSACTION_RETRIES.snapshot().get(UNIQUE_CONFLICT, 0)

    def recover() -> None:
        try:
            answers.append(
                stack.admissions(ADA).RequestReadonlyObservationRecovery(observation(candidate))
            )
        except grpc.RpcError as refused:
            answers.append(refused)

    recovering = threading.Thread(target=recover)
    with engine.begin() as uploader:  # as the ledger's own upload writes it
        # The upload's row, not yet committed: the recovery's insert of the same digest waits.
        insert_blob(
            uploader,
            inputs.derived_checkpoint_digest,
            inputs.derived_checkpoint,
            DERIVED_CHECKPOINT_MEDIA_TYPE,
            "2026-12-06T00:00:00.000000Z",
        )
        recovering.start()
        deadline = time.monotonic() + QUEUE_SECONDS
        while waiting_for_locks(engine) == 0:
            assert recovering.is_alive() and time.monotonic() < deadline, answers
            time.sleep(0.05)
    # The upload committed: the waiting insert fails on the digest and the commit runs again.
    recovering.join(QUEUE_SECONDS)
    [answer] = answers
    assert not isinstance(answer, grpc.RpcError), answer.details()  # type: ignore[attr-defined]
    assert answer.created
    assert TRANSACTION_RETRIES.snapshot().get(UNIQUE_CONFLICT, 0) > before
    after = row_counts(engine)
    assert after["recovery_actions"] == counts["recovery_actions"] + 1
    assert after["blobs"] == counts["blobs"] + 1  # the uploaded checkpoint, stored once
