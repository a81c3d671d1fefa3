"""The native journal's rules: typed entry kinds, payload validation, and sealing an entry into
the hash chain (whose definition lives in shared.continuity.journal_chain). Pure functions; the
ledger
transaction applies them."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.continuity.blob_references import named_blobs
from shared.continuity.canonical import CanonicalJsonError, canonical_text, is_digest, parse_json
from shared.continuity.identifiers import IDENTIFIER
from shared.continuity.journal_chain import entry_hash
from shared.continuity.records import direct_constructor
from shared.runtime.errors import FieldViolation, InvalidArgument

MAX_PAYLOAD_BYTES = 256 * 1024
#: A reason a caller gives for failing or cancelling a request is a short machine-readable word
#: or sentence; it is journaled, so a bound keeps a caller from storing (and every reader from
#: screening) megabytes through it (ADR 0041).
MAX_REASON_CHARS = 512


class EntryKind(enum.Enum):
    """Journal entry kinds; values are the stored names (the proto enum without its prefix)."""

    RUN_STARTED = "run_started"
    CHECKPOINT_STORED = "checkpoint_stored"
    MODEL_REQUEST_SENT = "model_request_sent"
    RESPONSE_CONSUMED = "response_consumed"
    TOOL_CALL_GRANTED = "tool_call_granted"
    TOOL_INTENT = "tool_intent"
    TOOL_OUTCOME = "tool_outcome"
    COMMAND_EXECUTED = "command_executed"
    WORKER_CLAIMED = "worker_claimed"
    REQUEST_FAILED = "request_failed"
    RUN_HELD = "run_held"
    STARTUP_RECOVERY_ANNOTATION = "startup_recovery_annotation"
    MIGRATION_SETTLEMENT = "migration_settlement"
    OWNERSHIP_CLAIM = "ownership_claim"
    RECOVERY_WITNESS = "recovery_witness"
    REQUEST_EVENT = "request_event"
    REFUSAL_SETTLEMENT = "refusal_settlement"
    ADMISSION_REFUSAL = "admission_refusal"
    RECONCILIATION_VERIFICATION = "reconciliation_verification"
    RECONCILIATION_SETTLEMENT = "reconciliation_settlement"
    READONLY_OBSERVATION_RECOVERY = "readonly_observation_recovery"


# Kinds only the ledger's own transactions write; a caller can never forge them by append.
LEDGER_ONLY_KINDS = frozenset(
    {
        EntryKind.MIGRATION_SETTLEMENT,
        EntryKind.OWNERSHIP_CLAIM,
        EntryKind.RECOVERY_WITNESS,
        EntryKind.REQUEST_EVENT,
        EntryKind.REFUSAL_SETTLEMENT,
        EntryKind.ADMISSION_REFUSAL,
        EntryKind.RECONCILIATION_VERIFICATION,
        EntryKind.RECONCILIATION_SETTLEMENT,
        EntryKind.READONLY_OBSERVATION_RECOVERY,
    }
)

# Native kinds that resume, retry or hand off a run: while a continuity execution request of the
# run is queued or claimed, only the ledger and the lease holder write them (ADR 0014, rule 3b).
# An annotation of the platform's own startup recovery resumes nothing.
NATIVE_RESUME_KINDS = (
    frozenset(EntryKind) - LEDGER_ONLY_KINDS - {EntryKind.STARTUP_RECOVERY_ANNOTATION}
)

REQUIRED_KEYS: Mapping[EntryKind, tuple[str, ...]] = {
    EntryKind.RUN_STARTED: ("task_id", "attempt_id"),
    EntryKind.CHECKPOINT_STORED: ("checkpoint_digest",),
    EntryKind.MODEL_REQUEST_SENT: ("request_id", "checkpoint_digest"),
    EntryKind.RESPONSE_CONSUMED: ("request_id", "response_digest"),
    EntryKind.TOOL_CALL_GRANTED: ("call_id", "tool_name"),
    EntryKind.TOOL_INTENT: ("call_id",),
    EntryKind.TOOL_OUTCOME: ("call_id", "status"),
    EntryKind.COMMAND_EXECUTED: ("command_id",),
    EntryKind.WORKER_CLAIMED: ("execution_request_id", "lease_generation"),
    EntryKind.REQUEST_FAILED: ("execution_request_id", "reason"),
    EntryKind.RUN_HELD: ("reason",),
    EntryKind.STARTUP_RECOVERY_ANNOTATION: ("annotation",),
    EntryKind.MIGRATION_SETTLEMENT: ("request_id", "derived_checkpoint_digest", "candidate_digest"),
    EntryKind.OWNERSHIP_CLAIM: ("request_id", "execution_request_id", "lease_seconds"),
    EntryKind.RECOVERY_WITNESS: ("recovery_id", "workflow"),
    EntryKind.REQUEST_EVENT: ("execution_request_id", "event"),
    EntryKind.REFUSAL_SETTLEMENT: ("recovery_id",),
    EntryKind.ADMISSION_REFUSAL: ("reason",),
    EntryKind.RECONCILIATION_VERIFICATION: (
        "reconciliation_id",
        "execution_request_id",
        "reconciliation_digest",
        "expires_at",
    ),
    EntryKind.RECONCILIATION_SETTLEMENT: (
        "reconciliation_id",
        "execution_request_id",
        "decision",
        "fenced_lease_generation",
    ),
    EntryKind.READONLY_OBSERVATION_RECOVERY: ("recovery_id", "derived_checkpoint_digest"),
}

TOOL_OUTCOME_STATUSES = frozenset({"succeeded", "failed", "unknown"})
#: Top-level payload members the ledger itself reads as identifiers: the request a fenced write
#: names and the command a receipt charges, held to the rule RecordCommand and the request rows
#: hold them to (a look-alike such as "exr-1\n" would name no request and pass the fence).
IDENTIFIER_MEMBERS = ("execution_request_id", "command_id")


@dataclass(frozen=True)
class StoredEntry:
    """One journal row as stored."""

    run_id: str
    sequence: int
    kind: str
    payload_json: str
    prev_hash: str
    hash: str
    actor: str
    recorded_at: str


#: ``StoredEntry(...)`` for every row of a journal read (a snapshot builds one per entry).
build_stored_entry = direct_constructor(StoredEntry)


def _check_payload_size(payload_json: str) -> None:
    # Four UTF-8 bytes a character at most: short payloads skip the encoding.
    if len(payload_json) * 4 > MAX_PAYLOAD_BYTES and (
        len(payload_json.encode("utf-8")) > MAX_PAYLOAD_BYTES
    ):
        raise InvalidArgument(
            "JOURNAL_PAYLOAD_TOO_LARGE",
            f"payload exceeds {MAX_PAYLOAD_BYTES} bytes",
            metadata={"limit_bytes": str(MAX_PAYLOAD_BYTES)},
            field_violations=[FieldViolation("payload_json", "too large")],
        )


def check_reason(reason: str, field: str = "reason") -> None:
    """INVALID_ARGUMENT ``REASON_TOO_LONG`` for a reason over :data:`MAX_REASON_CHARS`."""
    if len(reason) > MAX_REASON_CHARS:
        raise InvalidArgument(
            "REASON_TOO_LONG",
            f"{field} is limited to {MAX_REASON_CHARS} characters, not {len(reason)}",
            metadata={"field": field, "limit_chars": str(MAX_REASON_CHARS)},
            field_violations=[FieldViolation(field, "too long")],
        )


def validate_payload(kind: EntryKind, payload_json: str) -> str:
    """The canonical text of a valid payload, or INVALID_ARGUMENT naming what is wrong."""
    _check_payload_size(payload_json)
    try:
        payload = parse_json(payload_json)
        canonical = canonical_text(payload)
    except CanonicalJsonError as exc:
        raise InvalidArgument(
            "JOURNAL_PAYLOAD_INVALID",
            f"payload is not valid JSON: {exc}",
            field_violations=[FieldViolation("payload_json", str(exc))],
        ) from exc
    if not isinstance(payload, dict):
        raise InvalidArgument(
            "JOURNAL_PAYLOAD_INVALID",
            "payload must be a JSON object",
            field_violations=[FieldViolation("payload_json", "must be a JSON object")],
        )
    missing = [key for key in REQUIRED_KEYS[kind] if key not in payload]
    if missing:
        raise InvalidArgument(
            "JOURNAL_PAYLOAD_INVALID",
            f"{kind.value} payload is missing {', '.join(missing)}",
            metadata={"kind": kind.value, "missing": ",".join(missing)},
            field_violations=[
                FieldViolation(f"payload_json.{key}", "required for this kind") for key in missing
            ],
        )
    misnamed = misnamed_values(payload)
    if misnamed:
        raise InvalidArgument(
            "JOURNAL_PAYLOAD_INVALID",
            f"payload names a blob or an id malformed: {', '.join(v.field for v in misnamed)}",
            metadata={"kind": kind.value},
            field_violations=misnamed,
        )
    if kind is EntryKind.TOOL_OUTCOME and payload["status"] not in TOOL_OUTCOME_STATUSES:
        raise InvalidArgument(
            "JOURNAL_PAYLOAD_INVALID",
            "tool_outcome status must be one of succeeded, failed, unknown",
            field_violations=[FieldViolation("payload_json.status", "unsupported status")],
        )
    return canonical


def misnamed_values(payload: dict[str, object]) -> list[FieldViolation]:
    """Where ``payload`` names a blob with a string that is no digest, or an id the ledger reads
    (:data:`IDENTIFIER_MEMBERS`) with anything but an identifier. A blob named so would be no
    blob to the export and the verifier alike (docs/formats.md, "Blob references"), yet look
    like one to a reader; a value of another type names no blob for anyone."""
    violations = [
        FieldViolation(f"payload_json.{path}", "a blob is named by sha256:<64 lowercase hex>")
        for path, value in named_blobs(payload)
        if isinstance(value, str) and not is_digest(value)
    ]
    for name in IDENTIFIER_MEMBERS:
        value = payload.get(name)
        if name in payload and not (isinstance(value, str) and IDENTIFIER.fullmatch(value)):
            violations.append(
                FieldViolation(f"payload_json.{name}", "1..128 characters of [A-Za-z0-9._:-]")
            )
    return violations


def seal(
    run_id: str,
    sequence: int,
    kind: EntryKind,
    canonical_payload: str,
    prev_hash: str,
    actor: str,
    recorded_at: str,
    *,
    payload: Any = None,
) -> StoredEntry:
    """A new entry linked to ``prev_hash`` with its hash computed. Every entry is sealed here,
    native or written by a workflow, so the payload bound holds for all of them. ``payload``:
    ``canonical_payload`` parsed, when the caller has parsed it already (None: parsed here)."""
    _check_payload_size(canonical_payload)
    digest = entry_hash(
        run_id=run_id,
        sequence=sequence,
        kind=kind.value,
        payload=parse_json(canonical_payload) if payload is None else payload,
        prev_hash=prev_hash,
        actor=actor,
        recorded_at=recorded_at,
    )
    return StoredEntry(
        run_id, sequence, kind.value, canonical_payload, prev_hash, digest, actor, recorded_at
    )


#: Request events that queue an execution request (besides the admission's ownership claim).
QUEUEING_EVENTS = frozenset({"requeued_by_recovery", "queued_by_reconciliation"})


def payload_of(entry: StoredEntry) -> Any:
    """``entry``'s payload, parsed."""
    return parse_json(entry.payload_json)


