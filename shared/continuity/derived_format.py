"""The derived checkpoint's documents, declared once (docs/formats.md; ADR 0055): the envelope a
reconstruction stores, the witness that proves it (invalid read or read-only observation) and its
accounting. Each has one writer (``to_json``; ``canonical`` for the envelope's stored bytes) and
the envelope one parser (``parse_envelope``) and one lenient reader of what it claims
(``DerivedClaims``): no other module builds these documents or reads them by key.

The digests are over canonical JSON (RFC 8785: keys sorted), so the field order here is free; the
keys and values are the format. The ledger and the rules read these documents without the SDK,
which is why they live here and not beside the agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from shared.continuity.canonical import CanonicalJsonError, canonical_bytes, digest_of, parse_json
from shared.continuity.sdk_epochs import DERIVED_FORMAT

MIGRATION_WITNESS_FORMAT: Final = "forge.continuity.migration-witness/1"
OBSERVATION_WITNESS_FORMAT: Final = "forge.continuity.readonly-observation-witness/1"
#: The media type a derived checkpoint's blob row is stored under. Not hashed and not read to
#: decide anything, but stored and returned by GetBlob and run snapshots, so each writer keeps
#: the value it has always written (ADR 0055): a recovery commit names the format; an
#: invalid-read admission stores the plain JSON type it stored before the format had a name.
DERIVED_CHECKPOINT_MEDIA_TYPE: Final = "application/vnd.forge.derived-checkpoint+json"
ADMITTED_DERIVED_CHECKPOINT_MEDIA_TYPE: Final = "application/json"
#: ``reconstruction.workflow`` of a read-only observation's derived checkpoint.
READONLY_OBSERVATION_WORKFLOW: Final = "readonly_observation"
#: A JSON object as parsed (values of any JSON type).
Json = dict[str, Any]


def _pinned(reader: Mapping[str, str] | None) -> Json:
    """The optional source-reader pin, present only when a source reader's call is appended."""
    return {"source_reader": dict(reader)} if reader is not None else {}


@dataclass(frozen=True)
class AppendedResult:
    """A tool result the derived history appends for a consumed call."""

    tool_call_id: str
    tool_name: str
    content: Any

    def to_json(self) -> Json:
        return {
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "content": self.content,
        }


@dataclass(frozen=True)
class UncheckedResult:
    """An appended result of another shape, kept as found: the envelope's shape check does not
    look inside ``appended_results`` and no reader of the resume contract needs them, so parsing
    refuses nothing it accepted before and writes the item back unchanged."""

    value: Any

    def to_json(self) -> Any:
        return self.value


_RESULT_KEYS: Final = frozenset({"tool_call_id", "tool_name", "content"})


def _appended(item: Any) -> AppendedResult | UncheckedResult:
    if (
        isinstance(item, dict)
        and item.keys() == _RESULT_KEYS
        and isinstance(item["tool_call_id"], str)
        and isinstance(item["tool_name"], str)
    ):
        return AppendedResult(item["tool_call_id"], item["tool_name"], item["content"])
    return UncheckedResult(item)


@dataclass(frozen=True)
class Source:
    """What the derived checkpoint continues from: the source checkpoint, its sealed state, the
    consumed raw response, and the run and provider they belong to."""

    checkpoint_digest: str
    state_digest: str
    raw_response_digest: str
    run: Json
    provider: Json

    def to_json(self) -> Json:
        return {
            "checkpoint_digest": self.checkpoint_digest,
            "state_digest": self.state_digest,
            "raw_response_digest": self.raw_response_digest,
            "run": dict(self.run),
            "provider": dict(self.provider),
        }


@dataclass(frozen=True)
class Reconstruction:
    """How it was derived: an invalid read names its ``version``, a recovery its ``workflow``."""

    consumed_at: str
    appended_results: tuple[AppendedResult | UncheckedResult, ...]
    version: int | None = None
    workflow: str | None = None
    source_reader: Mapping[str, str] | None = None

    def to_json(self) -> Json:
        kind: Json = {"version": self.version} if self.version is not None else {}
        if self.workflow is not None:
            kind["workflow"] = self.workflow
        return {
            **kind,
            "consumed_at": self.consumed_at,
            "appended_results": [result.to_json() for result in self.appended_results],
            **_pinned(self.source_reader),
        }


