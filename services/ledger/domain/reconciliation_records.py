"""A saved reconciliation decision as stored (ADR 0010): a versioned, explicitly mapped record
with its handoff payload, read back strictly. Kept apart from the reconciliation rules, as the
stored tickets (``tickets.py``) and recoveries (``recoveries.py``) are."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from services.ledger.domain.execution import LeaseBounds
from shared.continuity.admissibility_facts import (
    BoundRequest,
    Consumed,
    Handoff,
    KnownEffect,
    PermittedAction,
    RemainingObligation,
    UnresolvedAlternative,
)
from shared.continuity.canonical import canonical_text, parse_json

RECORD_VERSION = 1


def handoff_to_record(handoff: Handoff) -> dict[str, Any]:
    """The stored handoff: effects, alternatives and obligations as pairs, as first stored."""
    return {
        "bound_requests": [asdict(b) for b in handoff.bound_requests],
        "known_effects": [[e.description, e.journal_sequence] for e in handoff.known_effects],
        "unresolved_alternatives": [
            [u.subject, list(u.alternatives)] for u in handoff.unresolved_alternatives
        ],
        "remaining_obligations": [
            [o.description, o.blocked_by] for o in handoff.remaining_obligations
        ],
        "permitted_next_actions": [asdict(a) for a in handoff.permitted_next_actions],
        "consumed": asdict(handoff.consumed),
    }


def handoff_from_record(record: Mapping[str, Any]) -> Handoff:
    return Handoff(
        bound_requests=tuple(BoundRequest(**b) for b in record["bound_requests"]),
        known_effects=tuple(KnownEffect(str(d), int(s)) for d, s in record["known_effects"]),
        unresolved_alternatives=tuple(
            UnresolvedAlternative(str(subject), tuple(alternatives))
            for subject, alternatives in record["unresolved_alternatives"]
        ),
        remaining_obligations=tuple(
            RemainingObligation(str(o), str(b)) for o, b in record["remaining_obligations"]
        ),
        permitted_next_actions=tuple(
            PermittedAction(**a) for a in record["permitted_next_actions"]
        ),
        consumed=Consumed(**record["consumed"]),
    )


class ReconciliationRecordError(ValueError):
    """A stored reconciliation row this code cannot read."""


@dataclass(frozen=True)
class StoredReconciliation:
    """One saved decision (its execution requests are read separately, as they are now)."""

    run_id: str
    request_id: str
    reconciliation_id: str
    execution_request_id: str
    decision: str
    actor: str
    request_content_digest: str
    reconciliation_digest: str
    evidence_reference: str
    fenced_lease_generation: int
    verification_sequence: int
    settlement_sequence: int
    #: RETRY_STAGE only; "" otherwise.
    retry_execution_request_id: str
    handoff: Handoff
    created_at: str
    #: RETRY_STAGE: every bound the lease rule applied to the retry and which won; None for
    #: MARK_UNRESOLVED (no lease) and in rows saved before it was kept (an optional key).
    lease_bounds: LeaseBounds | None = None
    #: MARK_UNRESOLVED released the claim without a recorded proof of cessation, on the
    #: administrator's acknowledgement (ADR 0045); an optional key, absent when False.
    cessation_unproven_acknowledged: bool = False

    def to_text(self) -> str:
        record = asdict(self)
        record["handoff"] = handoff_to_record(self.handoff)
        if self.lease_bounds is None:
            record.pop("lease_bounds")
        else:
            record["lease_bounds"] = self.lease_bounds.to_record()
        if not self.cessation_unproven_acknowledged:
            record.pop("cessation_unproven_acknowledged")
        record["record_version"] = RECORD_VERSION
        return canonical_text(record)

    @classmethod
    def from_text(cls, text: str) -> StoredReconciliation:
        try:
            record = parse_json(text)
            if not isinstance(record, dict) or record.pop("record_version", None) != RECORD_VERSION:
                raise ReconciliationRecordError("unknown reconciliation record version")
            record["handoff"] = handoff_from_record(record["handoff"])
            record["lease_bounds"] = LeaseBounds.from_record(record.get("lease_bounds"))
            acknowledged = record.setdefault("cessation_unproven_acknowledged", False)
            if type(acknowledged) is not bool:
                raise ReconciliationRecordError("cessation_unproven_acknowledged is not bool")
            for field in fields(cls):
                expected = {"str": str, "int": int}.get(str(field.type))
                if expected is not None and type(record[field.name]) is not expected:
                    raise ReconciliationRecordError(f"{field.name} is not {field.type}")
            return cls(**record)
        except (KeyError, TypeError, ValueError) as error:
            raise ReconciliationRecordError(f"damaged reconciliation record: {error!r}") from error
