"""One consistent read of everything a candidate is computed from: the run, its journal head, the
current policy, the run's execution requests, every journal entry up to that head, and the
ledger's recomputation of the chain over exactly those rows, all in one read transaction
(one snapshot; a reader whose journal is unchanged gets the header alone, in one statement), so
a reader needs no re-read loop and the rows are verified once, where they are, in the same pass
that sends them. On request the same transaction also reads the blobs the journal's closure
names (``shared.continuity.journal_closure``, the candidate's own definition), sent before the
verification, so the candidate needs no GetBlob calls for them."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Final

from sqlalchemy import Connection

from services.ledger.database import read_transaction, single_statement_read
from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.journal import StoredEntry
from services.ledger.domain.policy import PolicyRevision
from services.ledger.domain.runs import Run, check_identifier
from services.ledger.repository import blobs as blob_rows
from services.ledger.repository import journal_reads
from services.ledger.repository.snapshot_header import get_snapshot_header
from services.ledger.transactions.base import LedgerContext, run_not_found
from services.ledger.transactions.journal import INTACT
from shared.continuity.canonical import is_digest
from shared.continuity.journal_chain import ChainVerifier, Verification
from shared.continuity.journal_closure import CLOSURE_KINDS, PayloadRow, closure_of
from shared.runtime.errors import ResourceExhausted

# Entries per streamed batch: ~1-2 MiB of protobuf for typical payloads, far below the message cap.
SNAPSHOT_BATCH: Final = 2000
# A snapshot sent in one message (``read_whole``, GetRunSnapshot) holds at most one batch of
# entries and this many bytes of payloads and blobs: with the entries' own fields (~300 bytes
# each) far below the default 32 MiB message cap, whatever the payloads' characters.
WHOLE_SNAPSHOT_BYTES: Final = 4 * 1024 * 1024


@dataclass(frozen=True)
class SnapshotHeader:
    """What the snapshot read besides the journal."""

    run: Run
    head: tuple[int, str]
    policy: PolicyRevision
    execution_requests: list[ExecutionRequestRecord]


@dataclass(frozen=True)
class SnapshotBlob:
    """A stored blob the journal's closure names, as stored (its bytes are not checked here)."""

    digest: str
    content: bytes
    media_type: str


SnapshotPart = SnapshotHeader | list[StoredEntry] | SnapshotBlob | Verification


@dataclass(frozen=True)
class WholeSnapshot:
    """Every part of one snapshot, collected (what ``read`` yields, in one value). With
    ``verification`` None the journal was left out: the reader's known head is still the head
    (ADR 0030), so ``entries`` and ``blobs`` are empty."""

    header: SnapshotHeader
    entries: list[StoredEntry]
    blobs: list[SnapshotBlob]
    verification: Verification | None


def read(
    context: LedgerContext,
    run_id: str,
    *,
    closure_blobs: bool = False,
    most_entries: int | None = None,
    known_head: tuple[int, str] | None = None,
    streamed: bool = False,
) -> Generator[SnapshotPart, None, None]:
    """The header, then the journal in batches, then (with ``closure_blobs``) each stored blob
    the journal's closure names, then the verification of the rows yielded. A missing run is
    NOT_FOUND RUN_NOT_FOUND, raised before the header; a journal longer than ``most_entries``
    RUN_SNAPSHOT_TOO_LARGE, raised before it is read. When ``known_head`` (the reader's copy)
    is still the head, the header is all there is (ADR 0030): the chain fixes every entry up to
    it and the digests fix the blobs. ``streamed``: the caller sends each part before it reads
    the next, so the transaction waits for the reader (``read_transaction``)."""
    check_identifier("run_id", run_id)
    if known_head is not None:
        # The header alone, in one statement and no transaction; if the reader's journal is
        # still the run's, that is the whole answer, else the read below starts again.
        with single_statement_read(context.engine) as connection:
            header = _header(connection, run_id, most_entries)
        if header.head == known_head:
            yield header
            return
    with read_transaction(context.engine, snapshot=True, streamed=streamed) as connection:
        header = _header(connection, run_id, most_entries)
        head = header.head
        yield header
        verifier = ChainVerifier(INTACT)
        # Only the kinds the closure looks at, so a long journal is not kept in memory.
        closure_rows: list[PayloadRow] = []
        for batch in journal_reads.journal_batches(connection, run_id, head[0], SNAPSHOT_BATCH):
            verifier.add_all(batch)
            if closure_blobs:
                closure_rows += [PayloadRow(e) for e in batch if e.kind in CLOSURE_KINDS]
            yield batch
        if closure_blobs:
            digests = [d for d in closure_of(closure_rows).blob_digests if is_digest(d)]
            stored = blob_rows.get_blobs(connection, digests)
            for digest in dict.fromkeys(digests):
                if digest in stored:
                    content, media_type = stored[digest]
                    yield SnapshotBlob(digest, content, media_type)
        yield verifier.result()


