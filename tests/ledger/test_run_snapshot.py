"""ReadRunSnapshot through the real ledger gRPC service, on SQLite and PostgreSQL: one stream
with the same run, head, policy, execution requests, entries and verification as the separate
reads, a tampered row reported where VerifyJournal reports it, a missing run refused, and, when
asked, exactly the stored blobs the journal's closure names."""

from __future__ import annotations

import grpc
import pytest
from sqlalchemy import Engine, text

from forge.continuity.v1 import (
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    ledger_pb2,
    policy_pb2,
)
from services.candidate.downstream import entry_from_proto
from services.ledger.transactions import snapshot
from shared.continuity.journal_closure import closure_of
from tests.errors import expect_error
from tests.ledger.conftest import LedgerClients, run_request
from tests.ledger.test_journal import K, append, journal
from tests.support import as_database_owner


def read_snapshot(
    clients: LedgerClients, run_id: str = "run-1"
) -> tuple[
    ledger_pb2.RunSnapshotHeader,
    list[common_pb2.JournalEntry],
    ledger_pb2.VerifyJournalResponse,
    list[str],
]:
    parts = list(
        clients.ledger("reader-token").ReadRunSnapshot(
            ledger_pb2.ReadRunSnapshotRequest(run_id=run_id)
        )
    )
    order = [str(part.WhichOneof("part")) for part in parts]
    entries = [e for part in parts if part.HasField("entries") for e in part.entries.entries]
    return parts[0].header, entries, parts[-1].verification, order


def seeded(clients: LedgerClients, count: int) -> str:
    clients.ledger().CreateRun(run_request())
    head = ""
    for index in range(count):
        head = append(
            clients,
            "run-1",
            head,
            K.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
            {"annotation": f"n{index}"},
        ).hash
    return head


