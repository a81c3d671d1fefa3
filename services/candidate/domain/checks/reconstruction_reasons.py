"""Reconstruction's reasons → the contract's hold reasons, exhaustively.

Reconstruction reports findings (``AnalysisHold.reason``) and refuses with typed errors; both are
plain strings on the wire. Each one it can give (``services.reconstruction.domain``'s
``ANALYSIS_REASONS`` and ``REFUSAL_REASONS``; tests/candidate checks the maps cover exactly
those) has an explicit hold here. A finding missing from its map is not defaulted to some hold:
the candidate fails with INTERNAL RECONSTRUCTION_REASON_UNMAPPED. That fails closed — no candidate,
so nothing can be admitted on it — and it is loud, where a guessed hold would let a new finding
pass unnoticed under a requirement (and permitted next actions) chosen for something else.

A refusal is different: it is reconstruction's answer that the stored bytes cannot be used, and
the operator needs the candidate's hold and handoff, not an error. Every refusal (any error
reconstruction answers with except the transient and authentication ones,
``facts.is_refusal``) becomes a hold; one whose reason is not mapped (or that is not a typed
FAILED_PRECONDITION / INVALID_ARGUMENT refusal at all, such as an INTERNAL fault on hostile
bytes) holds RECONSTRUCTION_REFUSED, naming the reason — still ineligible, still visible.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from services.candidate.domain.model import ConsumedCall, Hold, HoldReason, hold
from shared.runtime.errors import Internal

READ_GRANT: Final = "read"

#: Analysis findings (common and per version).
FINDING_HOLDS: Final[dict[str, HoldReason]] = {
    "EVIDENCE_QUERY_VALID": HoldReason.QUERY_VALID,
    "EVIDENCE_QUERY_NOT_ADVERTISED": HoldReason.QUERY_NOT_ADVERTISED,
    # A refused sibling whose grant is not a pure read becomes UNKNOWN_OR_WRITABLE_CALL.
    "SIBLING_CALL_REFUSED": HoldReason.SIBLING_CALL,
    "UNKNOWN_TOOL_CALL": HoldReason.UNKNOWN_OR_WRITABLE_CALL,
    "UNSUPPORTED_RESPONSE_CONTENT": HoldReason.UNSUPPORTED_CONTENT,
    "EVIDENCE_CALL_COUNT": HoldReason.UNSUPPORTED_CONTENT,
    "DUPLICATE_TOOL_CALL_ID": HoldReason.UNSUPPORTED_CONTENT,
}

#: Refusals of AnalyzeConsumedResponse and ReconstructInvalidRead (which also refuses with the
#: finding reasons above when a finding applies).
REFUSAL_HOLDS: Final[dict[str, HoldReason]] = {
    # The pinned SDK could not consume the stored response.
    "CONSUMED_RESPONSE_UNPARSEABLE": HoldReason.UNSUPPORTED_CONTENT,
    # The checkpoint names a runtime / validator / schema identity that is not registered.
    "HISTORICAL_IDENTITY_UNREGISTERED": HoldReason.IDENTITY_UNREGISTERED,
    # The published historical source reader a version-2 / observation proof pins is not
    # installed with its pinned hash (a historical identity that is not the registered one).
    "SOURCE_READER_UNPINNED": HoldReason.IDENTITY_UNREGISTERED,
    # The journal's consumption time cannot bind the derived messages.
    "CONSUMED_AT_INVALID": HoldReason.CLOSURE_INCOMPLETE,
    # The checkpoint cannot be migrated: its bytes, format, SDK projection or tool contract.
    "CHECKPOINT_DIGEST_MISMATCH": HoldReason.MIGRATION_REFUSED,
    "CHECKPOINT_FORMAT_UNSUPPORTED": HoldReason.MIGRATION_REFUSED,
    "CHECKPOINT_MALFORMED": HoldReason.MIGRATION_REFUSED,
    "CHECKPOINT_NOT_CANONICAL": HoldReason.MIGRATION_REFUSED,
    "CONTRACT_MIGRATION_REFUSED": HoldReason.MIGRATION_REFUSED,
    "HISTORY_PREFIX_CHANGED": HoldReason.MIGRATION_REFUSED,
    "MIGRATION_COUNTER_MISSING": HoldReason.MIGRATION_REFUSED,
    "MIGRATION_COUNTER_OUT_OF_BOUNDS": HoldReason.MIGRATION_REFUSED,
    "MIGRATION_COUNTER_UNEXPECTED": HoldReason.MIGRATION_REFUSED,
    "MIGRATION_FIELD_REFUSED": HoldReason.MIGRATION_REFUSED,
    "SDK_TRANSITION_UNSUPPORTED": HoldReason.MIGRATION_REFUSED,
    # Only ReproducePendingRequest gives these; the rejected-boundary candidate holds on any
    # refusal of it (REQUEST_NOT_REPRODUCED), listed here so the map stays exhaustive.
    "PENDING_REQUEST_NOT_SENT": HoldReason.REQUEST_NOT_REPRODUCED,
    "PENDING_STATE_DIVERGED": HoldReason.REQUEST_NOT_REPRODUCED,
    # Only ReconstructReadonlyObservation gives it; that candidate holds on any of its refusals.
    "OBSERVATION_RECONSTRUCTION_DIVERGED": HoldReason.OBSERVATION_NOT_PROVEN,
    # A retained result that is not JSON text (ReconstructReadonlyObservation only).
    "FIELD_INVALID": HoldReason.OBSERVATION_NOT_PROVEN,
    # Request refusals: the candidate sends a supported version and the intact stored bytes, so
    # these arise only from an empty stored blob; no migration can be built from it.
    "FIELD_REQUIRED": HoldReason.MIGRATION_REFUSED,
    "VERSION_UNSUPPORTED": HoldReason.MIGRATION_REFUSED,
}


def unmapped(reason: str, origin: str) -> Internal:
    return Internal(
        "RECONSTRUCTION_REASON_UNMAPPED",
        f"reconstruction gave the {origin} reason {reason!r}, which the candidate does not map "
        "to a hold; the candidate service must be updated for it",
        metadata={"reconstruction_reason": reason, "origin": origin},
    )


def _mapped(
    mapped: HoldReason, reason: str, subject: str, message: str, calls: Sequence[ConsumedCall]
) -> Hold:
    if mapped is HoldReason.SIBLING_CALL:
        grant = next((c.grant for c in calls if c.call_id == subject), "")
        if grant != READ_GRANT:
            # A refused sibling that is not a pure read is a writable / command call.
            mapped = HoldReason.UNKNOWN_OR_WRITABLE_CALL
    return hold(mapped, subject, f"{reason}: {message}")


def finding_hold(reason: str, subject: str, message: str, calls: Sequence[ConsumedCall]) -> Hold:
    """The hold of an analysis finding (INTERNAL RECONSTRUCTION_REASON_UNMAPPED if unknown)."""
    mapped = FINDING_HOLDS.get(reason)
    if mapped is None:
        raise unmapped(reason, "finding")
    return _mapped(mapped, reason, subject, message, calls)


def refusal_hold(
    reason: str, subject: str, message: str, calls: Sequence[ConsumedCall], *, typed: bool = True
) -> Hold:
    """The hold of a refusal, or of a finding refused as an error; RECONSTRUCTION_REFUSED for a
    reason no map names, or for an error that is not a typed refusal (``typed`` False)."""
    mapped = (REFUSAL_HOLDS.get(reason) or FINDING_HOLDS.get(reason)) if typed else None
    if mapped is None:
        return hold(HoldReason.RECONSTRUCTION_REFUSED, subject, f"{reason}: {message}")
    return _mapped(mapped, reason, subject, message, calls)
