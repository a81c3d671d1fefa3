"""Read-only analysis of the consumed response: which calls, which query, which holds."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

from services.reconstruction.domain.schema_subset import accepts
from shared.agent.historical import HistoricalValidator
from shared.continuity.canonical import CanonicalJsonError, canonical_text, digest_of, parse_json

EVIDENCE_TOOL: Final = "read_run_evidence"
V2_ALLOWLIST: Final = frozenset({"list_files"})
READ_GRANT: Final = "read"


@dataclass(frozen=True)
class ToolCallView:
    tool_call_id: str
    tool_name: str
    args: Any
    args_digest: str
    grant: str | None


@dataclass(frozen=True)
class Hold:
    """Why the response cannot be reconstructed (reason, the element it names, a sentence)."""

    reason: str
    element: str
    message: str


@dataclass(frozen=True)
class ResponseAnalysis:
    provider_response_id: str | None
    tool_calls: tuple[ToolCallView, ...]
    evidence_call_id: str | None
    evidence_query: Any
    accepted_by_advertised_schema: bool
    rejected_by_pinned_validator: bool
    validator_error: str | None
    sibling_calls: tuple[ToolCallView, ...]
    unsupported_content: tuple[str, ...]
    runtime_identity: Mapping[str, Any]
    validator_identity: Mapping[str, str]
    holds_common: tuple[Hold, ...]
    holds_v1: tuple[Hold, ...]
    holds_v2: tuple[Hold, ...]

    def holds(self, version: int) -> tuple[Hold, ...]:
        return self.holds_common + (self.holds_v1 if version == 1 else self.holds_v2)


def _args(part: ToolCallPart) -> Any:
    if isinstance(part.args, str):
        try:
            return parse_json(part.args)
        except CanonicalJsonError:
            return part.args
    return part.args


def _unsupported(raw: Any, response: ModelResponse) -> list[str]:
    found: list[str] = []
    choices = raw.get("choices") if isinstance(raw, dict) else None
    if not isinstance(choices, list) or len(choices) != 1:
        found.append("choices")
    else:
        message = choices[0].get("message") or {}
        found += [k for k in ("refusal", "audio", "function_call") if message.get(k)]
    for part in response.parts:
        if isinstance(part, TextPart):
            if part.content:
                found.append("text")
        elif not isinstance(part, ToolCallPart):
            found.append(part.part_kind)
    if response.finish_reason != "tool_call":
        found.append(f"finish_reason:{response.finish_reason}")
    return found


def analyze(
    *,
    response: ModelResponse,
    raw_response: bytes,
    historical_tools: list[Mapping[str, Any]],
    validator: HistoricalValidator,
    runtime_identity: Mapping[str, Any],
) -> ResponseAnalysis:
    """Classify the parsed response against the historical contract and pinned validator."""
    try:
        raw = json.loads(raw_response)
    except ValueError:
        raw = None
    tools = {str(t["name"]): t for t in historical_tools}
    calls = tuple(
        ToolCallView(
            tool_call_id=p.tool_call_id,
            tool_name=p.tool_name,
            args=_args(p),
            args_digest=digest_of(_args(p)) if not isinstance(_args(p), str) else "",
            grant=(tools[p.tool_name].get("metadata") or {}).get("grant")
            if p.tool_name in tools
            else None,
        )
        for p in response.parts
        if isinstance(p, ToolCallPart)
    )
    common: list[Hold] = []
    unsupported = _unsupported(raw, response)
    common += [
        Hold("UNSUPPORTED_RESPONSE_CONTENT", u, "unsupported response content") for u in unsupported
    ]
    ids = [c.tool_call_id for c in calls]
    common += [
        Hold("DUPLICATE_TOOL_CALL_ID", i, "tool call id is not unique")
        for i in sorted({i for i in ids if ids.count(i) > 1})
    ]
    common += [
        Hold("UNKNOWN_TOOL_CALL", c.tool_call_id, f"{c.tool_name!r} is not in the contract")
        for c in calls
        if c.tool_name not in tools
    ]
    evidence = [c for c in calls if c.tool_name == EVIDENCE_TOOL]
    if len(evidence) != 1:
        common.append(
            Hold("EVIDENCE_CALL_COUNT", EVIDENCE_TOOL, f"{len(evidence)} read_run_evidence calls")
        )
    query: Any = None
    accepted = rejected = False
    error: str | None = None
    if len(evidence) == 1:
        call = evidence[0]
        args = call.args
        # A history that does not advertise the evidence tool advertised no schema accepting it.
        advertised = tools.get(EVIDENCE_TOOL)
        accepted = (
            advertised is not None
            and isinstance(args, dict)
            and accepts(advertised["parameters_json_schema"], args)
        )
        query = args.get("query") if isinstance(args, dict) else None
        if not accepted or not isinstance(query, dict):
            common.append(
                Hold("EVIDENCE_QUERY_NOT_ADVERTISED", call.tool_call_id, "old schema rejects it")
            )
        else:
            try:
                validator.validator.model_validate_json(canonical_text(query))
            except ValidationError as exc:
                rejected, error = True, str(exc)
            else:
                common.append(
                    Hold(
                        "EVIDENCE_QUERY_VALID", call.tool_call_id, "the pinned validator accepts it"
                    )
                )
    siblings = tuple(c for c in calls if c.tool_name != EVIDENCE_TOOL and c.tool_name in tools)
    v1 = [
        Hold("SIBLING_CALL_REFUSED", c.tool_call_id, "version 1 rejects siblings") for c in siblings
    ]
    v2 = [
        Hold(
            "SIBLING_CALL_REFUSED", c.tool_call_id, f"{c.tool_name!r} is not an allowed observation"
        )
        for c in siblings
        if c.tool_name not in V2_ALLOWLIST
        or c.grant != READ_GRANT
        or not accepts(tools[c.tool_name]["parameters_json_schema"], c.args)
    ]
    return ResponseAnalysis(
        provider_response_id=response.provider_response_id,
        tool_calls=calls,
        evidence_call_id=evidence[0].tool_call_id if len(evidence) == 1 else None,
        evidence_query=query,
        accepted_by_advertised_schema=accepted,
        rejected_by_pinned_validator=rejected,
        validator_error=error,
        sibling_calls=siblings,
        unsupported_content=tuple(unsupported),
        runtime_identity=runtime_identity,
        validator_identity={
            "name": validator.name,
            "source_hash": validator.registered_source_hash,
        },
        holds_common=tuple(common),
        holds_v1=tuple(v1),
        holds_v2=tuple(v2),
    )
