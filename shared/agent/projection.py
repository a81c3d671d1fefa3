"""The SDK projection 2.58.0 → 2.55.0 and its witness entries.

Only the changes the registered transition permits are made; everything else must survive a
validate/dump round trip through the pinned 2.55.0 SDK unchanged in canonical JSON.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Final

from pydantic import TypeAdapter
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RunUsage, UsageLimits

from shared.agent.jsonpath import first_difference, pointer
from shared.continuity.canonical import digest_of
from shared.runtime.errors import FailedPrecondition

MAX_COUNTER: Final = 2**53 - 1  # largest integer canonical JSON represents exactly
TELEMETRY_NULLABLE: Final = ("telemetry_mcp_url_ids", "telemetry_mcp_url_tool_names")
TELEMETRY_EMPTY_ONLY: Final = ("telemetry_mcp_url_toolset_ids",)
# Counters 2.58.0 always writes; the two newer ones keep their values as extra usage counters.
INTEGER_COUNTERS: Final = frozenset(
    {
        "input_tokens",
        "cache_write_tokens",
        "cache_write_1h_tokens",
        "cache_read_tokens",
        "output_tokens",
        "output_reasoning_tokens",
        "input_audio_tokens",
        "cache_audio_read_tokens",
        "output_audio_tokens",
    }
)
USAGE_OTHER: Final = frozenset({"audio_seconds", "details", "cost"})
RUN_COUNTERS: Final = frozenset({"requests", "tool_calls"})
# Child counter → parent total that already includes it.
RETAINED: Final = {
    "output_reasoning_tokens": "output_tokens",
    "cache_write_1h_tokens": "cache_write_tokens",
}

#: The one change the projection makes that the spec's list does not name, recorded by name and
#: reason in the witness (docs/formats.md).
HISTORY_DIGEST_CHANGE: Final = "omit_null_history_digest"
WHY_NULL: Final = (
    "2.55.0 has no ModelResponse.history_digest; 2.58.0 writes null there unless a "
    "Responses-API continuation set it, and a null carries no information"
)

MESSAGES = ModelMessagesTypeAdapter
USAGE = TypeAdapter(RunUsage)
LIMITS = TypeAdapter(UsageLimits)
PARAMETERS = TypeAdapter(ModelRequestParameters)
SETTINGS = TypeAdapter(ModelSettings)


def _refuse(reason: str, field: str, message: str) -> FailedPrecondition:
    return FailedPrecondition(reason, f"{message} ({field})", metadata={"field": field})


@dataclass(frozen=True)
class Projection:
    """The projected public state (2.55.0 JSON), its SDK objects and the witness entries."""

    state: dict[str, Any]
    messages: list[ModelMessage]
    usage: RunUsage
    limits: UsageLimits
    witness: dict[str, Any]
    round_trip: dict[str, str]


def _telemetry(state: dict[str, Any]) -> dict[str, Any]:
    witness: dict[str, Any] = {}
    for name in (*TELEMETRY_NULLABLE, *TELEMETRY_EMPTY_ONLY):
        value = state.pop(name)
        field = pointer("state", name)
        if isinstance(value, list):
            if value:
                raise _refuse("MIGRATION_FIELD_REFUSED", field, "non-empty provenance collection")
            status = "none_found"
        elif value is None and name in TELEMETRY_NULLABLE:
            status = "unknown"
        else:
            raise _refuse("MIGRATION_FIELD_REFUSED", field, "provenance value of another JSON type")
        witness[name] = {"state": status, "value": value, "digest": digest_of(value)}
    return witness


def _tool_kinds(state: dict[str, Any]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    params = state["model_request_parameters"]
    for group in ("function_tools", "output_tools"):
        for index, tool in enumerate(params.get(group) or []):
            field = pointer("state", "model_request_parameters", group, index, "tool_kind")
            if "tool_kind" not in tool:
                tool["tool_kind"] = None
                presence = "absent"
            elif tool["tool_kind"] is None:
                presence = "present_none"
            else:
                raise _refuse("MIGRATION_FIELD_REFUSED", field, "tool_kind other than None")
            entries.append({"tool": tool.get("name"), "path": field, "original": presence})
    return entries


def _check_counter(usage: dict[str, Any], name: str, field: str) -> int:
    value = usage[name]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNTER:
        raise _refuse("MIGRATION_COUNTER_OUT_OF_BOUNDS", field, "counter is not a bounded integer")
    return value


def _usage(usage: Any, at: tuple[str | int, ...], run_level: bool) -> list[dict[str, Any]]:
    if not isinstance(usage, dict):
        raise _refuse("MIGRATION_FIELD_REFUSED", pointer(*at), "usage must be an object")
    expected = INTEGER_COUNTERS | USAGE_OTHER | (RUN_COUNTERS if run_level else frozenset())
    for name in sorted(expected - usage.keys()):
        raise _refuse("MIGRATION_COUNTER_MISSING", pointer(*at, name), "mandatory counter missing")
    for name in sorted(usage.keys() - expected):
        raise _refuse("MIGRATION_COUNTER_UNEXPECTED", pointer(*at, name), "arbitrary counter")
    for name in sorted(INTEGER_COUNTERS | (RUN_COUNTERS if run_level else frozenset())):
        _check_counter(usage, name, pointer(*at, name))
    details = usage["details"]
    if not isinstance(details, dict):
        raise _refuse("MIGRATION_FIELD_REFUSED", pointer(*at, "details"), "details not an object")
    for key in sorted(details):
        _check_counter(details, key, pointer(*at, "details", key))
    retained = []
    for child, parent in RETAINED.items():
        if usage[child] > usage[parent]:
            raise _refuse(
                "MIGRATION_COUNTER_OUT_OF_BOUNDS",
                pointer(*at, child),
                f"{child} exceeds {parent}, which already includes it",
            )
        retained.append(
            {
                "path": pointer(*at, child),
                "value": usage[child],
                "parent": parent,
                "parent_value": usage[parent],
            }
        )
    return retained


def _messages(state: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    omitted: list[dict[str, Any]] = []
    retained: list[dict[str, Any]] = []
    for index, message in enumerate(state["messages"]):
        if not isinstance(message, dict) or message.get("kind") not in ("request", "response"):
            raise _refuse("MIGRATION_FIELD_REFUSED", pointer("state", "messages", index), "message")
        if message["kind"] != "response":
            continue
        if "history_digest" in message:
            field = pointer("state", "messages", index, "history_digest")
            # 2.58.0 always writes it; 2.55.0 has no such field. Only the information-free null
            # may be omitted (recorded in the witness); a digest would be lost, so it is refused.
            if message["history_digest"] is not None:
                raise _refuse("MIGRATION_FIELD_REFUSED", field, "history_digest would be lost")
            del message["history_digest"]
            omitted.append(
                {"path": field, "value": None, "change": HISTORY_DIGEST_CHANGE, "reason": WHY_NULL}
            )
        retained += _usage(message.get("usage"), ("state", "messages", index, "usage"), False)
    return omitted, retained


def _round_trip(name: str, adapter: TypeAdapter[Any], value: Any) -> tuple[Any, Any]:
    try:
        obj = adapter.validate_python(value)
    except ValueError as exc:
        raise _refuse("MIGRATION_FIELD_REFUSED", pointer("state", name), str(exc)) from exc
    dumped = adapter.dump_python(obj, mode="json")
    lost = first_difference(value, dumped)
    if lost is not None:
        field = pointer("state", name) + ("" if lost == "/" else lost)
        raise _refuse("MIGRATION_FIELD_REFUSED", field, "does not round-trip through 2.55.0")
    return obj, dumped


def _check_containers(state: dict[str, Any]) -> None:
    """The containers the projection walks have their JSON types (a sealed state is sealed by
    whoever wrote it, so its shape is checked like any other input); the SDK round trip checks
    everything inside them."""
    for name, kind in (
        ("messages", list),
        ("usage", dict),
        ("limits", dict),
        ("model_settings", dict),
        ("model_request_parameters", dict),
    ):
        if not isinstance(state[name], kind):
            raise _refuse("MIGRATION_FIELD_REFUSED", pointer("state", name), f"not a {kind}")
    if not state["messages"]:
        raise _refuse("MIGRATION_FIELD_REFUSED", pointer("state", "messages"), "empty history")
    params = state["model_request_parameters"]
    for group in ("function_tools", "output_tools"):
        tools = params.get(group)
        if tools is not None and not (
            isinstance(tools, list) and all(isinstance(tool, dict) for tool in tools)
        ):
            field = pointer("state", "model_request_parameters", group)
            raise _refuse("MIGRATION_FIELD_REFUSED", field, "not a list of tool objects")


def project(source_state: Any) -> Projection:
    """Project a verified 2.58.0 state; the source object is deep-copied, never changed."""
    state: dict[str, Any] = copy.deepcopy(source_state)
    _check_containers(state)
    telemetry = _telemetry(state)
    tool_kinds = _tool_kinds(state)
    omitted, retained = _messages(state)
    retained += _usage(state["usage"], ("state", "usage"), True)
    messages, state["messages"] = _round_trip("messages", MESSAGES, state["messages"])
    usage, state["usage"] = _round_trip("usage", USAGE, state["usage"])
    limits, state["limits"] = _round_trip("limits", LIMITS, state["limits"])
    _, state["model_request_parameters"] = _round_trip(
        "model_request_parameters", PARAMETERS, state["model_request_parameters"]
    )
    _, state["model_settings"] = _round_trip("model_settings", SETTINGS, state["model_settings"])
    witness = {
        "telemetry_provenance": telemetry,
        "tool_kind": tool_kinds,
        "omitted_null_fields": omitted,
        "retained_counters": retained,
    }
    round_trip = {f"{key}_digest": digest_of(state[key]) for key in sorted(state)}
    return Projection(state, list(messages), usage, limits, witness, round_trip)