@dataclass(frozen=True)
class DerivedEnvelope:
    """A derived checkpoint (``forge.continuity.derived-checkpoint/1``)."""

    transition: Json
    target_runtime: Json
    source: Source
    reconstruction: Reconstruction
    state: Json
    state_digest: str
    witness_digest: str
    contract_digest: str
    accounting_digest: str
    format: str = DERIVED_FORMAT

    @classmethod
    def sealed(
        cls,
        *,
        transition: Json,
        target_runtime: Mapping[str, str],
        source: Source,
        reconstruction: Reconstruction,
        state: Json,
        witness: Json,
        contract_digest: str,
        accounting: Json,
    ) -> DerivedEnvelope:
        """The envelope over ``state`` with its state, witness and accounting digests."""
        return cls(
            transition=transition,
            target_runtime=dict(target_runtime),
            source=source,
            reconstruction=reconstruction,
            state=state,
            state_digest=digest_of(state),
            witness_digest=digest_of(witness),
            contract_digest=contract_digest,
            accounting_digest=digest_of(accounting),
        )

    def to_json(self) -> Json:
        return {
            "format": self.format,
            "compatibility": {
                "transition": self.transition,
                "target_runtime": dict(self.target_runtime),
            },
            "source": self.source.to_json(),
            "reconstruction": self.reconstruction.to_json(),
            "state": self.state,
            "state_digest": self.state_digest,
            "witness_digest": self.witness_digest,
            "contract_digest": self.contract_digest,
            "accounting_digest": self.accounting_digest,
        }

    def canonical(self) -> bytes:
        """The stored bytes (their SHA-256 is the derived checkpoint digest)."""
        return canonical_bytes(self.to_json())


def parse_envelope(document: Mapping[str, Any]) -> DerivedEnvelope:
    """The typed envelope of a derived checkpoint whose shape is already checked (the agent's
    ``read_derived_checkpoint`` refuses any other with the field it names); the inverse of
    ``DerivedEnvelope.to_json``."""
    compatibility, source = document["compatibility"], document["source"]
    rebuilt = document["reconstruction"]
    return DerivedEnvelope(
        format=document["format"],
        transition=compatibility["transition"],
        target_runtime=compatibility["target_runtime"],
        source=Source(
            checkpoint_digest=source["checkpoint_digest"],
            state_digest=source["state_digest"],
            raw_response_digest=source["raw_response_digest"],
            run=source["run"],
            provider=source["provider"],
        ),
        reconstruction=Reconstruction(
            consumed_at=rebuilt["consumed_at"],
            appended_results=tuple(_appended(item) for item in rebuilt["appended_results"]),
            version=rebuilt.get("version"),
            workflow=rebuilt.get("workflow"),
            source_reader=rebuilt.get("source_reader"),
        ),
        state=document["state"],
        state_digest=document["state_digest"],
        witness_digest=document["witness_digest"],
        contract_digest=document["contract_digest"],
        accounting_digest=document["accounting_digest"],
    )


def _object(value: Any) -> Json:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class DerivedClaims:
    """What derived-checkpoint bytes claim, read without trusting them (the ledger and the
    recovery rules compare each claim with their own rows): a value is as found, None when absent
    or when its record is not an object. ``records`` says whether the bytes are a JSON object
    with ``source`` and ``reconstruction`` objects; ``is_json`` whether they parse at all."""

    is_json: bool
    records: bool
    checkpoint_digest: Any = None
    raw_response_digest: Any = None
    consumed_at: Any = None
    version: Any = None
    witness_digest: Any = None
    appended_results: Any = None
    source_reader: Any = None
    #: The derived state's usage limits and message history.
    limits: Any = None
    messages: Any = None

    @classmethod
    def read(cls, content: bytes) -> DerivedClaims:
        try:
            document = parse_json(content)
        except CanonicalJsonError:
            return cls(is_json=False, records=False)
        envelope = _object(document)
        source, rebuilt = envelope.get("source"), envelope.get("reconstruction")
        records = isinstance(source, dict) and isinstance(rebuilt, dict)
        source, rebuilt = _object(source), _object(rebuilt)
        return cls(
            is_json=True,
            records=records,
            checkpoint_digest=source.get("checkpoint_digest"),
            raw_response_digest=source.get("raw_response_digest"),
            consumed_at=rebuilt.get("consumed_at"),
            version=rebuilt.get("version"),
            witness_digest=envelope.get("witness_digest"),
            appended_results=rebuilt.get("appended_results"),
            source_reader=rebuilt.get("source_reader"),
            limits=_object(envelope.get("state")).get("limits"),
            messages=_object(envelope.get("state")).get("messages"),
        )