def test_the_snapshot_equals_the_separate_reads(
    ledger_server: LedgerClients, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small batches, so the journal arrives in several messages.
    monkeypatch.setattr(snapshot, "SNAPSHOT_BATCH", 2)
    head = seeded(ledger_server, 5)
    header, entries, verification, order = read_snapshot(ledger_server)
    assert order == ["header", "entries", "entries", "entries", "verification"]
    reader = ledger_server.ledger("reader-token")
    got = reader.GetRun(ledger_pb2.GetRunRequest(run_id="run-1"))
    assert header.run == got.run
    assert (header.head.sequence, header.head.hash) == (5, head)
    assert header.policy == ledger_server.policy().GetPolicy(policy_pb2.GetPolicyRequest()).policy
    listed = execution_pb2_grpc.ExecutionServiceStub(
        ledger_server.channel("reader-token")
    ).ListExecutionRequests(execution_pb2.ListExecutionRequestsRequest(run_id="run-1"))
    assert list(header.execution_requests) == list(listed.execution_requests)
    assert entries == journal(ledger_server, "run-1")
    verified = reader.VerifyJournal(ledger_pb2.VerifyJournalRequest(run_id="run-1"))
    assert verification == verified
    assert verification.valid and verification.entries_checked == 5


@pytest.mark.parametrize("column", ["payload_json", "hash", "prev_hash", "actor"])
def test_a_row_changed_after_a_snapshot_is_reported_in_the_next_one(
    ledger_server: LedgerClients, engine: Engine, column: str
) -> None:
    """The snapshot verifies the rows it sends with the same remembered-intact rows as
    VerifyJournal: an altered row is recomputed and reported, and it is still sent."""
    seeded(ledger_server, 5)
    assert read_snapshot(ledger_server)[2].valid
    with as_database_owner(engine) as connection:
        value = connection.execute(
            text(f"SELECT {column} FROM journal_entries WHERE run_id = 'run-1' AND sequence = 3")
        ).scalar_one()
        middle = len(value) // 2
        replacement = "0" if value[middle] != "0" else "1"
        connection.execute(
            text(
                f"UPDATE journal_entries SET {column} = :v WHERE run_id = 'run-1' AND sequence = 3"
            ),
            {"v": value[:middle] + replacement + value[middle + 1 :]},
        )
    header, entries, verification, _ = read_snapshot(ledger_server)
    assert not verification.valid
    assert verification.first_broken_sequence == 3
    assert len(entries) == 5 and header.head.sequence == 5
    verified = ledger_server.ledger("reader-token").VerifyJournal(
        ledger_pb2.VerifyJournalRequest(run_id="run-1")
    )
    assert (verification.first_broken_sequence, verification.problem) == (
        verified.first_broken_sequence,
        verified.problem,
    )


def test_an_empty_journal_is_a_header_and_a_valid_verification(
    ledger_server: LedgerClients,
) -> None:
    ledger_server.ledger().CreateRun(run_request())
    header, entries, verification, order = read_snapshot(ledger_server)
    assert order == ["header", "verification"]
    assert entries == [] and header.head.sequence == 0
    assert verification.valid and verification.entries_checked == 0


def test_a_missing_run_is_not_found(ledger_server: LedgerClients) -> None:
    expect_error(
        grpc.StatusCode.NOT_FOUND, "RUN_NOT_FOUND", lambda: read_snapshot(ledger_server, "nope")
    )
    expect_error(
        grpc.StatusCode.INVALID_ARGUMENT, "FIELD_REQUIRED", lambda: read_snapshot(ledger_server, "")
    )


CONSUMED_AT = "2026-10-20T10:01:00.000000Z"
NOT_STORED = "sha256:" + "ab" * 32


def put(clients: LedgerClients, content: bytes) -> str:
    return (
        clients.ledger()
        .PutBlob(ledger_pb2.PutBlobRequest(content=content, media_type="application/json"))
        .digest
    )


def snapshot_parts(
    clients: LedgerClients, *, include_closure_blobs: bool, run_id: str = "run-1"
) -> list[ledger_pb2.ReadRunSnapshotResponse]:
    return list(
        clients.ledger("reader-token").ReadRunSnapshot(
            ledger_pb2.ReadRunSnapshotRequest(
                run_id=run_id, include_closure_blobs=include_closure_blobs
            )
        )
    )


def sent_blobs(parts: list[ledger_pb2.ReadRunSnapshotResponse]) -> list[tuple[str, bytes, str]]:
    return [
        (part.blob.digest, part.blob.content, part.blob.media_type)
        for part in parts
        if part.HasField("blob")
    ]


def turns(clients: LedgerClients, journal_rows: list[tuple[int, dict[str, str]]]) -> None:
    clients.ledger().CreateRun(run_request())
    head = ""
    for kind, payload in journal_rows:
        head = append(clients, "run-1", head, kind, payload).hash


def requested(request_id: str, checkpoint_digest: str) -> list[tuple[int, dict[str, str]]]:
    """A checkpoint stored, then a model request sent from it."""
    return [
        (K.JOURNAL_ENTRY_KIND_CHECKPOINT_STORED, {"checkpoint_digest": checkpoint_digest}),
        (
            K.JOURNAL_ENTRY_KIND_MODEL_REQUEST_SENT,
            {"request_id": request_id, "checkpoint_digest": checkpoint_digest},
        ),
    ]


def consumed(request_id: str, response_digest: str) -> tuple[int, dict[str, str]]:
    return (
        K.JOURNAL_ENTRY_KIND_RESPONSE_CONSUMED,
        {"request_id": request_id, "response_digest": response_digest, "consumed_at": CONSUMED_AT},
    )


def closure_digests(entries: list[common_pb2.JournalEntry]) -> tuple[str, ...]:
    """The digests the candidate's own closure names over the entries it received."""
    return closure_of([entry_from_proto(e) for e in entries]).blob_digests


def test_the_snapshot_carries_exactly_the_closure_blobs_when_asked(
    ledger_server: LedgerClients,
) -> None:
    """Two model requests: only the last one's checkpoint and consumed response are sent (not the
    first turn's, not an unrelated blob), as stored, after the entries and before the
    verification; the rest of the stream is the one sent without them."""
    old_checkpoint = put(ledger_server, b'{"checkpoint":"old"}')
    old_response = put(ledger_server, b'{"response":"old"}')
    checkpoint = put(ledger_server, b'{"checkpoint":"new"}')
    response = put(ledger_server, b'{"response":"new"}')
    put(ledger_server, b'{"unrelated":true}')
    turns(
        ledger_server,
        [
            *requested("req-1", old_checkpoint),
            consumed("req-1", old_response),
            *requested("req-2", checkpoint),
            (K.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION, {"annotation": "between"}),
            consumed("req-2", response),
        ],
    )
    asked = snapshot_parts(ledger_server, include_closure_blobs=True)
    assert [str(p.WhichOneof("part")) for p in asked] == [
        "header",
        "entries",
        "blob",
        "blob",
        "verification",
    ]
    assert sent_blobs(asked) == [
        (checkpoint, b'{"checkpoint":"new"}', "application/json"),
        (response, b'{"response":"new"}', "application/json"),
    ]
    entries = list(asked[1].entries.entries)
    assert closure_digests(entries) == (checkpoint, response)
    plain = snapshot_parts(ledger_server, include_closure_blobs=False)
    assert sent_blobs(plain) == []
    assert plain == [p for p in asked if not p.HasField("blob")]


def test_a_named_blob_that_is_not_stored_is_not_sent(ledger_server: LedgerClients) -> None:
    checkpoint = put(ledger_server, b'{"checkpoint":1}')
    turns(
        ledger_server,
        [
            *requested("req-1", checkpoint),
            consumed("req-1", NOT_STORED),
        ],
    )
    parts = snapshot_parts(ledger_server, include_closure_blobs=True)
    assert closure_digests(list(parts[1].entries.entries)) == (checkpoint, NOT_STORED)
    assert sent_blobs(parts) == [(checkpoint, b'{"checkpoint":1}', "application/json")]
    assert parts[-1].HasField("verification") and parts[-1].verification.valid


def test_an_unconsumed_request_sends_its_checkpoint_only(ledger_server: LedgerClients) -> None:
    checkpoint = put(ledger_server, b'{"checkpoint":1}')
    put(ledger_server, b'{"response":1}')
    turns(
        ledger_server,
        [
            *requested("req-1", checkpoint),
        ],
    )
    parts = snapshot_parts(ledger_server, include_closure_blobs=True)
    assert sent_blobs(parts) == [(checkpoint, b'{"checkpoint":1}', "application/json")]


def test_a_journal_without_a_model_request_sends_no_blob(ledger_server: LedgerClients) -> None:
    checkpoint = put(ledger_server, b'{"checkpoint":1}')
    turns(
        ledger_server,
        [(K.JOURNAL_ENTRY_KIND_CHECKPOINT_STORED, {"checkpoint_digest": checkpoint})],
    )
    parts = snapshot_parts(ledger_server, include_closure_blobs=True)
    assert [str(p.WhichOneof("part")) for p in parts] == ["header", "entries", "verification"]


def test_a_blob_altered_in_the_database_is_sent_as_stored(
    ledger_server: LedgerClients, engine: Engine
) -> None:
    """The ledger does not vouch for the bytes, exactly like GetBlob: the reader checks them."""
    checkpoint = put(ledger_server, b'{"checkpoint":1}')
    turns(
        ledger_server,
        [
            *requested("req-1", checkpoint),
        ],
    )
    with as_database_owner(engine) as connection:
        connection.execute(
            text("UPDATE blobs SET content = :c WHERE digest = :d"),
            {"c": b'{"checkpoint":2}', "d": checkpoint},
        )
    parts = snapshot_parts(ledger_server, include_closure_blobs=True)
    assert sent_blobs(parts) == [(checkpoint, b'{"checkpoint":2}', "application/json")]
    got = ledger_server.ledger("reader-token").GetBlob(ledger_pb2.GetBlobRequest(digest=checkpoint))
    assert got.content == b'{"checkpoint":2}'
