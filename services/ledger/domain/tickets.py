"""The stored admission ticket: a versioned record with explicit keys.

The ticket row keeps the ticket as it was saved. It is written as ``{"record_version": 1, ...}``
with keys chosen here, not protobuf field names, so renaming a contract field can never make old
rows unreadable; the servicer maps the record to protobuf field by field. Rows written before the
record was versioned (no ``record_version``) carried the same keys and are still read. Fields added
later (``lease_bounds``) are optional keys of the same version: an older row simply lacks them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.ledger.domain.execution import LeaseBounds
from shared.continuity.canonical import canonical_text, parse_json
from shared.contract.terms import DIGEST_NAMES

RECORD_VERSION = 1


class TicketRecordError(ValueError):
    """A stored ticket row this code cannot read (a newer record version, or a damaged row)."""


@dataclass(frozen=True)
class StoredTicket:
    """One saved continuity ticket (its execution request is read separately, as it is now)."""

    run_id: str
    request_id: str
    operator_identity: str
    settlement_sequence: int
    claim_sequence: int
    digests: Mapping[str, str]
    policy_revision: int
    version: int
    derived_checkpoint_digest: str
    request_content_digest: str
    execution_request_id: str
    created_at: str
    #: Every bound the lease rule applied and which won; None in rows saved before it was kept.
    lease_bounds: LeaseBounds | None = None

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "record_version": RECORD_VERSION,
            "run_id": self.run_id,
            "request_id": self.request_id,
            "operator_identity": self.operator_identity,
            "settlement_sequence": self.settlement_sequence,
            "claim_sequence": self.claim_sequence,
            "digests": {name: self.digests[name] for name in DIGEST_NAMES},
            "policy_revision": self.policy_revision,
            "version": self.version,
            "derived_checkpoint_digest": self.derived_checkpoint_digest,
            "request_content_digest": self.request_content_digest,
            "execution_request_id": self.execution_request_id,
            "created_at": self.created_at,
        }
        if self.lease_bounds is not None:
            record["lease_bounds"] = self.lease_bounds.to_record()
        return record

    def to_text(self) -> str:
        return canonical_text(self.to_record())

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> StoredTicket:
        version = record.get("record_version", 0)  # 0: written before records were versioned
        if version not in (0, RECORD_VERSION):
            raise TicketRecordError(f"unknown ticket record version {version!r}")
        try:
            digests = record["digests"]
            return cls(
                run_id=str(record["run_id"]),
                request_id=str(record["request_id"]),
                operator_identity=str(record["operator_identity"]),
                settlement_sequence=int(record["settlement_sequence"]),
                claim_sequence=int(record["claim_sequence"]),
                digests={name: str(digests[name]) for name in DIGEST_NAMES},
                policy_revision=int(record["policy_revision"]),
                version=int(record["version"]),
                derived_checkpoint_digest=str(record["derived_checkpoint_digest"]),
                request_content_digest=str(record["request_content_digest"]),
                execution_request_id=str(record["execution_request_id"]),
                created_at=str(record["created_at"]),
                lease_bounds=LeaseBounds.from_record(record.get("lease_bounds")),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise TicketRecordError(f"damaged ticket record: {error!r}") from error

    @classmethod
    def from_text(cls, text: str) -> StoredTicket:
        record = parse_json(text)
        if not isinstance(record, dict):
            raise TicketRecordError("a ticket record must be a JSON object")
        return cls.from_record(record)
