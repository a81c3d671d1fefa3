"""Step 9.8 of the admission transaction: the derived checkpoint's envelope is bound to the rows
the transaction reads.

The admission service checked that the bytes hash to the digest the candidate proved (one pass of
proof, ADR 0007 amendment). That proves they are the bytes the candidate's reconstruction made,
not that they continue this run's consumed turn: the ledger cannot reach reconstruction, so
inside its transaction it compares what the envelope claims to continue from with the journal
and the stored source checkpoint it reads — the source checkpoint digest (the checkpoint the
consumed request was sent from), the raw response digest and consumption time (the newest
``response_consumed``), the version admitted, the witness digest admitted, and the usage limits,
which a continuation never changes. Any difference is FAILED_PRECONDITION
RECONSTRUCTION_MISMATCH naming the field; nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.continuity.canonical import CanonicalJsonError, digest_of, parse_json
from shared.continuity.derived_format import DerivedClaims
from shared.continuity.source_reader import check_source_reader_pin
from shared.runtime.errors import FailedPrecondition


@dataclass(frozen=True)
class JournalTurn:
    """What the journal and the blob store say the admitted continuation continues."""

    #: The checkpoint the consumed request was sent from (newest ``model_request_sent``).
    checkpoint_digest: str
    #: That checkpoint's stored bytes (None: not stored).
    checkpoint: bytes | None
    #: The newest ``response_consumed``'s response digest and consumption time.
    response_digest: str
    consumed_at: str


def _mismatch(field: str, detail: str, digest: str) -> FailedPrecondition:
    return FailedPrecondition(
        "RECONSTRUCTION_MISMATCH",
        f"the derived checkpoint is not bound to the journal's consumed turn: {field}: {detail}",
        metadata={"candidate": digest, "reconstructed": ""},
    )


def _limits(content: bytes | None) -> Any:
    try:
        state = parse_json(content or b"null")
    except CanonicalJsonError:
        return None
    state = state.get("state") if isinstance(state, dict) else None
    return state.get("limits") if isinstance(state, dict) else None


def check_derived_envelope(
    content: bytes, digest: str, *, turn: JournalTurn, version: int, witness_digest: str
) -> None:
    """RECONSTRUCTION_MISMATCH unless the derived checkpoint ``content`` continues ``turn``
    under ``version`` with ``witness_digest`` and the source checkpoint's limits."""
    claims = DerivedClaims.read(content)
    expected = (
        ("source.checkpoint_digest", claims.checkpoint_digest, turn.checkpoint_digest),
        ("source.raw_response_digest", claims.raw_response_digest, turn.response_digest),
        ("reconstruction.consumed_at", claims.consumed_at, turn.consumed_at),
        ("reconstruction.version", claims.version, version),
        ("witness_digest", claims.witness_digest, witness_digest),
    )
    for field, found, wanted in expected:
        if found != wanted or isinstance(found, bool):
            raise _mismatch(field, f"{found!r}, the journal binds {wanted!r}", digest)
    check_source_reader_pin(claims)
    source_limits = _limits(turn.checkpoint)
    if source_limits is None or digest_of(claims.limits) != digest_of(source_limits):
        raise _mismatch("state.limits", "not the source checkpoint's unchanged limits", digest)
