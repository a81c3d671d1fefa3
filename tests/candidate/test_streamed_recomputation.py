"""The candidate recomputes the chain as the snapshot arrives (in one message, or batch by batch
on the stream, overlapping the ledger's own work): the recomputation it carries is exactly the
one the chain check would make over the entries read, intact or broken, and the check takes it
instead of recomputing the whole journal again. Read from a real ledger through the candidate's
own source, in one message and, with the one-message limit lowered under the run, streamed."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from sqlalchemy import text

from services.candidate.domain import Snapshot
from services.candidate.domain.journal import check_chain
from services.candidate.downstream import GrpcCandidateSources
from services.ledger.transactions import snapshot as ledger_snapshot
from shared.continuity.journal_chain import verify_chain
from shared.contract.channels import open_channel
from tests.candidate.conftest import Stack
from tests.support import as_database_owner


@pytest.fixture(autouse=True, params=["one message", "streamed"])
def how(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "streamed":
        monkeypatch.setattr(ledger_snapshot, "WHOLE_SNAPSHOT_BYTES", 0)
    yield str(request.param)


def _snapshot(stack: Stack, run_id: str) -> Snapshot:
    ledger = open_channel(stack.ledger_served.target, "service-token")
    reconstruction = open_channel(stack.reconstruction_served.target, "candidate-service-token")
    try:
        return GrpcCandidateSources(ledger, reconstruction).snapshot(run_id)
    finally:
        ledger.close()
        reconstruction.close()


def test_the_streamed_recomputation_is_the_whole_journals_and_the_check_takes_it(
    stack: Stack,
) -> None:
    stack.seed("v1_basic", "run-streamed")
    snapshot = _snapshot(stack, "run-streamed")
    assert snapshot.recomputed is not None
    assert snapshot.recomputed == verify_chain(snapshot.entries)
    assert snapshot.recomputed.valid
    assert snapshot.recomputed.entries_checked == len(snapshot.entries) == snapshot.head.sequence
    assert check_chain(snapshot.entries, snapshot.head, snapshot.recomputed) is None


def test_a_row_altered_in_storage_breaks_the_streamed_recomputation_where_it_is(
    stack: Stack,
) -> None:
    stack.seed("v1_basic", "run-altered")
    with as_database_owner(stack.engine) as connection:
        connection.execute(
            text(
                "UPDATE journal_entries SET payload_json = :p "
                "WHERE run_id = 'run-altered' AND sequence = 4"
            ),
            {"p": json.dumps({"altered": True})},
        )
    snapshot = _snapshot(stack, "run-altered")
    assert snapshot.recomputed is not None and not snapshot.recomputed.valid
    assert snapshot.recomputed.first_broken_sequence == 4
    assert snapshot.recomputed == verify_chain(snapshot.entries)
    found = check_chain(snapshot.entries, snapshot.head, snapshot.recomputed)
    assert found is not None and found.sequence == 4
