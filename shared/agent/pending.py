"""``reproduce_pending_request``: the first provider request a derived checkpoint continues with.

The derived checkpoint (the state the continuation starts from) is handed to the installed
worker's ``execute_agentic`` and the pinned public SDK exactly as a worker resumes it: the stored
history with no new prompt, the stored usage and limits. The model sits behind a sealed transport
that records the first outbound request and refuses it, so no model response is supplied, no tool
callback can run and nothing leaves the process. What comes back is the exact wire body and its
canonical parts: history, model settings, tool definitions, the other request parameters, usage
and limits. Same checkpoint → same bytes, in any process.

``send_pending`` is the resume itself, shared with any worker that sends the request for real (the
demo's worker sends it to a loopback provider): the SDK, not this module, builds the bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from pydantic import ValidationError
from pydantic_ai.models import Model

from shared.agent import AgenticTask, execute_agentic
from shared.agent.envelope import DERIVED, check_reconstruction_kind, check_shape
from shared.agent.jsonpath import first_difference
from shared.agent.projection import LIMITS, MESSAGES, USAGE
from shared.agent.sealed import CapturingModel, RefusingEffects, SealedTransport, sealed_model
from shared.agent.target import verify_target_runtime
from shared.continuity.canonical import (
    CanonicalJsonError,
    canonical_bytes,
    digest_of,
    parse_json,
    sha256_digest,
)
from shared.continuity.derived_format import DerivedEnvelope, parse_envelope
from shared.continuity.sdk_epochs import DERIVED_FORMAT, DERIVED_KEYS, TARGET_RUNTIME
from shared.runtime.errors import FailedPrecondition, Internal, InvalidArgument

PENDING_FORMAT: Final = "forge.continuity.pending-request/1"
STATE_KEYS: Final = frozenset(
    {"messages", "usage", "limits", "model_settings", "model_request_parameters"}
)
#: The canonical parts of a reproduced request, in the order they are reported.
PART_NAMES: Final = (
    "history",
    "model_settings",
    "tool_definitions",
    "request_parameters",
    "usage",
    "limits",
)
#: The SDK stamps the pending request with the time it sends it; that time is not on the wire
#: and is put back to the checkpoint's value so the reproduction stays deterministic.
SDK_STAMPED: Final = "timestamp"
#: The SDK renders the worker's instructions into a pending request that carries none.
SDK_RENDERED: Final = "instructions"
#: A continuation runs under its own SDK run id (the SDK refuses one already in the history).
CONTINUATION_SUFFIX: Final = "-continuation"


def _refuse(reason: str, field: str, message: str) -> FailedPrecondition:
    return FailedPrecondition(reason, message, metadata={"field": field})


def _diverged(element: str, message: str) -> FailedPrecondition:
    return FailedPrecondition(
        "PENDING_STATE_DIVERGED", f"{message} ({element})", metadata={"element": element}
    )


def _not_sent(message: str) -> FailedPrecondition:
    return FailedPrecondition(
        "PENDING_REQUEST_NOT_SENT", message, metadata={"element": "pending_request"}
    )


@dataclass(frozen=True)
class DerivedRecord:
    """A verified derived checkpoint; ``document`` is the parsed record, never mutated."""

    raw: bytes
    digest: str
    document: DerivedEnvelope

    @property
    def state(self) -> Any:
        return self.document.state

    @property
    def run(self) -> Any:
        return self.document.source.run

    @property
    def provider(self) -> Any:
        return self.document.source.provider


def read_derived_checkpoint(raw: bytes) -> DerivedRecord:
    """Verify encoding, canonical form, format, sealed state digest and target runtime."""
    try:
        envelope = parse_json(raw)
    except CanonicalJsonError as exc:
        raise InvalidArgument("CHECKPOINT_MALFORMED", f"checkpoint is not JSON: {exc}") from exc
    if not isinstance(envelope, dict):
        raise InvalidArgument("CHECKPOINT_MALFORMED", "checkpoint must be a JSON object")
    if canonical_bytes(envelope) != raw:
        raise _refuse("CHECKPOINT_NOT_CANONICAL", "/", "checkpoint bytes are not canonical")
    if envelope.get("format") != DERIVED_FORMAT or envelope.keys() != DERIVED_KEYS:
        raise _refuse(
            "CHECKPOINT_FORMAT_UNSUPPORTED", "/format", f"not a {DERIVED_FORMAT} checkpoint"
        )
    # Every field outside the sealed state, before anything reads one.
    check_shape(envelope, DERIVED)
    check_reconstruction_kind(envelope)
    document = parse_envelope(envelope)
    state = document.state
    if state.keys() != STATE_KEYS:
        raise _refuse("CHECKPOINT_FORMAT_UNSUPPORTED", "/state", "state keys are not the format's")
    if document.state_digest != digest_of(state):
        raise _refuse(
            "CHECKPOINT_DIGEST_MISMATCH", "/state_digest", "state does not match its sealed digest"
        )
    if document.target_runtime != dict(TARGET_RUNTIME):
        raise _refuse(
            "SDK_TRANSITION_UNSUPPORTED",
            "/compatibility/target_runtime",
            "the checkpoint was not derived for the installed runtime",
        )
    return DerivedRecord(raw=raw, digest=sha256_digest(raw), document=document)


def continuation_run_id(record: DerivedRecord) -> str:
    """The SDK run id that resumes ``record``: the first continuation takes the suffix, a later
    one (after a reconstructed continuation turn) counts on, so no id repeats in the history."""
    base = f"{record.run['run_id']}{CONTINUATION_SUFFIX}"
    seen = {
        message.get("run_id")
        for message in record.state["messages"]
        if isinstance(message, dict) and str(message.get("run_id") or "").startswith(base)
    }
    return base if not seen else f"{base}-{len(seen) + 1}"


def continuation_task(record: DerivedRecord) -> AgenticTask:
    """The worker task that resumes ``record``: its history, usage and limits, no new prompt."""
    state, run = record.state, record.run
    try:
        messages = MESSAGES.validate_python(state["messages"])
        usage = USAGE.validate_python(state["usage"])
        limits = LIMITS.validate_python(state["limits"])
    except ValidationError as exc:
        raise _not_sent(f"the pinned SDK cannot load the checkpoint state: {exc}") from exc
    return AgenticTask(
        run_id=continuation_run_id(record),
        conversation_id=run["conversation_id"],
        prompt=None,
        message_history=messages,
        usage=usage,
        usage_limits=limits,
    )


@dataclass(frozen=True)
class Sent:
    """What the SDK did when it resumed: the SDK-level request it built (if any), the usage it
    held afterwards, the callbacks it attempted and the error that ended the run."""

    captured: tuple[tuple[Any, Any, Any], ...]
    usage_after: Any
    callback_attempts: tuple[str, ...]
    error: BaseException | None


async def send_pending(record: DerivedRecord, model: Model) -> Sent:
    """Resume ``record`` with ``model`` through the installed worker; every callback refused.
    The provider behind ``model`` is expected to refuse the request (or the transport to stop)."""
    task = continuation_task(record)
    usage = task.usage  # the SDK counts into this object; a refused request adds nothing
    capturing = CapturingModel(model)
    effects = RefusingEffects()
    error: BaseException | None = None
    try:
        await execute_agentic(task, capturing, effects)
    except Exception as exc:  # noqa: BLE001 - the expected end: the request was refused
        error = exc
    return Sent(
        captured=tuple(capturing.captured),
        usage_after=USAGE.dump_python(usage, mode="json") if usage is not None else None,
        callback_attempts=tuple(effects.attempts),
        error=error,
    )


def _history(record: DerivedRecord, sent_messages: Any) -> list[Any]:
    """The history the SDK sent, checked against the checkpoint; the pending request's send time
    restored, its rendered instructions kept."""
    stored = record.state["messages"]
    if not isinstance(sent_messages, list) or len(sent_messages) != len(stored) or not stored:
        raise _diverged("history", "the SDK did not send the stored history")
    lost = first_difference(sent_messages[:-1], stored[:-1])
    if lost is not None:
        raise _diverged(f"history{lost}", "the SDK changed the stored history")
    pending, sent = dict(stored[-1]), dict(sent_messages[-1])
    index = len(stored) - 1
    for key in sorted(pending.keys() | sent.keys()):
        if key == SDK_STAMPED and key in pending and key in sent:
            sent[key] = pending[key]
        elif key == SDK_RENDERED and pending.get(key) is None:
            continue
        elif canonical_bytes(pending.get(key)) != canonical_bytes(sent.get(key)):
            raise _diverged(f"history/{index}/{key}", "the SDK changed the pending request")
    return [*sent_messages[:-1], sent]


def request_parts(record: DerivedRecord, sent: Sent) -> dict[str, Any]:
    """The canonical parts of the request the SDK built from ``record``; PENDING_STATE_DIVERGED
    names the element when that request does not carry the checkpoint's state exactly."""
    if sent.callback_attempts:
        raise Internal("SEALED_TRANSPORT_VIOLATION", "a tool callback was attempted")
    if len(sent.captured) != 1:
        raise _not_sent(
            "the pinned SDK built no request from the checkpoint"
            + (f": {type(sent.error).__name__}: {sent.error}" if sent.error else "")
        )
    messages, settings, params = sent.captured[0]
    state = record.state
    history = _history(record, messages)
    if canonical_bytes(settings) != canonical_bytes(state["model_settings"]):
        raise _diverged("model_settings", "the request's model settings are not the checkpoint's")
    changed = first_difference(params, state["model_request_parameters"])
    if changed is not None:
        raise _diverged(
            f"model_request_parameters{changed}",
            "the request's tool definitions or parameters are not the checkpoint's",
        )
    if canonical_bytes(sent.usage_after) != canonical_bytes(state["usage"]):
        raise _diverged("usage", "the SDK's usage at the request is not the checkpoint's")
    limits = LIMITS.dump_python(LIMITS.validate_python(state["limits"]), mode="json")
    if canonical_bytes(limits) != canonical_bytes(state["limits"]):
        raise _diverged("limits", "the SDK does not hold the checkpoint's limits unchanged")
    return {
        "history": history,
        "model_settings": settings,
        "tool_definitions": params["function_tools"],
        "request_parameters": {k: v for k, v in params.items() if k != "function_tools"},
        "usage": sent.usage_after,
        "limits": limits,
    }


