"""Journal inspection report → protobuf (translation only)."""

from __future__ import annotations

from forge.continuity.v1 import common_pb2, inspection_pb2
from services.ledger.domain.credential_screening import Finding
from services.ledger.domain.inspection import RecordReport
from services.ledger.transactions.inspection import EntryReport, JournalInspection
from shared.contract.terms import enum_number


def _findings(findings: tuple[Finding, ...]) -> list[inspection_pb2.CredentialFinding]:
    return [inspection_pb2.CredentialFinding(location=f.location, kind=f.kind) for f in findings]


def _entry(report: EntryReport) -> inspection_pb2.InspectedEntry:
    return inspection_pb2.InspectedEntry(
        sequence=report.entry.sequence,
        kind=enum_number(common_pb2.JournalEntryKind, report.entry.kind),  # type: ignore[arg-type]
        hash=report.entry.hash,
        payload_json=report.payload_json,
        credential_findings=_findings(report.findings),
    )


def _record(report: RecordReport) -> inspection_pb2.InspectedRecord:
    validator = report.validator
    return inspection_pb2.InspectedRecord(
        referenced_by_sequence=report.referenced_by_sequence,
        reference_field=report.reference_field,
        digest=report.digest,
        kind=enum_number(inspection_pb2.InspectedRecordKind, report.kind.value),  # type: ignore[arg-type]
        status=enum_number(inspection_pb2.InspectedRecordStatus, report.status.value),  # type: ignore[arg-type]
        problem=report.problem,
        sdk_epoch=report.sdk_epoch,
        size_bytes=report.size_bytes,
        record_json=report.record_json,
        field_count=report.field_count,
        telemetry_provenance_json=report.telemetry_provenance_json,
        validator=inspection_pb2.ValidatorIdentity(
            named_source_hash=validator.named_source_hash,
            name=validator.name,
            original_source_hash=validator.original_source_hash,
            standing=validator.standing,
        )
        if validator is not None
        else None,
        credential_findings=_findings(report.findings),
    )


def inspection_to_proto(result: JournalInspection) -> inspection_pb2.InspectJournalResponse:
    return inspection_pb2.InspectJournalResponse(
        run_id=result.run_id,
        head=common_pb2.JournalHead(sequence=result.head[0], hash=result.head[1]),
        entries=[_entry(e) for e in result.entries],
        records=[_record(r) for r in result.records],
        credential_finding_count=result.finding_count,
        screening_rules=result.screening_rules,
    )