@dataclass(frozen=True)
class MigrationWitness:
    """What proves an invalid read's derived checkpoint (``forge.continuity.migration-witness/1``):
    the transition, the source, the historical identities it was read with, the SDK projection
    and its round trip, and the tool contract's migration."""

    transition: Json
    source_checkpoint_digest: str
    source_state_digest: str
    evidence_validator: Json
    advertised_schema_digest: str
    sdk_projection: Any
    round_trip: Any
    contract_migration: Json
    historical_contract_digest: str
    current_contract_digest: str
    source_reader: Mapping[str, str] | None = None

    def to_json(self) -> Json:
        return {
            "format": MIGRATION_WITNESS_FORMAT,
            "transition": self.transition,
            "source_checkpoint_digest": self.source_checkpoint_digest,
            "source_state_digest": self.source_state_digest,
            "historical_identities": {
                "evidence_validator": dict(self.evidence_validator),
                "advertised_schema_digest": self.advertised_schema_digest,
                **_pinned(self.source_reader),
            },
            "sdk_projection": self.sdk_projection,
            "round_trip": self.round_trip,
            "tool_contract": {
                **self.contract_migration,
                "historical_contract_digest": self.historical_contract_digest,
                "current_contract_digest": self.current_contract_digest,
            },
        }


@dataclass(frozen=True)
class ObservedCall:
    """A call of the consumed response in a read-only observation witness."""

    tool_call_id: str
    tool_name: str
    args_digest: str
    #: "retained" (the exact retained result) or "unavailable" (the evidence observation).
    result: str

    def to_json(self) -> Json:
        return {
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "args_digest": self.args_digest,
            "result": self.result,
        }


@dataclass(frozen=True)
class ObservationWitness:
    """What proves a read-only observation's derived checkpoint
    (``forge.continuity.readonly-observation-witness/1``)."""

    transition: Json
    source_checkpoint_digest: str
    source_state_digest: str
    raw_response_digest: str
    consumed_at: str
    calls: tuple[ObservedCall, ...]
    history_digest: str
    contract_digest: str
    source_reader: Mapping[str, str] | None = None

    def to_json(self) -> Json:
        return {
            "format": OBSERVATION_WITNESS_FORMAT,
            "transition": self.transition,
            "source_checkpoint_digest": self.source_checkpoint_digest,
            "source_state_digest": self.source_state_digest,
            "raw_response_digest": self.raw_response_digest,
            "consumed_at": self.consumed_at,
            "calls": [call.to_json() for call in self.calls],
            "history_digest": self.history_digest,
            "contract_digest": self.contract_digest,
            **_pinned(self.source_reader),
        }


@dataclass(frozen=True)
class ConsumedResponse:
    """The consumed response, charged once; an invalid read's accounting also records its usage."""

    raw_response_digest: str
    provider_response_id: str | None
    usage: Json | None = None

    def to_json(self) -> Json:
        found: Json = {
            "raw_response_digest": self.raw_response_digest,
            "provider_response_id": self.provider_response_id,
            "charged_requests": 1,
        }
        return found if self.usage is None else {**found, "usage": self.usage}


@dataclass(frozen=True)
class InvalidReadAccounting:
    """An invalid read's accounting: each original call charged once by its fixed outcome, the
    usage before and after, the limits unchanged, no command charged."""

    consumed_response: ConsumedResponse
    fixed_outcomes: tuple[AppendedResult, ...]
    usage_before: Any
    usage_after: Any
    limits: Any
    limits_unchanged: bool

    def to_json(self) -> Json:
        return {
            "consumed_response": self.consumed_response.to_json(),
            "fixed_outcomes": [
                {
                    "tool_call_id": outcome.tool_call_id,
                    "tool_name": outcome.tool_name,
                    "result": outcome.content,
                    "charged_tool_calls": 1,
                }
                for outcome in self.fixed_outcomes
            ],
            "usage_before": self.usage_before,
            "usage_after": self.usage_after,
            "limits": self.limits,
            "limits_unchanged": self.limits_unchanged,
            "command_charge": 0,
        }


@dataclass(frozen=True)
class ObservationAccounting:
    """A read-only observation's accounting: each appended result charged once, the limits
    unchanged (checked before it is written), no command charged."""

    consumed_response: ConsumedResponse
    appended_results: tuple[AppendedResult, ...]
    usage_before: Any
    usage_after: Any

    def to_json(self) -> Json:
        return {
            "consumed_response": self.consumed_response.to_json(),
            "appended_results": [
                {"tool_call_id": r.tool_call_id, "tool_name": r.tool_name, "charged_tool_calls": 1}
                for r in self.appended_results
            ],
            "usage_before": self.usage_before,
            "usage_after": self.usage_after,
            "limits_unchanged": True,
            "command_charge": 0,
        }
