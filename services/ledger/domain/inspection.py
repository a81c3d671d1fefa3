"""Historical record inspection (pure): the checks a referenced record must pass before its
original JSON text is credential-screened, and the report of one record.

Order of checks, each failing with its own status: stored, hash, encoded bounds (size, UTF-8,
nesting, integer range), canonical structure (RFC 8785 bytes, sealed state digest, exact keys and
JSON types), known SDK epoch, typed budgets (usage counters and limits). Only then is the text
screened, and the report keeps every field of the record with credential spans redacted. The
report never decodes the record into an SDK object.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from services.ledger.domain.credential_screening import Finding, field_count, redact, screen
from shared.continuity.canonical import (
    CanonicalJsonError,
    canonical_bytes,
    canonical_text,
    digest_of,
)
from shared.continuity.canonical import sha256_digest as digest_bytes
from shared.continuity.sdk_epochs import (
    DERIVED_FORMAT,
    DERIVED_KEYS,
    HISTORICAL_FORMAT,
    KNOWN_EPOCHS,
    epoch_name,
    validator_standing,
)

MAX_RECORD_BYTES: Final = 16 * 1024 * 1024
MAX_DEPTH: Final = 64
MAX_INTEGER: Final = 2**53 - 1
TELEMETRY_FIELDS: Final = (
    "telemetry_mcp_url_ids",
    "telemetry_mcp_url_toolset_ids",
    "telemetry_mcp_url_tool_names",
)
HISTORICAL_KEYS: Final = frozenset(
    {"format", "runtime", "run", "provider", "state", "state_digest"}
)
HISTORICAL_STATE_KEYS: Final = frozenset(
    {
        "messages",
        "usage",
        "limits",
        "model_settings",
        "model_request_parameters",
        *TELEMETRY_FIELDS,
    }
)
# Counter → the parent total it is already included in (never above it).
CHILD_COUNTERS: Final = {
    "output_reasoning_tokens": "output_tokens",
    "cache_write_1h_tokens": "cache_write_tokens",
}


class RecordKind(enum.Enum):
    HISTORICAL_CHECKPOINT = "HISTORICAL_CHECKPOINT"
    DERIVED_CHECKPOINT = "DERIVED_CHECKPOINT"
    RAW_RESPONSE = "RAW_RESPONSE"


class RecordStatus(enum.Enum):
    INSPECTED = "INSPECTED"
    BLOB_MISSING = "BLOB_MISSING"
    HASH_MISMATCH = "HASH_MISMATCH"
    OUT_OF_BOUNDS = "OUT_OF_BOUNDS"
    NOT_CANONICAL = "NOT_CANONICAL"
    STRUCTURE_REFUSED = "STRUCTURE_REFUSED"
    BUDGET_REFUSED = "BUDGET_REFUSED"
    EPOCH_UNKNOWN = "EPOCH_UNKNOWN"


@dataclass(frozen=True)
class Validator:
    named_source_hash: str
    name: str
    original_source_hash: str
    standing: str


@dataclass(frozen=True)
class RecordReport:
    referenced_by_sequence: int
    reference_field: str
    digest: str
    kind: RecordKind
    status: RecordStatus
    problem: str = ""
    sdk_epoch: str = ""
    size_bytes: int = 0
    record_json: str = ""
    field_count: int = 0
    telemetry_provenance_json: str = ""
    validator: Validator | None = None
    findings: tuple[Finding, ...] = field(default_factory=tuple)


class _Refused(Exception):
    def __init__(self, status: RecordStatus, problem: str) -> None:
        super().__init__(problem)
        self.status = status
        self.problem = problem


def inspect_record(
    kind: RecordKind,
    *,
    referenced_by_sequence: int,
    reference_field: str,
    digest: str,
    stored: bytes | None,
) -> RecordReport:
    """The report of one referenced record (``stored`` None: the blob is not stored)."""
    base = RecordReport(
        referenced_by_sequence=referenced_by_sequence,
        reference_field=reference_field,
        digest=digest,
        kind=kind,
        status=RecordStatus.BLOB_MISSING,
        problem="not stored",
    )
    if stored is None:
        return base
    try:
        text, record = _checked(kind, digest, stored)
        epoch, validator = _epoch(kind, record)
        _budgets(kind, record)
    except _Refused as refused:
        return replace(base, status=refused.status, problem=refused.problem, size_bytes=len(stored))
    state = record.get("state") if isinstance(record, dict) else None
    telemetry = (
        {name: state[name] for name in TELEMETRY_FIELDS if name in state}
        if isinstance(state, dict)
        else {}
    )
    return replace(
        base,
        status=RecordStatus.INSPECTED,
        problem="",
        sdk_epoch=epoch,
        size_bytes=len(stored),
        record_json=canonical_text(redact(record)),
        field_count=field_count(record),
        telemetry_provenance_json=canonical_text(redact(telemetry)) if telemetry else "",
        validator=validator,
        findings=tuple(screen(record, text)),
    )


def _checked(kind: RecordKind, digest: str, stored: bytes) -> tuple[str, Any]:
    """Hash, encoded bounds and canonical structure; the original text and the parsed record."""
    if digest_bytes(stored) != digest:
        raise _Refused(RecordStatus.HASH_MISMATCH, "stored bytes do not hash to the named digest")
    if len(stored) > MAX_RECORD_BYTES:
        raise _Refused(RecordStatus.OUT_OF_BOUNDS, f"larger than {MAX_RECORD_BYTES} bytes")
    try:
        text = stored.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Refused(RecordStatus.OUT_OF_BOUNDS, f"not UTF-8 at byte {exc.start}") from exc
    try:
        record = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise _Refused(RecordStatus.OUT_OF_BOUNDS, f"not JSON: {exc}") from exc
    _bounds(record, "", 0)
    if not isinstance(record, dict):
        raise _Refused(RecordStatus.STRUCTURE_REFUSED, "/: not a JSON object")
    if kind is RecordKind.RAW_RESPONSE:
        return text, record  # provider bytes: never canonical, no sealed digest
    try:
        canonical = canonical_bytes(record)
    except CanonicalJsonError as exc:
        raise _Refused(RecordStatus.NOT_CANONICAL, f"/: {exc}") from exc
    if canonical != stored:
        raise _Refused(RecordStatus.NOT_CANONICAL, "/: bytes are not RFC 8785 canonical JSON")
    _structure(kind, record)
    return text, record


def _structure(kind: RecordKind, record: dict[str, Any]) -> None:
    """Exact keys, the sealed state digest and the JSON types of the state's parts."""
    keys = HISTORICAL_KEYS if kind is RecordKind.HISTORICAL_CHECKPOINT else DERIVED_KEYS
    for key in sorted(record.keys() ^ keys):
        raise _Refused(RecordStatus.STRUCTURE_REFUSED, f"/{key}: unknown or missing")
    state = record["state"]
    if not isinstance(state, dict):
        raise _Refused(RecordStatus.STRUCTURE_REFUSED, "/state: not an object")
    if record["state_digest"] != digest_of(state):
        raise _Refused(RecordStatus.NOT_CANONICAL, "/state_digest: does not seal the state")
    if kind is RecordKind.HISTORICAL_CHECKPOINT:
        for key in sorted(state.keys() ^ HISTORICAL_STATE_KEYS):
            raise _Refused(RecordStatus.STRUCTURE_REFUSED, f"/state/{key}: unknown or missing")
        for name in TELEMETRY_FIELDS:
            value = state[name]
            if value is not None and not (
                isinstance(value, list) and all(isinstance(v, str) for v in value)
            ):
                raise _Refused(RecordStatus.STRUCTURE_REFUSED, f"/state/{name}: wrong JSON type")
    for name in ("usage", "limits"):
        if not isinstance(state.get(name), dict):
            raise _Refused(RecordStatus.STRUCTURE_REFUSED, f"/state/{name}: not an object")


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _bounds(value: Any, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise _Refused(RecordStatus.OUT_OF_BOUNDS, f"{path or '/'}: nested deeper than {MAX_DEPTH}")
    if isinstance(value, bool):
        return
    if isinstance(value, int) and abs(value) > MAX_INTEGER:
        raise _Refused(RecordStatus.OUT_OF_BOUNDS, f"{path or '/'}: integer beyond 2^53-1")
    if isinstance(value, dict):
        for key, item in value.items():
            _bounds(item, f"{path}/{key}", depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _bounds(item, f"{path}/{index}", depth + 1)


def _epoch(kind: RecordKind, record: Mapping[str, Any]) -> tuple[str, Validator | None]:
    """The known SDK epoch of a checkpoint (format and complete runtime), and the validator
    identity a historical one names."""
    if kind is RecordKind.RAW_RESPONSE:
        return "", None
    expected_format = (
        HISTORICAL_FORMAT if kind is RecordKind.HISTORICAL_CHECKPOINT else DERIVED_FORMAT
    )
    if record["format"] != expected_format:
        raise _Refused(RecordStatus.EPOCH_UNKNOWN, f"/format: {record['format']!r}")
    runtime = KNOWN_EPOCHS[expected_format]
    if kind is RecordKind.HISTORICAL_CHECKPOINT:
        carried = record["runtime"]
        path = "/runtime"
    else:
        compatibility = record["compatibility"]
        carried = compatibility.get("target_runtime") if isinstance(compatibility, dict) else None
        path = "/compatibility/target_runtime"
    if not isinstance(carried, dict):
        raise _Refused(RecordStatus.STRUCTURE_REFUSED, f"{path}: not an object")
    for key, value in runtime.items():
        if carried.get(key) != value:
            raise _Refused(RecordStatus.EPOCH_UNKNOWN, f"{path}/{key}: {carried.get(key)!r}")
    if kind is RecordKind.DERIVED_CHECKPOINT:
        return epoch_name(runtime), None
    named = carried.get("evidence_validator")
    named_hash = named.get("source_hash") if isinstance(named, dict) else None
    source = validator_standing(named_hash)
    validator = Validator(
        named_source_hash=named_hash if isinstance(named_hash, str) else "",
        name=source.name if source else "",
        original_source_hash=source.original_source_hash if source else "",
        standing=source.standing if source else "unreviewed",
    )
    return epoch_name(runtime), validator


def _budgets(kind: RecordKind, record: Mapping[str, Any]) -> None:
    """Usage counters are bounded integers (a child never above its parent); ``*_limit`` values
    are non-negative numbers or null, and the other limit settings are Boolean flags."""
    if kind is RecordKind.RAW_RESPONSE:
        usage = record.get("usage")
        if usage is not None and not isinstance(usage, dict):
            raise _Refused(RecordStatus.BUDGET_REFUSED, "/usage: not an object")
        _counters(usage or {}, "/usage", allow_nested=True)
        return
    state = record["state"]
    _counters(state["usage"], "/state/usage", allow_nested=False)
    messages = state.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        usage = message.get("usage") if isinstance(message, dict) else None
        if isinstance(usage, dict):
            _counters(usage, f"/state/messages/{index}/usage", allow_nested=False)
    for name, value in state["limits"].items():
        where = f"/state/limits/{name}"
        if not name.endswith("_limit"):
            if not isinstance(value, bool):  # a flag such as count_tokens_before_request
                raise _Refused(RecordStatus.BUDGET_REFUSED, f"{where}: not a Boolean flag")
            continue
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise _Refused(RecordStatus.BUDGET_REFUSED, f"{where}: not a bounded number or null")


def _counters(usage: Mapping[str, Any], path: str, *, allow_nested: bool) -> None:
    for name, value in usage.items():
        where = f"{path}/{name}"
        if name == "cost":  # the SDK keeps cost as a decimal string
            continue
        if isinstance(value, dict):
            if name != "details" and not allow_nested:
                raise _Refused(RecordStatus.BUDGET_REFUSED, f"{where}: not a counter")
            _counters(value, where, allow_nested=allow_nested)
            continue
        if value is None and allow_nested:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _Refused(RecordStatus.BUDGET_REFUSED, f"{where}: not a non-negative integer")
    for child, parent in CHILD_COUNTERS.items():
        if child in usage and isinstance(usage.get(parent), int) and usage[child] > usage[parent]:
            raise _Refused(RecordStatus.BUDGET_REFUSED, f"{path}/{child}: above {parent}")
