"""``reconstruct_readonly_observation``: a consumed continuation turn whose evidence observation
was not retained (the read-only observation recovery; ADR 0009).

The derived checkpoint the turn was sent from is resumed exactly as the worker resumed it; the
consumed raw response is exposed once to the pinned public SDK parser behind the sealed transport
(no provider request, no original callback). The derived history appends, in the response's call
order, the exact retained result of the optional ``list_files`` call and
``{"status":"observation_unavailable","reason":"original_read_result_not_retained"}`` for the
``read_run_evidence`` call. Nothing else changes: validation compares canonical JSON (types
preserved) of the message history, the pending request, state, limits, contract and usage, and
the response's model metadata, token details and cost fields against the raw response.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from pydantic import ValidationError
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart

from services.reconstruction.domain.analysis import EVIDENCE_TOOL, READ_GRANT
from services.reconstruction.domain.reconstruct import OBSERVATION_UNAVAILABLE, _parse_consumed_at
from services.reconstruction.domain.registry import (
    TARGET_RUNTIME,
    source_reader_pin,
    transition,
    verify_target_runtime,
)
from services.reconstruction.domain.schema_subset import accepts
from shared.agent.jsonpath import first_difference
from shared.agent.pending import continuation_run_id, read_derived_checkpoint
from shared.agent.projection import LIMITS, MESSAGES, USAGE
from shared.agent.sealed import replay_consumed_response
from shared.continuity.canonical import canonical_bytes, digest_of, sha256_digest
from shared.continuity.derived_format import (
    READONLY_OBSERVATION_WORKFLOW,
    AppendedResult,
    ConsumedResponse,
    DerivedEnvelope,
    ObservationAccounting,
    ObservationWitness,
    ObservedCall,
    Reconstruction,
    Source,
)
from shared.continuity.sdk_epochs import SOURCE_READER_TOOLS
from shared.runtime.errors import FailedPrecondition

#: The one sibling whose exact retained successful result may be reused.
RETAINED_TOOLS: Final = frozenset({"list_files"})


def _diverged(element: str, message: str) -> FailedPrecondition:
    return FailedPrecondition(
        "OBSERVATION_RECONSTRUCTION_DIVERGED",
        f"{message} ({element})",
        metadata={"element": element},
    )


def _finding(reason: str, element: str, message: str) -> FailedPrecondition:
    return FailedPrecondition(reason, f"{message} ({element})", metadata={"element": element})


@dataclass(frozen=True)
class ObservationResult:
    derived_checkpoint: bytes
    derived_checkpoint_digest: str
    witness: dict[str, Any]
    witness_json: str
    witness_digest: str
    accounting_json: str
    #: (call id, tool name) of the consumed response, in order.
    calls: tuple[tuple[str, str], ...]


def _calls(response: ModelResponse, tools: Mapping[str, Mapping[str, Any]]) -> list[ToolCallPart]:
    """Exactly one granted read_run_evidence call and at most one granted list_files call, with
    unique ids and arguments the frozen schemas accept; nothing else."""
    if response.finish_reason != "tool_call":
        raise _finding(
            "UNSUPPORTED_RESPONSE_CONTENT", f"finish_reason:{response.finish_reason}", "stop"
        )
    calls: list[ToolCallPart] = []
    for part in response.parts:
        if isinstance(part, TextPart) and not part.content:
            continue
        if not isinstance(part, ToolCallPart):
            raise _finding("UNSUPPORTED_RESPONSE_CONTENT", part.part_kind, "unsupported content")
        calls.append(part)
    ids = [c.tool_call_id for c in calls]
    for call in calls:
        if ids.count(call.tool_call_id) > 1:
            raise _finding("DUPLICATE_TOOL_CALL_ID", call.tool_call_id, "not unique")
        if call.tool_name not in tools:
            raise _finding("UNKNOWN_TOOL_CALL", call.tool_call_id, "not in the contract")
        tool = tools[call.tool_name]
        grant = (tool.get("metadata") or {}).get("grant")
        if call.tool_name not in {EVIDENCE_TOOL, *RETAINED_TOOLS} or grant != READ_GRANT:
            raise _finding(
                "SIBLING_CALL_REFUSED", call.tool_call_id, f"{call.tool_name!r} is not a pure read"
            )
        if not accepts(tool["parameters_json_schema"], call.args_as_dict()):
            raise _finding(
                "SIBLING_CALL_REFUSED", call.tool_call_id, "arguments the schema does not accept"
            )
    names = [c.tool_name for c in calls]
    if names.count(EVIDENCE_TOOL) != 1:
        raise _finding(
            "EVIDENCE_CALL_COUNT", EVIDENCE_TOOL, f"{names.count(EVIDENCE_TOOL)} evidence calls"
        )
    if len(calls) - 1 > 1:
        raise _finding("SIBLING_CALL_REFUSED", "list_files", "more than one list_files call")
    return calls


def _check_metadata(response: ModelResponse, raw: Any) -> None:
    """The parsed response keeps the raw response's model metadata, token details and cost
    fields exactly (a changed raw response or a lossy parse is refused)."""
    if not isinstance(raw, dict):
        raise _diverged("raw_response", "the raw response is not a JSON object")
    if response.provider_response_id != raw.get("id"):
        raise _diverged("provider_response_id", "the response id is not the raw response's")
    if response.model_name != raw.get("model"):
        raise _diverged("model_name", "the model is not the raw response's")
    found = raw.get("usage")
    usage: dict[str, Any] = found if isinstance(found, dict) else {}
    if response.usage.input_tokens != usage.get("prompt_tokens", 0) or (
        response.usage.output_tokens != usage.get("completion_tokens", 0)
    ):
        raise _diverged("usage", "the token counts are not the raw response's")


def _results(
    calls: list[ToolCallPart], retained_results: Mapping[str, Any]
) -> list[tuple[str, str, Any]]:
    """(call id, tool name, appended content) in call order: the fixed unavailable observation
    for the evidence call, the exact retained result for the list call, nothing else."""
    retained = dict(retained_results)
    results: list[tuple[str, str, Any]] = []
    for call in calls:
        if call.tool_name == EVIDENCE_TOOL:
            if call.tool_call_id in retained:
                raise _diverged(call.tool_call_id, "the evidence call has a retained result")
            results.append((call.tool_call_id, call.tool_name, dict(OBSERVATION_UNAVAILABLE)))
        elif call.tool_call_id not in retained:
            raise _diverged(call.tool_call_id, "the list_files call has no retained result")
        else:
            results.append((call.tool_call_id, call.tool_name, retained.pop(call.tool_call_id)))
    if retained:
        raise _diverged(sorted(retained)[0], "a retained result names no call of the response")
    return results


def _validate_state(state: Any, derived_state: dict[str, Any], appended: int) -> None:
    """Canonical JSON, JSON types preserved: the SDK round-trips history, usage and limits
    unchanged; limits, settings and contract are the checkpoint's; usage charges the consumed
    response once and each original call once."""
    _round_trip("messages", MESSAGES, derived_state["messages"])
    _round_trip("usage", USAGE, derived_state["usage"])
    _round_trip("limits", LIMITS, derived_state["limits"])
    for name in ("limits", "model_settings", "model_request_parameters"):
        changed = first_difference(state[name], derived_state[name])
        if changed is not None:
            raise _diverged(f"{name}{changed}", "the checkpoint's value changed")
    before, after = state["usage"], derived_state["usage"]
    if (
        after.get("requests") != before.get("requests", 0) + 1
        or after.get("tool_calls") != before.get("tool_calls", 0) + appended
    ):
        raise _diverged("usage", "the consumed response and each call are not charged once")


def _round_trip(name: str, adapter: Any, value: Any) -> None:
    """The SDK loads and dumps ``value`` to the same canonical JSON (types preserved)."""
    try:
        again = adapter.dump_python(adapter.validate_python(value), mode="json")
    except ValidationError as exc:
        raise _diverged(name, f"the pinned SDK cannot load it: {exc}") from exc
    changed = first_difference(value, again)
    if changed is not None:
        raise _diverged(f"{name}{changed}", "the pinned SDK does not round-trip it unchanged")


async def areconstruct_readonly_observation(
    derived_checkpoint: bytes,
    raw_response: bytes,
    consumed_at: str,
    retained_results: Mapping[str, Any],
) -> ObservationResult:
    """Async form of :func:`reconstruct_readonly_observation`."""
    verify_target_runtime()
    at = _parse_consumed_at(consumed_at)
    record = read_derived_checkpoint(derived_checkpoint)
    state, run, provider = record.state, record.run, record.provider
    try:
        messages = MESSAGES.validate_python(state["messages"])
        usage = USAGE.validate_python(state["usage"])
        limits = LIMITS.validate_python(state["limits"])
    except ValidationError as exc:
        raise _diverged("state", f"the pinned SDK cannot load the checkpoint: {exc}") from exc
    replay = await replay_consumed_response(
        raw_response=raw_response,
        messages=messages,
        usage=usage,
        limits=limits,
        conversation_id=run["conversation_id"],
        base_url=provider["base_url"],
        model_name=provider["model"],
    )
    try:
        raw = json.loads(raw_response)
    except ValueError:
        raw = None
    _check_metadata(replay.response, raw)
    tools = {str(t["name"]): t for t in state["model_request_parameters"]["function_tools"]}
    calls = _calls(replay.response, tools)
    results = _results(calls, retained_results)
    # A retained source-reader result is reused as stored: the proof pins the published
    # historical source reader that produced it (refused when absent or changed).
    reader = source_reader_pin() if any(n in SOURCE_READER_TOOLS for _, n, _ in results) else None
    # New message metadata: native consumption time and the continuation's run identifiers.
    continuation = continuation_run_id(record)
    response = replace(
        replay.response,
        timestamp=at,
        run_id=continuation,
        conversation_id=run["conversation_id"],
    )
    request = ModelRequest(
        parts=[
            ToolReturnPart(tool_name=name, content=content, tool_call_id=call_id, timestamp=at)
            for call_id, name, content in results
        ],
        timestamp=at,
        run_id=continuation,
        conversation_id=run["conversation_id"],
    )
    # The stored history is kept as stored (never re-serialized); only the two new messages are
    # the SDK's.
    appended = MESSAGES.dump_python([response, request], mode="json")
    messages_json = [*state["messages"], *appended]
    sdk_prefix = MESSAGES.dump_python(messages, mode="json")
    lost = first_difference(sdk_prefix, state["messages"])
    if lost is not None:
        raise FailedPrecondition("HISTORY_PREFIX_CHANGED", f"stored prefix changed at {lost}")
    run_usage = replay.usage
    run_usage.tool_calls += len(results)  # each original call charged once
    derived_state = {
        "messages": messages_json,
        "usage": USAGE.dump_python(run_usage, mode="json"),
        "limits": state["limits"],
        "model_settings": state["model_settings"],
        "model_request_parameters": state["model_request_parameters"],
    }
    _validate_state(state, derived_state, len(results))
    before, after = state["usage"], derived_state["usage"]
    appended_results = tuple(AppendedResult(i, n, c) for i, n, c in results)
    witness = ObservationWitness(
        transition=transition(),
        source_checkpoint_digest=record.digest,
        source_state_digest=record.document.state_digest,
        raw_response_digest=sha256_digest(raw_response),
        consumed_at=consumed_at,
        calls=tuple(
            ObservedCall(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                args_digest=digest_of(call.args_as_dict()),
                result="retained" if call.tool_name != EVIDENCE_TOOL else "unavailable",
            )
            for call in calls
        ),
        history_digest=digest_of(messages_json),
        contract_digest=record.document.contract_digest,
        source_reader=reader,
    ).to_json()
    accounting = ObservationAccounting(
        consumed_response=ConsumedResponse(
            raw_response_digest=sha256_digest(raw_response),
            provider_response_id=replay.response.provider_response_id,
        ),
        appended_results=appended_results,
        usage_before=before,
        usage_after=after,
    ).to_json()
    envelope = DerivedEnvelope.sealed(
        transition=transition(),
        target_runtime=TARGET_RUNTIME,
        source=Source(
            checkpoint_digest=record.digest,
            state_digest=record.document.state_digest,
            raw_response_digest=sha256_digest(raw_response),
            run=dict(run),
            provider=dict(provider),
        ),
        reconstruction=Reconstruction(
            workflow=READONLY_OBSERVATION_WORKFLOW,
            consumed_at=consumed_at,
            appended_results=appended_results,
            source_reader=reader,
        ),
        state=derived_state,
        witness=witness,
        contract_digest=record.document.contract_digest,
        accounting=accounting,
    )
    derived = envelope.canonical()
    return ObservationResult(
        derived_checkpoint=derived,
        derived_checkpoint_digest=sha256_digest(derived),
        witness=witness,
        witness_json=canonical_bytes(witness).decode(),
        witness_digest=envelope.witness_digest,
        accounting_json=canonical_bytes(accounting).decode(),
        calls=tuple((c.tool_call_id, c.tool_name) for c in calls),
    )


def reconstruct_readonly_observation(
    derived_checkpoint: bytes,
    raw_response: bytes,
    consumed_at: str,
    retained_results: Mapping[str, Any],
) -> ObservationResult:
    """The continuation checkpoint of a consumed turn with an unavailable evidence observation."""
    return asyncio.run(
        areconstruct_readonly_observation(
            derived_checkpoint, raw_response, consumed_at, retained_results
        )
    )
