"""Reading a historical checkpoint: canonical record, sealed state digest, registered identities."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from services.reconstruction.domain.registry import HISTORICAL_FORMAT, SOURCE_RUNTIME
from shared.agent.envelope import HISTORICAL, check_shape
from shared.agent.historical import (
    OLD_ADVERTISED_SCHEMA,
    REGISTERED_VALIDATORS,
    HistoricalValidator,
)
from shared.continuity.canonical import (
    CanonicalJsonError,
    canonical_bytes,
    digest_of,
    parse_json,
    sha256_digest,
)
from shared.runtime.errors import FailedPrecondition, InvalidArgument

ENVELOPE_KEYS: Final = frozenset({"format", "runtime", "run", "provider", "state", "state_digest"})
STATE_KEYS: Final = frozenset(
    {
        "messages",
        "usage",
        "limits",
        "model_settings",
        "model_request_parameters",
        "telemetry_mcp_url_ids",
        "telemetry_mcp_url_toolset_ids",
        "telemetry_mcp_url_tool_names",
    }
)


def _refuse_field(reason: str, field: str, message: str) -> FailedPrecondition:
    return FailedPrecondition(reason, message, metadata={"field": field})


@dataclass(frozen=True)
class CheckpointRecord:
    """A verified historical checkpoint. ``envelope`` is the parsed record; never mutated."""

    raw: bytes
    digest: str
    envelope: MappingProxyType[str, Any]
    validator: HistoricalValidator

    @property
    def state(self) -> Any:
        return self.envelope["state"]

    @property
    def run(self) -> Any:
        return self.envelope["run"]

    @property
    def provider(self) -> Any:
        return self.envelope["provider"]


def read_checkpoint(raw: bytes) -> CheckpointRecord:
    """Verify encoding, canonical form, sealed digest and registered identities."""
    try:
        envelope = parse_json(raw)
    except CanonicalJsonError as exc:
        raise InvalidArgument("CHECKPOINT_MALFORMED", f"checkpoint is not JSON: {exc}") from exc
    if not isinstance(envelope, dict):
        raise InvalidArgument("CHECKPOINT_MALFORMED", "checkpoint must be a JSON object")
    if canonical_bytes(envelope) != raw:
        raise _refuse_field("CHECKPOINT_NOT_CANONICAL", "/", "checkpoint bytes are not canonical")
    for key in sorted(envelope.keys() ^ ENVELOPE_KEYS):
        raise _refuse_field("MIGRATION_FIELD_REFUSED", "/" + key, f"unknown or missing {key!r}")
    # Every field outside the sealed state, before anything reads one.
    check_shape(envelope, HISTORICAL)
    if envelope["format"] != HISTORICAL_FORMAT:
        raise _refuse_field(
            "CHECKPOINT_FORMAT_UNSUPPORTED", "/format", f"format {envelope['format']!r}"
        )
    state = envelope["state"]
    if envelope["state_digest"] != digest_of(state):
        raise _refuse_field(
            "CHECKPOINT_DIGEST_MISMATCH", "/state_digest", "state does not match its sealed digest"
        )
    for key in sorted(state.keys() ^ STATE_KEYS):
        raise _refuse_field(
            "MIGRATION_FIELD_REFUSED", "/state/" + key, f"unknown or missing {key!r}"
        )
    runtime = envelope["runtime"]
    for key, expected in SOURCE_RUNTIME.items():
        if runtime.get(key) != expected:
            raise _refuse_field(
                "SDK_TRANSITION_UNSUPPORTED",
                "/runtime/" + key,
                f"{key} {runtime.get(key)!r} is not the registered source {expected!r}",
            )
    return CheckpointRecord(
        raw=raw,
        digest=sha256_digest(raw),
        envelope=MappingProxyType(envelope),
        validator=resolve_validator(runtime),
    )


def resolve_validator(
    runtime: Any, registry: Mapping[str, HistoricalValidator] = REGISTERED_VALIDATORS
) -> HistoricalValidator:
    """The registered validator (original or reviewed successor) the runtime names, after a
    complete source-hash check; any other hash is ineligible until reviewed."""
    claimed = runtime.get("evidence_validator", {}).get("source_hash")
    validator = registry.get(claimed) if isinstance(claimed, str) else None
    field = "/runtime/evidence_validator/source_hash"
    if validator is None:
        raise _refuse_field("HISTORICAL_IDENTITY_UNREGISTERED", field, "validator not registered")
    if validator.current_source_hash() != validator.registered_source_hash:
        # The pinned source file itself drifted: no proof may be rebuilt from it.
        raise _refuse_field("HISTORICAL_IDENTITY_UNREGISTERED", field, "pinned source changed")
    if runtime.get("advertised_schema_digest") != digest_of(dict(OLD_ADVERTISED_SCHEMA)):
        raise _refuse_field(
            "HISTORICAL_IDENTITY_UNREGISTERED",
            "/runtime/advertised_schema_digest",
            "advertised schema is not the registered historical schema",
        )
    return validator
