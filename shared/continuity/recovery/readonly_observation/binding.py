"""The read-only observation's commit binding (R.4c): the derived checkpoint the candidate's sealed
reconstruction yields is bound to the journal's consumed turn and the retained result blobs.

The commit cannot reach reconstruction, so the ledger checks the checkpoint's source digests and
appended results here; the candidate runs the same check to show a hold instead of a refusal.
"""

from __future__ import annotations

from typing import Any, Final

from shared.continuity.canonical import (
    CanonicalJsonError,
    digest_of,
    intact_blob,
    parse_json,
)
from shared.continuity.derived_checkpoint import DerivedCheckpoint
from shared.continuity.derived_format import DerivedClaims
from shared.continuity.recovery.readonly_observation.custody import (
    EVIDENCE_TOOL,
    ObservationCustody,
)
from shared.continuity.recovery.workflow import ContentOf
from shared.continuity.source_reader import check_source_reader_pin
from shared.runtime.errors import FailedPrecondition, FieldViolation, InvalidArgument

#: The fixed result reconstruction appends for the unavailable evidence observation.
OBSERVATION_UNAVAILABLE: Final = {
    "status": "observation_unavailable",
    "reason": "original_read_result_not_retained",
}


def _mismatch(detail: str, derived: DerivedCheckpoint) -> FailedPrecondition:
    return FailedPrecondition(
        "RECONSTRUCTION_MISMATCH",
        f"the derived checkpoint is not bound to the journal's consumed turn: {detail}",
        metadata={"candidate": derived.digest, "reconstructed": ""},
    )


def check_binding(
    derived: DerivedCheckpoint, custody: ObservationCustody, content_of: ContentOf
) -> None:
    """R.4c The derived checkpoint continues from the checkpoint the consumed request was sent
    from, with the consumed response, whose calls carry exactly the arguments their grant rows
    digest, and appends exactly the retained results (stored intact, compared as canonical JSON)
    and the fixed unavailable observation for the evidence call."""
    claims = DerivedClaims.read(derived.content)
    if not claims.is_json:
        raise InvalidArgument(
            "RECOVERY_INVALID",
            "derived_checkpoint is not JSON",
            field_violations=[FieldViolation("derived_checkpoint", "not JSON")],
        )
    if not claims.records:
        raise _mismatch("no source or reconstruction record", derived)
    if claims.checkpoint_digest != custody.pending_checkpoint_digest:
        raise _mismatch("another source checkpoint", derived)
    if claims.raw_response_digest != custody.consumed_response_digest:
        raise _mismatch("another consumed response", derived)
    if claims.consumed_at != custody.consumed_at:
        raise _mismatch("another consumption time", derived)
    if claims.witness_digest != derived.witness_digest:
        raise _mismatch("another witness", derived)
    _check_arguments(claims.messages, custody, derived)
    appended = claims.appended_results
    results = {
        str(item.get("tool_call_id")): item.get("content")
        for item in (appended if isinstance(appended, list) else [])
        if isinstance(item, dict)
    }
    if sorted(results) != sorted(call_id for call_id, _ in custody.calls):
        raise _mismatch("the appended results are not the granted calls'", derived)
    # a reused source-reader result: the proof pins the published historical source reader
    check_source_reader_pin(claims)
    for call_id, name in custody.calls:
        if name == EVIDENCE_TOOL:
            expected: Any = OBSERVATION_UNAVAILABLE
        else:
            stored = intact_blob(content_of, custody.retained.get(call_id, ""))
            if stored is None:
                raise _mismatch(f"the retained result of {call_id} is not stored", derived)
            expected = parse_json(stored)
        if digest_of(results[call_id]) != digest_of(expected):
            raise _mismatch(f"the result appended for {call_id} is not exact", derived)


def _check_arguments(
    messages: Any, custody: ObservationCustody, derived: DerivedCheckpoint
) -> None:
    """Each granted call's argument digest is the digest of its arguments in the consumed
    response the derived checkpoint carries."""
    consumed = consumed_call_args(messages)
    for call_id, _ in custody.calls:
        if consumed.get(call_id) != custody.args_digests.get(call_id):
            raise _mismatch(
                f"the granted argument digest of {call_id} is not the consumed response's", derived
            )


def consumed_call_args(messages: Any) -> dict[str, str]:
    """call id → ``digest_of`` the parsed arguments of each tool call of the consumed response the
    derived checkpoint's history carries (its second-to-last message, the reconstructed turn's
    response); "" for arguments that are not JSON. Empty when there is no such message."""
    if not isinstance(messages, list) or len(messages) < 2 or not isinstance(messages[-2], dict):
        return {}
    parts = messages[-2].get("parts")
    found: dict[str, str] = {}
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict) or part.get("part_kind") != "tool-call":
            continue
        args = part.get("args")
        if isinstance(args, str):
            try:
                args = parse_json(args)
            except CanonicalJsonError:
                found[str(part.get("tool_call_id"))] = ""
                continue
        found[str(part.get("tool_call_id"))] = digest_of(args)
    return found
