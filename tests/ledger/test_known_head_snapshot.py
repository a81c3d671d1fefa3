"""GetRunSnapshot with the reader's known head, through the real ledger gRPC service, on SQLite
and PostgreSQL (ADR 0030): while that is still the run's head the answer is the header alone,
read as always (a new policy revision shows), with journal_unchanged set; a head that moved, or
another hash at the same sequence, gets the whole snapshot, exactly as a read without it."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, ledger_pb2
from tests.ledger.admission_support import enable_policy
from tests.ledger.conftest import LedgerClients, counted
from tests.ledger.test_journal import K, append
from tests.ledger.test_whole_run_snapshot import two_turns, whole


def known(
    clients: LedgerClients, head: common_pb2.JournalHead, *, include_closure_blobs: bool = True
) -> ledger_pb2.GetRunSnapshotResponse:
    response: ledger_pb2.GetRunSnapshotResponse = clients.ledger("reader-token").GetRunSnapshot(
        ledger_pb2.GetRunSnapshotRequest(
            run_id="run-1", include_closure_blobs=include_closure_blobs, known_head=head
        )
    )
    return response


@pytest.mark.parametrize("include_closure_blobs", [False, True])
def test_the_known_head_gets_the_header_alone(
    ledger_server: LedgerClients, include_closure_blobs: bool
) -> None:
    two_turns(ledger_server)
    full = whole(ledger_server, include_closure_blobs=include_closure_blobs)
    got = known(ledger_server, full.header.head, include_closure_blobs=include_closure_blobs)
    assert got.journal_unchanged
    assert got.header == full.header
    assert list(got.entries) == [] and list(got.blobs) == []
    assert not got.HasField("verification")
    assert not full.journal_unchanged


def test_the_header_is_read_as_always(ledger_server: LedgerClients) -> None:
    two_turns(ledger_server)
    head = whole(ledger_server).header.head
    policy = enable_policy(ledger_server)
    got = known(ledger_server, head)
    assert got.journal_unchanged
    assert got.header.policy == policy and got.header.head == head


def test_a_head_that_moved_gets_the_whole_snapshot(ledger_server: LedgerClients) -> None:
    two_turns(ledger_server)
    before = whole(ledger_server).header.head
    append(
        ledger_server,
        "run-1",
        before.hash,
        K.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
        {"annotation": "after"},
    )
    got = known(ledger_server, before)
    assert not got.journal_unchanged
    assert got == whole(ledger_server, include_closure_blobs=True)
    assert len(got.entries) == before.sequence + 1 and got.verification.valid


def test_another_hash_at_the_head_sequence_gets_the_whole_snapshot(
    ledger_server: LedgerClients,
) -> None:
    two_turns(ledger_server)
    head = whole(ledger_server).header.head
    other = common_pb2.JournalHead(sequence=head.sequence, hash="sha256:" + "1" * 64)
    got = known(ledger_server, other)
    assert not got.journal_unchanged
    assert got == whole(ledger_server, include_closure_blobs=True)


def test_the_header_alone_skips_the_journal_and_blob_statements(
    ledger_server: LedgerClients, engine: Engine
) -> None:
    two_turns(ledger_server)
    with counted(engine) as whole_read:
        head = whole(ledger_server, include_closure_blobs=True).header.head
    with counted(engine) as header_read:
        known(ledger_server, head)
    # The same statements up to the header's; the journal's batch and the blobs' read left out.
    assert header_read == whole_read[:-2]
    assert "FROM journal_entries" in whole_read[-2] and "FROM blobs" in whole_read[-1]
