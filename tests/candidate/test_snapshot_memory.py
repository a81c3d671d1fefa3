"""The candidate remembers the journals it read (ADR 0030): a second read of a run whose head has
not moved sends that head, gets the header alone from the real ledger and gives the same snapshot,
with the header as it is now; a moved head, a broken chain or a closure blob that was not stored
makes the next read a whole one. Read through the candidate's own source from a real ledger, on
SQLite and PostgreSQL; the ledger requests are seen by a real client interceptor."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text

from forge.continuity.v1 import common_pb2, ledger_pb2
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.snapshot_memory import SnapshotMemory
from services.demo.seed import load_fixture
from shared.contract.channels import open_channel
from tests.candidate.conftest import Stack
from tests.candidate.test_closure_blobs import LedgerCalls
from tests.support import as_database_owner

K = common_pb2.JournalEntryKind


@contextmanager
def sources(
    stack: Stack, memory: SnapshotMemory | None = None
) -> Iterator[tuple[GrpcCandidateSources, LedgerCalls]]:
    counter = LedgerCalls()
    ledger = open_channel(stack.ledger_served.target, "service-token", extra_interceptors=[counter])
    reconstruction = open_channel(stack.reconstruction_served.target, "candidate-service-token")
    try:
        yield GrpcCandidateSources(ledger, reconstruction, journals=memory), counter
    finally:
        ledger.close()
        reconstruction.close()


def known_heads(counter: LedgerCalls) -> list[tuple[int, str] | None]:
    """The known head each GetRunSnapshot request sent (None: none)."""
    return [
        (r.known_head.sequence, r.known_head.hash) if r.HasField("known_head") else None
        for r in counter.requests
        if isinstance(r, ledger_pb2.GetRunSnapshotRequest)
    ]


def annotate(stack: Stack, run_id: str) -> None:
    head = stack.head(run_id)
    stack.writer().AppendJournalEntry(
        ledger_pb2.AppendJournalEntryRequest(
            run_id=run_id,
            expected_head_hash=head.hash,
            kind=K.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
            payload_json=json.dumps({"annotation": "after the first read"}),
        )
    )


def test_a_second_read_of_an_unchanged_run_is_its_header(stack: Stack) -> None:
    seeded = stack.seed("v1_basic", "run-same")
    with sources(stack) as (source, counter):
        first = source.snapshot("run-same", closure_blobs=True)
        second = source.snapshot("run-same", closure_blobs=True)
    assert second == first
    assert set(second.blobs) == {seeded.checkpoint_digest, seeded.response_digest}
    assert known_heads(counter) == [None, (first.head.sequence, first.head.hash)]
    assert (source.journals.misses, source.journals.hits) == (1, 1)
    assert source.journals.held_bytes > sum(len(c) for c in first.blobs.values())


def test_the_header_of_a_remembered_read_is_read_now(stack: Stack) -> None:
    stack.seed("v1_basic", "run-policy")
    with sources(stack) as (source, _counter):
        first = source.snapshot("run-policy", closure_blobs=True)
        policy = stack.set_policy(enabled=True)
        second = source.snapshot("run-policy", closure_blobs=True)
    assert source.journals.hits == 1
    assert second.policy is not None and first.policy is not None
    assert second.policy.revision == policy.revision != first.policy.revision
    assert second.entries == first.entries


def test_a_moved_head_is_read_whole(stack: Stack) -> None:
    stack.seed("v1_basic", "run-moved")
    with sources(stack) as (source, counter):
        first = source.snapshot("run-moved", closure_blobs=True)
        annotate(stack, "run-moved")
        second = source.snapshot("run-moved", closure_blobs=True)
        third = source.snapshot("run-moved", closure_blobs=True)
    assert len(second.entries) == len(first.entries) + 1 == second.head.sequence
    assert second.entries[:-1] == first.entries
    assert third == second
    assert known_heads(counter) == [
        None,
        (first.head.sequence, first.head.hash),
        (second.head.sequence, second.head.hash),
    ]
    assert (source.journals.misses, source.journals.hits) == (2, 1)


def test_a_broken_chain_is_not_remembered(stack: Stack) -> None:
    stack.seed("v1_basic", "run-broken")
    with as_database_owner(stack.engine) as connection:
        connection.execute(
            text(
                "UPDATE journal_entries SET payload_json = :p "
                "WHERE run_id = 'run-broken' AND sequence = 2"
            ),
            {"p": '{"rewritten":true}'},
        )
    with sources(stack) as (source, counter):
        first = source.snapshot("run-broken", closure_blobs=True)
        second = source.snapshot("run-broken", closure_blobs=True)
    assert not first.verification.valid and first.verification.first_broken_sequence == 2
    assert second == first
    assert known_heads(counter) == [None, None]
    assert len(source.journals) == 0


def test_a_closure_blob_stored_after_the_read_is_seen(stack: Stack) -> None:
    """Read while the consumed response's blob is not stored, the journal is not remembered: the
    next read is whole and carries the blob once it is stored."""
    seeded = stack.seed("v1_basic", "run-late-blob")
    with as_database_owner(stack.engine) as connection:
        connection.execute(
            text("DELETE FROM blobs WHERE digest = :d"), {"d": seeded.response_digest}
        )
    with sources(stack) as (source, counter):
        first = source.snapshot("run-late-blob", closure_blobs=True)
        stack.writer().PutBlob(
            ledger_pb2.PutBlobRequest(
                content=load_fixture("v1_basic").raw_response, media_type="application/json"
            )
        )
        second = source.snapshot("run-late-blob", closure_blobs=True)
    assert seeded.response_digest not in first.blobs
    assert seeded.response_digest in second.blobs
    assert known_heads(counter) == [None, None]


def test_a_journal_read_without_blobs_does_not_stand_for_one_with_them(stack: Stack) -> None:
    stack.seed("v1_basic", "run-no-blobs")
    with sources(stack) as (source, counter):
        without = source.snapshot("run-no-blobs")
        with_blobs = source.snapshot("run-no-blobs", closure_blobs=True)
        without_again = source.snapshot("run-no-blobs")
    assert without.blobs == {} and len(with_blobs.blobs) == 2
    assert without_again == without
    head = (without.head.sequence, without.head.hash)
    assert known_heads(counter) == [None, None, head]


def test_the_memory_keeps_as_many_runs_and_bytes_as_it_may(stack: Stack) -> None:
    stack.seed("v1_basic", "run-a")
    stack.seed("v1_basic", "run-b")
    with sources(stack, SnapshotMemory(max_runs=1)) as (source, counter):
        for run_id in ("run-a", "run-b", "run-a", "run-a"):
            source.snapshot(run_id, closure_blobs=True)
    assert [head is not None for head in known_heads(counter)] == [False, False, False, True]
    with sources(stack, SnapshotMemory(max_bytes=1024)) as (source, counter):
        source.snapshot("run-a", closure_blobs=True)
        source.snapshot("run-a", closure_blobs=True)
    assert known_heads(counter) == [None, None] and source.journals.held_bytes == 0
