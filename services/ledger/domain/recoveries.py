"""The stored recovery action: a versioned record with explicit keys (like the ticket record of
``domain/tickets.py``), so renaming a contract field never makes an old row unreadable."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.ledger.domain.execution import LeaseBounds
from shared.continuity.canonical import canonical_text, parse_json

RECORD_VERSION = 1


class RecoveryRecordError(ValueError):
    """A stored recovery row this code cannot read (a newer record version, or a damaged row)."""


@dataclass(frozen=True)
class StoredRecovery:
    """One saved recovery action (its execution request is read separately, as it is now)."""

    run_id: str
    request_id: str
    recovery_id: str
    workflow: str
    actor: str
    request_content_digest: str
    candidate_digest: str
    execution_request_id: str
    witness_sequence: int
    event_sequence: int
    lease_seconds: int
    created_at: str
    #: A workflow with a settlement (the rejected boundary): its sequence and the reviewed
    #: rejection.
    settlement_sequence: int = 0
    reviewed_rejection_digest: str = ""
    #: A workflow that continues from a new derived checkpoint (the read-only observation).
    derived_checkpoint_digest: str = ""
    #: Every bound the lease rule applied and which won; None in rows saved before it was kept.
    lease_bounds: LeaseBounds | None = None

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "record_version": RECORD_VERSION,
            "run_id": self.run_id,
            "request_id": self.request_id,
            "recovery_id": self.recovery_id,
            "workflow": self.workflow,
            "actor": self.actor,
            "request_content_digest": self.request_content_digest,
            "candidate_digest": self.candidate_digest,
            "execution_request_id": self.execution_request_id,
            "witness_sequence": self.witness_sequence,
            "event_sequence": self.event_sequence,
            "lease_seconds": self.lease_seconds,
            "created_at": self.created_at,
            "settlement_sequence": self.settlement_sequence,
            "reviewed_rejection_digest": self.reviewed_rejection_digest,
            "derived_checkpoint_digest": self.derived_checkpoint_digest,
        }
        if self.lease_bounds is not None:
            record["lease_bounds"] = self.lease_bounds.to_record()
        return record

    def to_text(self) -> str:
        return canonical_text(self.to_record())

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> StoredRecovery:
        version = record.get("record_version")
        if version != RECORD_VERSION:
            raise RecoveryRecordError(f"unknown recovery record version {version!r}")
        try:
            return cls(
                run_id=str(record["run_id"]),
                request_id=str(record["request_id"]),
                recovery_id=str(record["recovery_id"]),
                workflow=str(record["workflow"]),
                actor=str(record["actor"]),
                request_content_digest=str(record["request_content_digest"]),
                candidate_digest=str(record["candidate_digest"]),
                execution_request_id=str(record["execution_request_id"]),
                witness_sequence=int(record["witness_sequence"]),
                event_sequence=int(record["event_sequence"]),
                lease_seconds=int(record["lease_seconds"]),
                created_at=str(record["created_at"]),
                # Absent in records written before the rejected-boundary workflow existed.
                settlement_sequence=int(record.get("settlement_sequence", 0)),
                reviewed_rejection_digest=str(record.get("reviewed_rejection_digest", "")),
                # Absent in records written before the read-only observation workflow existed.
                derived_checkpoint_digest=str(record.get("derived_checkpoint_digest", "")),
                # Absent in records written before the lease bounds were kept.
                lease_bounds=LeaseBounds.from_record(record.get("lease_bounds")),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise RecoveryRecordError(f"damaged recovery record: {error!r}") from error

    @classmethod
    def from_text(cls, text: str) -> StoredRecovery:
        record = parse_json(text)
        if not isinstance(record, dict):
            raise RecoveryRecordError("a recovery record must be a JSON object")
        return cls.from_record(record)
