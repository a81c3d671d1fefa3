"""The ledger checks the caller's consumed_response_digest against the run's own journal: the run
must be held at the expected head, and its newest response_consumed must name that response.
On SQLite and PostgreSQL; every refusal writes nothing."""

from __future__ import annotations

import json

import grpc
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, ledger_pb2
from services.demo.seed import Entry
from shared.continuity.canonical import digest_of
from tests.errors import expect_error
from tests.ledger.admission_support import commit, commit_request, enable_policy, seed
from tests.ledger.conftest import LedgerClients
from tests.support import row_counts


def test_a_consumed_response_other_than_the_journals_is_refused(
    clients: LedgerClients, engine: Engine
) -> None:
    seeded = seed(clients)
    enable_policy(clients)
    other = digest_of("another response")
    request = commit_request(clients, seeded, consumed_response_digest=other)
    counts = row_counts(engine)
    error = expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "CONSUMED_RESPONSE_MISMATCH",
        lambda: commit(clients, request),
    )
    assert error.metadata["journal_response_digest"] == seeded.response_digest
    assert error.metadata["consumed_response_digest"] == other
    assert [v.type for v in error.precondition_violations] == ["CONSUMED_RESPONSE"]
    assert row_counts(engine) == counts
    # The journal's own response is admitted.
    assert commit(clients, commit_request(clients, seeded)).created


def test_the_newest_response_consumed_is_the_one_that_counts(
    clients: LedgerClients, engine: Engine
) -> None:
    """A second consumption later in the journal names the response the run is held on."""
    newer = digest_of("newer response")

    def consume_again(entries: list[Entry]) -> list[Entry]:
        *before, held = entries
        consumed = (
            common_pb2.JOURNAL_ENTRY_KIND_RESPONSE_CONSUMED,
            {"request_id": "model-req-2", "response_digest": newer},
        )
        return [*before, consumed, held]

    seeded = seed(clients, edit=consume_again)
    enable_policy(clients)
    counts = row_counts(engine)
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "CONSUMED_RESPONSE_MISMATCH",
        lambda: commit(clients, commit_request(clients, seeded)),
    )
    assert row_counts(engine) == counts


def test_a_run_that_is_not_held_is_refused(clients: LedgerClients, engine: Engine) -> None:
    def drop_the_hold(entries: list[Entry]) -> list[Entry]:
        assert entries[-1][0] == common_pb2.JOURNAL_ENTRY_KIND_RUN_HELD
        return entries[:-1]

    seeded = seed(clients, edit=drop_the_hold)
    enable_policy(clients)
    counts = row_counts(engine)
    error = expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "RUN_NOT_HELD",
        lambda: commit(clients, commit_request(clients, seeded)),
    )
    assert error.metadata["last_entry_kind"] == "tool_call_granted"
    assert [v.type for v in error.precondition_violations] == ["RUN_HELD"]
    assert row_counts(engine) == counts


def test_a_hold_released_by_a_later_entry_is_refused(
    clients: LedgerClients, engine: Engine
) -> None:
    """The hold must be the last entry at the expected head, not just somewhere in the journal."""
    seeded = seed(clients)
    enable_policy(clients)
    appended = (
        clients.ledger()
        .AppendJournalEntry(
            ledger_pb2.AppendJournalEntryRequest(
                run_id=seeded.run_id,
                expected_head_hash=seeded.head_hash,
                kind=common_pb2.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
                payload_json=json.dumps({"annotation": "resumed"}),
            )
        )
        .entry
    )
    counts = row_counts(engine)
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "RUN_NOT_HELD",
        lambda: commit(clients, commit_request(clients, seeded, expected_head_hash=appended.hash)),
    )
    assert row_counts(engine) == counts
