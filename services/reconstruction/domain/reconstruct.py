"""``reconstruct_invalid_read`` and ``analyze_consumed_response``: the library entry points."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from pydantic import TypeAdapter
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolReturnPart
from pydantic_ai.usage import RequestUsage

from services.reconstruction.domain.analysis import ResponseAnalysis, analyze
from services.reconstruction.domain.checkpoint import CheckpointRecord, read_checkpoint
from services.reconstruction.domain.contract import (
    captured_contract_json,
    contract_of,
    migrate_contract,
)
from services.reconstruction.domain.registry import (
    TARGET_RUNTIME,
    source_reader_pin,
    transition,
    verify_target_runtime,
)
from shared.agent.evidence import INVALID_QUERY_RESULT
from shared.agent.jsonpath import first_difference
from shared.agent.projection import MESSAGES, USAGE, Projection, project
from shared.agent.sealed import Replay, capture_current_contract, replay_consumed_response
from shared.continuity.canonical import canonical_bytes, digest_of, sha256_digest
from shared.continuity.derived_format import (
    AppendedResult,
    ConsumedResponse,
    DerivedEnvelope,
    InvalidReadAccounting,
    MigrationWitness,
    Reconstruction,
    Source,
)
from shared.continuity.sdk_epochs import SOURCE_READER_TOOLS
from shared.contract.terms import SUPPORTED_VERSIONS
from shared.runtime.errors import FailedPrecondition, InvalidArgument

OBSERVATION_UNAVAILABLE: Final = {
    "status": "observation_unavailable",
    "reason": "original_read_result_not_retained",
}
T = TypeVar("T")


@dataclass(frozen=True)
class ReconstructionResult:
    derived_checkpoint: bytes
    derived_checkpoint_digest: str
    witness: dict[str, Any]
    witness_json: str
    witness_digest: str
    captured_contract: dict[str, Any]
    captured_contract_json: str
    accounting: dict[str, Any]
    accounting_json: str


def _run(coro: Coroutine[Any, Any, T]) -> T:
    # Synchronous callers (the gRPC thread pool) get a private event loop per call.
    return asyncio.run(coro)


def _parse_consumed_at(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidArgument("CONSUMED_AT_INVALID", f"not RFC 3339: {value!r}") from exc
    if parsed.utcoffset() is None or parsed.utcoffset() != UTC.utcoffset(None):
        raise InvalidArgument("CONSUMED_AT_INVALID", "consumed_at must be UTC")
    return parsed.astimezone(UTC)


@dataclass(frozen=True)
class _Prepared:
    record: CheckpointRecord
    projection: Projection
    replay: Replay
    analysis: ResponseAnalysis


async def _prepare(checkpoint: bytes, raw_response: bytes) -> _Prepared:
    verify_target_runtime()
    record = read_checkpoint(checkpoint)
    projection = project(record.state)
    run, provider = record.run, record.provider
    replay = await replay_consumed_response(
        raw_response=raw_response,
        messages=projection.messages,
        usage=projection.usage,
        limits=projection.limits,
        conversation_id=run["conversation_id"],
        base_url=provider["base_url"],
        model_name=provider["model"],
    )
    analysis = analyze(
        response=replay.response,
        raw_response=raw_response,
        historical_tools=projection.state["model_request_parameters"]["function_tools"],
        validator=record.validator,
        runtime_identity=dict(record.envelope["runtime"]),
    )
    return _Prepared(record, projection, replay, analysis)


async def aanalyze_consumed_response(checkpoint: bytes, raw_response: bytes) -> ResponseAnalysis:
    """Async form of :func:`analyze_consumed_response`."""
    return (await _prepare(checkpoint, raw_response)).analysis


def analyze_consumed_response(checkpoint: bytes, raw_response: bytes) -> ResponseAnalysis:
    """Read-only eligibility view of a consumed response (sealed parse, nothing derived)."""
    return _run(aanalyze_consumed_response(checkpoint, raw_response))


def _results(analysis: ResponseAnalysis, version: int) -> list[tuple[str, str, dict[str, str]]]:
    assert analysis.evidence_call_id is not None
    results = [(analysis.evidence_call_id, "read_run_evidence", dict(INVALID_QUERY_RESULT))]
    if version == 2:
        results += [
            (c.tool_call_id, c.tool_name, OBSERVATION_UNAVAILABLE) for c in analysis.sibling_calls
        ]
    return results


async def areconstruct_invalid_read(
    checkpoint: bytes, raw_response: bytes, version: int, consumed_at: str
) -> ReconstructionResult:
    """Async form of :func:`reconstruct_invalid_read`."""
    if version not in SUPPORTED_VERSIONS:
        raise InvalidArgument("VERSION_UNSUPPORTED", f"version {version} is not 1 or 2")
    at = _parse_consumed_at(consumed_at)
    prepared = await _prepare(checkpoint, raw_response)
    record, projection, replay, analysis = (
        prepared.record,
        prepared.projection,
        prepared.replay,
        prepared.analysis,
    )
    for hold in analysis.holds(version):
        raise FailedPrecondition(
            hold.reason, f"{hold.message} ({hold.element})", metadata={"element": hold.element}
        )
    results = _results(analysis, version)
    # A version-2 proof with unavailable source observations pins the published historical
    # source reader whose results it stands in for (refused when absent or changed).
    reader = source_reader_pin() if any(n in SOURCE_READER_TOOLS for _, n, _ in results) else None
    state = projection.state
    historical = contract_of(
        state["model_request_parameters"],
        state["model_settings"],
        state["messages"][-1].get("instructions"),
    )
    captured = await capture_current_contract(record.provider["base_url"], record.provider["model"])
    current = captured_contract_json(captured)
    contract_witness = migrate_contract(historical, current)

    run_id, conversation_id = record.run["run_id"], record.run["conversation_id"]
    # New message metadata: native consumption time and the original run identifiers.
    response: ModelResponse = replace(
        replay.response, timestamp=at, run_id=run_id, conversation_id=conversation_id
    )
    request = ModelRequest(
        parts=[
            ToolReturnPart(tool_name=name, content=content, tool_call_id=call_id, timestamp=at)
            for call_id, name, content in results
        ],
        timestamp=at,
        run_id=run_id,
        conversation_id=conversation_id,
    )
    messages_json = MESSAGES.dump_python([*projection.messages, response, request], mode="json")
    lost = first_difference(messages_json[: len(state["messages"])], state["messages"])
    if lost is not None:
        raise FailedPrecondition("HISTORY_PREFIX_CHANGED", f"stored prefix changed at {lost}")
    usage = replay.usage
    usage.tool_calls += len(results)  # each original call charged once, by its fixed outcome
    derived_state = {
        "messages": messages_json,
        "usage": USAGE.dump_python(usage, mode="json"),
        "limits": state["limits"],
        "model_settings": current["model_settings"],
        "model_request_parameters": captured.model_request_parameters,
    }
    appended = tuple(AppendedResult(i, n, c) for i, n, c in results)
    witness = MigrationWitness(
        transition=transition(),
        source_checkpoint_digest=record.digest,
        source_state_digest=record.envelope["state_digest"],
        evidence_validator=dict(analysis.validator_identity),
        advertised_schema_digest=record.envelope["runtime"]["advertised_schema_digest"],
        sdk_projection=projection.witness,
        round_trip=projection.round_trip,
        contract_migration=contract_witness,
        historical_contract_digest=digest_of(historical),
        current_contract_digest=digest_of(current),
        source_reader=reader,
    ).to_json()
    accounting = InvalidReadAccounting(
        consumed_response=ConsumedResponse(
            raw_response_digest=sha256_digest(raw_response),
            provider_response_id=replay.response.provider_response_id,
            usage=TypeAdapter(RequestUsage).dump_python(replay.response.usage, mode="json"),
        ),
        fixed_outcomes=appended,
        usage_before=state["usage"],
        usage_after=derived_state["usage"],
        limits=state["limits"],
        limits_unchanged=derived_state["limits"] == state["limits"],
    ).to_json()
    envelope = DerivedEnvelope.sealed(
        transition=transition(),
        target_runtime=TARGET_RUNTIME,
        source=Source(
            checkpoint_digest=record.digest,
            state_digest=record.envelope["state_digest"],
            raw_response_digest=sha256_digest(raw_response),
            run=dict(record.run),
            provider=dict(record.provider),
        ),
        reconstruction=Reconstruction(
            version=version,
            consumed_at=consumed_at,
            appended_results=appended,
            source_reader=reader,
        ),
        state=derived_state,
        witness=witness,
        contract_digest=digest_of(current),
        accounting=accounting,
    )
    derived = envelope.canonical()
    return ReconstructionResult(
        derived_checkpoint=derived,
        derived_checkpoint_digest=sha256_digest(derived),
        witness=witness,
        witness_json=canonical_bytes(witness).decode(),
        witness_digest=envelope.witness_digest,
        captured_contract=current,
        captured_contract_json=canonical_bytes(current).decode(),
        accounting=accounting,
        accounting_json=canonical_bytes(accounting).decode(),
    )


def reconstruct_invalid_read(
    checkpoint: bytes, raw_response: bytes, version: int, consumed_at: str
) -> ReconstructionResult:
    """Derive the continuation checkpoint of a held invalid-read run (see the package docs)."""
    return _run(areconstruct_invalid_read(checkpoint, raw_response, version, consumed_at))
