"""The historical journal inspection read (``LedgerService.InspectJournal``): one consistent read
of a run's journal and the blobs its entries reference, then the pure record checks of
``domain/inspection.py``. It writes nothing, holds no write lock, renews no lease and returns no
resumable SDK object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from services.ledger.domain.credential_screening import RULES_VERSION, Finding, redact, screen
from services.ledger.domain.inspection import RecordKind, RecordReport, inspect_record
from services.ledger.domain.journal import EntryKind, StoredEntry
from services.ledger.domain.runs import check_identifier
from services.ledger.repository import blobs as blob_rows
from services.ledger.repository import journal_reads
from services.ledger.transactions.base import LedgerContext, existing_run
from shared.continuity.canonical import CanonicalJsonError, canonical_text, is_digest, parse_json
from shared.continuity.journal_chain import verify_chain
from shared.runtime.errors import FailedPrecondition, PreconditionViolation

# Native row kind → (payload field naming a record, what the record is).
REFERENCES: Final[dict[str, tuple[str, RecordKind]]] = {
    EntryKind.CHECKPOINT_STORED.value: ("checkpoint_digest", RecordKind.HISTORICAL_CHECKPOINT),
    EntryKind.RESPONSE_CONSUMED.value: ("response_digest", RecordKind.RAW_RESPONSE),
    EntryKind.MIGRATION_SETTLEMENT.value: (
        "derived_checkpoint_digest",
        RecordKind.DERIVED_CHECKPOINT,
    ),
}


@dataclass(frozen=True)
class EntryReport:
    entry: StoredEntry
    payload_json: str
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class JournalInspection:
    run_id: str
    head: tuple[int, str]
    entries: tuple[EntryReport, ...]
    records: tuple[RecordReport, ...]
    screening_rules: str = RULES_VERSION

    @property
    def finding_count(self) -> int:
        return sum(len(e.findings) for e in self.entries) + sum(
            len(r.findings) for r in self.records
        )


def inspect(context: LedgerContext, run_id: str) -> JournalInspection:
    """Inspect every entry and referenced record; refused (FAILED_PRECONDITION) when the chain is
    broken or a native row does not name its record as a digest."""
    check_identifier("run_id", run_id)
    with context.read() as connection:
        existing_run(connection, run_id)
        entries = list(journal_reads.iter_journal(connection, run_id))
        head = journal_reads.journal_head(connection, run_id)
        _require_intact(run_id, entries)
        references = [_reference(entry) for entry in entries]
        stored = {
            digest: found[0] if (found := blob_rows.get_blob(connection, digest)) else None
            for ref in references
            if ref is not None
            for digest in (ref[1],)
        }
    records: list[RecordReport] = []
    seen: set[str] = set()
    for entry, ref in zip(entries, references, strict=True):
        if ref is None or ref[1] in seen:
            continue
        seen.add(ref[1])
        field, digest, kind = ref
        records.append(
            inspect_record(
                kind,
                referenced_by_sequence=entry.sequence,
                reference_field=field,
                digest=digest,
                stored=stored[digest],
            )
        )
    return JournalInspection(
        run_id=run_id,
        head=head,
        entries=tuple(_entry_report(entry) for entry in entries),
        records=tuple(records),
    )


def _require_intact(run_id: str, entries: list[StoredEntry]) -> None:
    # A fresh recomputation of every hash: inspection trusts no earlier verification.
    verification = verify_chain(entries)
    if verification.valid and all(entry.run_id == run_id for entry in entries):
        return
    sequence = verification.first_broken_sequence or next(
        e.sequence for e in entries if e.run_id != run_id
    )
    problem = verification.problem or "run_mismatch"
    raise FailedPrecondition(
        "INSPECTION_CHAIN_BROKEN",
        f"the journal chain breaks at sequence {sequence} ({problem}): nothing is inspected",
        metadata={"run_id": run_id, "sequence": str(sequence), "problem": problem},
        precondition_violations=[
            PreconditionViolation("JOURNAL_CHAIN", f"runs/{run_id}/journal/{sequence}", problem)
        ],
    )


def _reference(entry: StoredEntry) -> tuple[str, str, RecordKind] | None:
    """(field, digest, kind) of the record a native row names, or None for other kinds."""
    found = REFERENCES.get(entry.kind)
    if found is None:
        return None
    field, kind = found
    try:
        payload = parse_json(entry.payload_json)
    except CanonicalJsonError:
        payload = None
    digest = payload.get(field) if isinstance(payload, dict) else None
    if not isinstance(digest, str) or not is_digest(digest):
        raise FailedPrecondition(
            "INSPECTION_ROW_MISMATCH",
            f"{entry.kind} at sequence {entry.sequence} does not name its record by digest",
            metadata={"sequence": str(entry.sequence), "field": field},
            precondition_violations=[
                PreconditionViolation("NATIVE_ROW", f"{entry.sequence}/{field}", "not a digest")
            ],
        )
    return field, digest, kind


def _entry_report(entry: StoredEntry) -> EntryReport:
    payload = parse_json(entry.payload_json)  # the intact chain proved it canonical JSON
    return EntryReport(
        entry=entry,
        payload_json=canonical_text(redact(payload)),
        findings=tuple(screen(payload, entry.payload_json)),
    )
