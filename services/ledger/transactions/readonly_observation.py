"""The read-only observation recovery's part of the recovery transaction
(``transactions/recovery.py`` runs the steps R.1–R.9; ADR 0009).

Inside the one transaction the ledger judges the journal's read custody again
(``shared.continuity.readonly_observation``), binds the derived checkpoint admission reconstructed
to the
stored bytes that custody names (the ledger cannot reach reconstruction: it checks the envelope's
source digests and appended results against the journal and the retained result blobs), stores
it, and describes the separate invocation binding the requeued request continues under.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import Connection

from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.repository import blobs as blob_rows
from shared.continuity.canonical import (
    CanonicalJsonError,
    digest_of,
    intact_blob,
    is_digest,
    parse_json,
    sha256_digest,
)
from shared.continuity.readonly_observation import EVIDENCE_TOOL, ObservationCustody
from shared.runtime.errors import FailedPrecondition, FieldViolation, InvalidArgument

DERIVED_CHECKPOINT_MEDIA_TYPE = "application/vnd.forge.derived-checkpoint+json"
#: The fixed result reconstruction appends for the unavailable evidence observation.
OBSERVATION_UNAVAILABLE = {
    "status": "observation_unavailable",
    "reason": "original_read_result_not_retained",
}


@dataclass(frozen=True)
class ObservationInput:
    """The derived checkpoint admission reconstructed, and its witness digest."""

    derived_checkpoint: bytes
    derived_checkpoint_digest: str
    witness_digest: str

    def violations(self) -> list[FieldViolation]:
        found: list[FieldViolation] = []
        for name in ("derived_checkpoint_digest", "witness_digest"):
            if not is_digest(getattr(self, name)):
                found.append(FieldViolation(name, "must be sha256:<64 hex>"))
        if sha256_digest(self.derived_checkpoint) != self.derived_checkpoint_digest:
            found.append(
                FieldViolation("derived_checkpoint", "the bytes do not hash to their digest")
            )
        return found


def _mismatch(detail: str, observation: ObservationInput) -> FailedPrecondition:
    return FailedPrecondition(
        "RECONSTRUCTION_MISMATCH",
        f"the derived checkpoint is not bound to the journal's consumed turn: {detail}",
        metadata={"candidate": observation.derived_checkpoint_digest, "reconstructed": ""},
    )


def check_binding(
    connection: Connection, observation: ObservationInput, custody: ObservationCustody
) -> None:
    """R.4c The derived checkpoint continues from the checkpoint the consumed request was sent
    from, with the consumed response, and appends exactly the retained results (stored intact,
    compared as canonical JSON) and the fixed unavailable observation for the evidence call."""
    try:
        envelope = parse_json(observation.derived_checkpoint)
    except CanonicalJsonError as exc:
        raise InvalidArgument(
            "RECOVERY_INVALID",
            "derived_checkpoint is not JSON",
            field_violations=[FieldViolation("derived_checkpoint", "not JSON")],
        ) from exc
    source = envelope.get("source") if isinstance(envelope, dict) else None
    rebuilt = envelope.get("reconstruction") if isinstance(envelope, dict) else None
    if not isinstance(source, dict) or not isinstance(rebuilt, dict):
        raise _mismatch("no source or reconstruction record", observation)
    if source.get("checkpoint_digest") != custody.pending_checkpoint_digest:
        raise _mismatch("another source checkpoint", observation)
    if source.get("raw_response_digest") != custody.consumed_response_digest:
        raise _mismatch("another consumed response", observation)
    if rebuilt.get("consumed_at") != custody.consumed_at:
        raise _mismatch("another consumption time", observation)
    if envelope.get("witness_digest") != observation.witness_digest:
        raise _mismatch("another witness", observation)
    appended = rebuilt.get("appended_results")
    results = {
        str(item.get("tool_call_id")): item.get("content")
        for item in (appended if isinstance(appended, list) else [])
        if isinstance(item, dict)
    }
    if sorted(results) != sorted(call_id for call_id, _ in custody.calls):
        raise _mismatch("the appended results are not the granted calls'", observation)
    for call_id, name in custody.calls:
        if name == EVIDENCE_TOOL:
            expected: Any = OBSERVATION_UNAVAILABLE
        else:
            retained = intact_blob(
                partial(blob_rows.get_content, connection), custody.retained.get(call_id, "")
            )
            if retained is None:
                raise _mismatch(f"the retained result of {call_id} is not stored", observation)
            expected = parse_json(retained)
        if digest_of(results[call_id]) != digest_of(expected):
            raise _mismatch(f"the result appended for {call_id} is not exact", observation)


def store_checkpoint(connection: Connection, observation: ObservationInput, now: str) -> None:
    """The separate derived checkpoint, stored inside the transaction (content-addressed)."""
    if not blob_rows.blob_exists(connection, observation.derived_checkpoint_digest):
        blob_rows.insert_blob(
            connection,
            observation.derived_checkpoint_digest,
            observation.derived_checkpoint,
            DERIVED_CHECKPOINT_MEDIA_TYPE,
            now,
        )


def invocation_binding(
    record: ExecutionRequestRecord, checkpoint_digest: str, policy_revision: int
) -> dict[str, object]:
    """What the requeued request continues under: the same request and attempt, the separate
    derived checkpoint, the current policy revision; the next claim raises the generation."""
    binding = {
        "execution_request_id": record.execution_request_id,
        "attempt_id": record.attempt_id,
        "checkpoint_digest": checkpoint_digest,
        "replaces_checkpoint_digest": record.checkpoint_digest,
        "lease_generation": record.lease_generation,
        "policy_revision": policy_revision,
    }
    return {**binding, "binding_digest": digest_of(binding)}


def witness_fields(
    found: ObservationInput | None, custody: ObservationCustody
) -> dict[str, object]:
    """What the read-only observation witness adds: the consumed turn and its reconstruction.
    The original unknown tool outcome stays unchanged; this entry explains the continuation."""
    if found is None:
        return {}
    return {
        "derived_checkpoint_digest": found.derived_checkpoint_digest,
        "observation_witness_digest": found.witness_digest,
        "source_checkpoint_digest": custody.pending_checkpoint_digest,
        "consumed_response_digest": custody.consumed_response_digest,
        "unavailable_call_id": custody.evidence_call_id,
        "retained_results": dict(sorted(custody.retained.items())),
        "appended_result": dict(OBSERVATION_UNAVAILABLE),
    }