def _header(connection: Connection, run_id: str, most_entries: int | None) -> SnapshotHeader:
    """The header, in one statement; a missing run is NOT_FOUND RUN_NOT_FOUND, a journal longer
    than ``most_entries`` RESOURCE_EXHAUSTED RUN_SNAPSHOT_TOO_LARGE."""
    found = get_snapshot_header(connection, run_id)
    if found is None:
        raise run_not_found(run_id)
    run, head, policy, requests = found
    if most_entries is not None and head[0] > most_entries:
        raise _too_large(run_id, head[0])
    return SnapshotHeader(run=run, head=head, policy=policy, execution_requests=requests)


def read_whole(
    context: LedgerContext,
    run_id: str,
    *,
    closure_blobs: bool = False,
    known_head: tuple[int, str] | None = None,
) -> WholeSnapshot:
    """``read``'s parts collected into one value, for a snapshot that fits one message: at most
    ``SNAPSHOT_BATCH`` entries and ``WHOLE_SNAPSHOT_BYTES`` of payloads and blobs. A longer
    journal is refused RESOURCE_EXHAUSTED RUN_SNAPSHOT_TOO_LARGE after one statement, a heavier
    snapshot once read; either way nothing is sent and the reader streams the snapshot instead.
    The parts are read to the end, so the read transaction commits as the stream's does: closing
    the generator inside it rolls the transaction back, and a rollback makes psycopg forget the
    connection's prepared statements (0.25 ms more PostgreSQL CPU per read, as measured:
    docs/performance-history.md, round 4, seventh and eighth passes). ``known_head``: as for
    ``read``; when it is still the head the value has the header alone."""
    header: SnapshotHeader | None = None
    entries: list[StoredEntry] = []
    blobs: list[SnapshotBlob] = []
    verification: Verification | None = None
    size = 0
    parts = read(
        context,
        run_id,
        closure_blobs=closure_blobs,
        most_entries=SNAPSHOT_BATCH,
        known_head=known_head,
    )
    for part in parts:
        if isinstance(part, SnapshotHeader):
            header = part
        elif isinstance(part, list):
            entries += part
            size += sum(_text_bytes(entry.payload_json) for entry in part)
        elif isinstance(part, SnapshotBlob):
            blobs.append(part)
            size += len(part.content)
        else:
            verification = part
    assert header is not None  # read yields it first
    if verification is None:
        return WholeSnapshot(header, [], [], None)  # the reader's known head is the head
    if size > WHOLE_SNAPSHOT_BYTES:
        raise _too_large(run_id, len(entries))
    return WholeSnapshot(header, entries, blobs, verification)


def _text_bytes(text: str) -> int:
    # str.isascii() is a flag check: only a payload with other characters is encoded to count.
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _too_large(run_id: str, entries: int) -> ResourceExhausted:
    return ResourceExhausted(
        "RUN_SNAPSHOT_TOO_LARGE",
        f"the snapshot of run {run_id} does not fit one message (at most {SNAPSHOT_BATCH} "
        f"entries and {WHOLE_SNAPSHOT_BYTES} bytes of payloads and blobs); read it with "
        "ReadRunSnapshot",
        metadata={
            "run_id": run_id,
            "entries": str(entries),
            "entry_limit": str(SNAPSHOT_BATCH),
            "byte_limit": str(WHOLE_SNAPSHOT_BYTES),
        },
    )