@dataclass(frozen=True)
class PendingRequest:
    """The reproduced pending request."""

    derived_checkpoint_digest: str
    method: str
    url: str
    model: str
    wire: bytes
    wire_digest: str
    wire_length: int
    parts: Mapping[str, Any]
    parts_json: str
    part_digests: Mapping[str, str]
    reproduction_digest: str


def pending_request(
    record: DerivedRecord, method: str, url: str, wire: bytes, parts: Mapping[str, Any]
) -> PendingRequest:
    """The result for a request the SDK built: wire facts, parts and one digest over all."""
    part_digests = {name: digest_of(parts[name]) for name in PART_NAMES}
    facts = {
        "format": PENDING_FORMAT,
        "derived_checkpoint_digest": record.digest,
        "method": method,
        "url": url,
        "model": record.provider["model"],
        "wire_digest": sha256_digest(wire),
        "wire_length": len(wire),
        "part_digests": part_digests,
    }
    return PendingRequest(
        derived_checkpoint_digest=record.digest,
        method=method,
        url=url,
        model=record.provider["model"],
        wire=wire,
        wire_digest=sha256_digest(wire),
        wire_length=len(wire),
        parts=MappingProxyType(dict(parts)),
        parts_json=canonical_bytes(dict(parts)).decode(),
        part_digests=MappingProxyType(part_digests),
        reproduction_digest=digest_of(facts),
    )


async def areproduce_pending_request(derived_checkpoint: bytes) -> PendingRequest:
    """Async form of :func:`reproduce_pending_request`."""
    verify_target_runtime()
    record = read_derived_checkpoint(derived_checkpoint)
    transport = SealedTransport(None)  # serves nothing: the first request is recorded, refused
    model = sealed_model(transport, record.provider["base_url"], record.provider["model"])
    sent = await send_pending(record, model)
    if len(transport.requests) > 1:
        raise Internal("SEALED_TRANSPORT_VIOLATION", "more than one request left the SDK")
    parts = request_parts(record, sent)
    if len(transport.requests) != 1:
        raise _not_sent("the pinned SDK built the request but sent nothing")
    method, url = transport.targets[0]
    return pending_request(record, method, url, transport.requests[0], parts)


def reproduce_pending_request(derived_checkpoint: bytes) -> PendingRequest:
    """Reproduce the first provider request of the continuation ``derived_checkpoint`` starts."""
    return asyncio.run(areproduce_pending_request(derived_checkpoint))
