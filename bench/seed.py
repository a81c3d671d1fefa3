"""Seeding the benchmarks' runs: held runs through the ledger's RPCs (as a platform writer), and
long journals in bulk through the ledger's repository (100,000 RPCs would measure the seeding,
not the candidate)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, create_engine

from bench.stack import bench_signing_key
from forge.continuity.v1 import ledger_pb2, ledger_pb2_grpc
from services.demo.seed import Entry, HeldRunFixture, seed_held_run
from services.ledger.domain.journal import EntryKind, seal
from services.ledger.repository.journal import insert_journal_entries
from services.ledger.repository.journal_reads import journal_head
from services.ledger.repository.signed_heads import insert_signed_head
from services.ledger.transactions.head_signing import check_extends
from shared.continuity.canonical import canonical_text
from shared.continuity.timeutil import to_text, utc_now

BULK_ACTOR = "bench-bulk-seed"
BULK_BATCH = 5_000


@dataclass(frozen=True)
class LongRun:
    run_id: str
    entries: int


def _append(
    ledger: ledger_pb2_grpc.LedgerServiceStub,
    run_id: str,
    head: str,
    kind: int,
    payload: dict[str, Any],
) -> str:
    appended = ledger.AppendJournalEntry(
        ledger_pb2.AppendJournalEntryRequest(
            run_id=run_id,
            expected_head_hash=head,
            kind=kind,  # type: ignore[arg-type]
            payload_json=json.dumps(payload),
        )
    ).entry
    return str(appended.hash)


def _sign_bulk_head(
    connection: Connection,
    run_id: str,
    extended: tuple[int, str],
    head: tuple[int, str],
    signed_at: str,
) -> None:
    """Sign ``head``, which the bulk insert left after the ledger's own head ``extended``, as a
    ledger's append does (the same check and chaining, ``check_extends``), with the key the
    benched ledgers sign with: a ledger extends only a head it signed (ADR 0015)."""
    _, signer = bench_signing_key()
    previous, unsigned_through, after = check_extends(signer, connection, run_id, *extended)
    signed = signer.sign(run_id, *head, max(signed_at, after), previous, unsigned_through)
    insert_signed_head(connection, signed)


def seed_long_held_run(
    ledger: ledger_pb2_grpc.LedgerServiceStub,
    database_url: str,
    fixture: HeldRunFixture,
    run_id: str,
    entries: int,
    *,
    eligible: bool = False,
) -> LongRun:
    """A held run whose journal has exactly ``entries`` entries: the held run's own entries (by
    RPC) up to its consume and grants, annotations sealed in bulk through the repository, then the
    final ``run_held`` appended by RPC (so the ledger seals the head itself). ``eligible`` puts
    the annotations right after ``run_started`` instead, so the held turn is the journal's last
    and the run may continue (a long history before the hold)."""
    held: list[Entry] = []

    def hold_back_the_final_entry(rows: list[Entry]) -> list[Entry]:
        keep = 1 if eligible else len(rows) - 1
        held.extend(rows[keep:])
        return rows[:keep]

    seeded = seed_held_run(ledger, fixture, run_id, edit=hold_back_the_final_entry)
    padding = entries - len(seeded.entries) - len(held)
    engine = create_engine(database_url)
    try:
        with engine.begin() as connection:
            sequence, head = extended = journal_head(connection, run_id)
            recorded_at = to_text(utc_now())
            batch = []
            for n in range(padding):
                payload = canonical_text({"annotation": f"bench padding {n}"})
                entry = seal(
                    run_id,
                    sequence + 1,
                    EntryKind.STARTUP_RECOVERY_ANNOTATION,
                    payload,
                    head,
                    BULK_ACTOR,
                    recorded_at,
                )
                batch.append(entry)
                sequence, head = entry.sequence, entry.hash
                if len(batch) == BULK_BATCH:
                    insert_journal_entries(connection, batch)
                    batch = []
            if batch:
                insert_journal_entries(connection, batch)
            _sign_bulk_head(connection, run_id, extended, (sequence, head), recorded_at)
    finally:
        engine.dispose()
    for held_kind, held_payload in held:
        head = _append(ledger, run_id, head, held_kind, held_payload)
    return LongRun(run_id, entries)
