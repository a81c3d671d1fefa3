"""GetRunSnapshot through the real ledger gRPC service, on SQLite and PostgreSQL: the whole
snapshot in one message is exactly what ReadRunSnapshot streams (header, entries, closure blobs,
verification), a tampered row included; a journal over the entry limit is refused after its
header, and a snapshot over the byte limit once its size is known, both RESOURCE_EXHAUSTED
RUN_SNAPSHOT_TOO_LARGE with the limits named, while the stream still reads them."""

from __future__ import annotations

import grpc
import pytest
from sqlalchemy import Engine, text

from forge.continuity.v1 import ledger_pb2
from services.ledger.transactions import snapshot
from tests.errors import expect_error
from tests.ledger.conftest import LedgerClients
from tests.ledger.test_journal import K, append
from tests.ledger.test_run_snapshot import (
    consumed,
    put,
    requested,
    seeded,
    snapshot_parts,
    turns,
)
from tests.support import as_database_owner


def whole(
    clients: LedgerClients, *, include_closure_blobs: bool = False, run_id: str = "run-1"
) -> ledger_pb2.GetRunSnapshotResponse:
    response: ledger_pb2.GetRunSnapshotResponse = clients.ledger("reader-token").GetRunSnapshot(
        ledger_pb2.GetRunSnapshotRequest(run_id=run_id, include_closure_blobs=include_closure_blobs)
    )
    return response


def streamed_as_whole(
    clients: LedgerClients, *, include_closure_blobs: bool = False
) -> ledger_pb2.GetRunSnapshotResponse:
    """The stream's parts gathered into the one-message shape, to compare field by field."""
    gathered = ledger_pb2.GetRunSnapshotResponse()
    for part in snapshot_parts(clients, include_closure_blobs=include_closure_blobs):
        which = part.WhichOneof("part")
        if which == "header":
            gathered.header.CopyFrom(part.header)
        elif which == "entries":
            gathered.entries.extend(part.entries.entries)
        elif which == "blob":
            gathered.blobs.append(part.blob)
        else:
            gathered.verification.CopyFrom(part.verification)
    return gathered


def two_turns(clients: LedgerClients) -> tuple[str, str]:
    """Two model requests, the second consumed: its checkpoint and response are the closure."""
    checkpoint = put(clients, b'{"checkpoint":"new"}')
    response = put(clients, b'{"response":"new"}')
    turns(
        clients,
        [
            *requested("req-1", put(clients, b'{"checkpoint":"old"}')),
            consumed("req-1", put(clients, b'{"response":"old"}')),
            *requested("req-2", checkpoint),
            (K.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION, {"annotation": "between"}),
            consumed("req-2", response),
        ],
    )
    return checkpoint, response


@pytest.mark.parametrize("include_closure_blobs", [False, True])
def test_the_message_is_the_stream_gathered(
    ledger_server: LedgerClients, include_closure_blobs: bool
) -> None:
    checkpoint, response = two_turns(ledger_server)
    got = whole(ledger_server, include_closure_blobs=include_closure_blobs)
    assert got == streamed_as_whole(ledger_server, include_closure_blobs=include_closure_blobs)
    assert len(got.entries) == got.header.head.sequence == 7
    assert got.verification.valid and got.verification.entries_checked == 7
    sent = [(blob.digest, blob.content, blob.media_type) for blob in got.blobs]
    expected = [
        (checkpoint, b'{"checkpoint":"new"}', "application/json"),
        (response, b'{"response":"new"}', "application/json"),
    ]
    assert sent == (expected if include_closure_blobs else [])


def test_a_tampered_row_is_reported_as_the_stream_reports_it(
    ledger_server: LedgerClients, engine: Engine
) -> None:
    seeded(ledger_server, 5)
    with as_database_owner(engine) as connection:
        connection.execute(
            text(
                "UPDATE journal_entries SET payload_json = :p "
                "WHERE run_id = 'run-1' AND sequence = 2"
            ),
            {"p": '{"annotation":"rewritten"}'},
        )
    got = whole(ledger_server)
    assert not got.verification.valid and got.verification.first_broken_sequence == 2
    assert got == streamed_as_whole(ledger_server)


def test_an_empty_journal_is_a_header_and_a_valid_verification(
    ledger_server: LedgerClients,
) -> None:
    seeded(ledger_server, 0)
    got = whole(ledger_server)
    assert list(got.entries) == [] and list(got.blobs) == []
    assert got.verification.valid and got.header.head.sequence == 0


def test_a_journal_over_the_entry_limit_is_refused_and_still_streams(
    ledger_server: LedgerClients, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot, "SNAPSHOT_BATCH", 3)
    head = seeded(ledger_server, 3)
    assert len(whole(ledger_server).entries) == 3  # at the limit: one message
    append(
        ledger_server,
        "run-1",
        head,
        K.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
        {"annotation": "n3"},
    )
    refused = expect_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "RUN_SNAPSHOT_TOO_LARGE",
        lambda: whole(ledger_server),
    )
    assert refused.metadata == {
        "run_id": "run-1",
        "entries": "4",
        "entry_limit": "3",
        "byte_limit": str(snapshot.WHOLE_SNAPSHOT_BYTES),
    }
    assert len(streamed_as_whole(ledger_server).entries) == 4


def test_a_snapshot_over_the_byte_limit_is_refused_and_still_streams(
    ledger_server: LedgerClients, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The closure's blobs count: the same journal fits without them and not with them."""
    two_turns(ledger_server)
    payloads = sum(len(e.payload_json) for e in whole(ledger_server).entries)
    monkeypatch.setattr(snapshot, "WHOLE_SNAPSHOT_BYTES", payloads)
    assert len(whole(ledger_server).entries) == 7  # exactly at the limit
    refused = expect_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "RUN_SNAPSHOT_TOO_LARGE",
        lambda: whole(ledger_server, include_closure_blobs=True),
    )
    assert refused.metadata["byte_limit"] == str(payloads)
    assert len(streamed_as_whole(ledger_server, include_closure_blobs=True).blobs) == 2


def test_a_missing_run_is_not_found(ledger_server: LedgerClients) -> None:
    expect_error(
        grpc.StatusCode.NOT_FOUND, "RUN_NOT_FOUND", lambda: whole(ledger_server, run_id="nope")
    )
    expect_error(
        grpc.StatusCode.INVALID_ARGUMENT, "FIELD_REQUIRED", lambda: whole(ledger_server, run_id="")
    )