def queued_at(
    entries: Iterable[StoredEntry],
    execution_request_id: str,
    parse: Callable[[StoredEntry], Any] = payload_of,
) -> int:
    """The sequence of the newest entry that queued ``execution_request_id``: its ownership
    claim, or a recovery's or reconciliation's request event (0 if none). ``parse``: an entry's
    payload (a caller that reads the same entries again passes one that keeps them parsed)."""
    found = 0
    for entry in entries:
        payload = parse(entry)
        if not isinstance(payload, dict) or payload.get("execution_request_id") != (
            execution_request_id
        ):
            continue
        if entry.kind == EntryKind.OWNERSHIP_CLAIM.value or (
            entry.kind == EntryKind.REQUEST_EVENT.value and payload.get("event") in QUEUEING_EVENTS
        ):
            found = max(found, entry.sequence)
    return found


def unknown_tool_calls(
    outcomes: Iterable[StoredEntry],
    after: int = 0,
    parse: Callable[[StoredEntry], Any] = payload_of,
) -> tuple[str, ...]:
    """Call ids whose newest ``tool_outcome`` (entries in sequence order) is ``unknown`` and was
    recorded after sequence ``after``: what was known when the request was queued, the
    admissibility check already judged. ``parse`` as for :func:`queued_at`."""
    latest: dict[str, tuple[int, str]] = {}
    for entry in outcomes:
        payload = parse(entry)
        if isinstance(payload, dict) and isinstance(payload.get("call_id"), str):
            latest[payload["call_id"]] = (entry.sequence, str(payload.get("status", "")))
    return tuple(
        sorted(
            call
            for call, (sequence, status) in latest.items()
            if status == "unknown" and sequence > after
        )
    )
