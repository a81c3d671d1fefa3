"""A stored checkpoint whose fields outside the sealed state have the wrong shape is refused with
a typed reason naming the field, never an INTERNAL error: the sealed state digest cannot protect
what it does not cover, so reconstruction validates the whole envelope before reading it.

Every field around the sealed state (historical and derived checkpoints alike) is replaced by a
value of each wrong JSON shape; each reconstruction entry point that reads the checkpoint must
answer FAILED_PRECONDITION or INVALID_ARGUMENT.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from services.demo.observation_turn import LIST_CALL, LISTED, consumed_turn
from services.reconstruction.domain import (
    analyze_consumed_response,
    reconstruct_invalid_read,
    reproduce_pending_request,
)
from services.reconstruction.domain.observation import reconstruct_readonly_observation
from shared.continuity.canonical import canonical_bytes, digest_of
from shared.runtime.errors import FailedPrecondition, InvalidArgument
from tests.reconstruction.conftest import Case, load_case

AT = "2026-12-03T07:00:00.000000Z"
#: One value of each JSON shape; each path below is tried with every one its shape is not.
SHAPES: tuple[Any, ...] = (None, True, 7, "text", [], [1], {}, {"x": 1})
#: Fields of a historical checkpoint outside its sealed state.
HISTORICAL_PATHS: tuple[tuple[str, ...], ...] = (
    ("format",),
    ("runtime",),
    ("runtime", "agentic"),
    ("runtime", "advertised_schema_digest"),
    ("runtime", "evidence_validator"),
    ("runtime", "evidence_validator", "name"),
    ("runtime", "evidence_validator", "source_hash"),
    ("run",),
    ("run", "run_id"),
    ("run", "conversation_id"),
    ("run", "task_id"),
    ("run", "attempt"),
    ("run", "request_index"),
    ("provider",),
    ("provider", "base_url"),
    ("provider", "model"),
    ("provider", "name"),
    ("state_digest",),
)
#: Fields of a derived checkpoint outside its sealed state.
DERIVED_PATHS: tuple[tuple[str, ...], ...] = (
    ("format",),
    ("compatibility",),
    ("compatibility", "transition"),
    ("compatibility", "target_runtime"),
    ("source",),
    ("source", "checkpoint_digest"),
    ("source", "raw_response_digest"),
    ("source", "run"),
    ("source", "run", "run_id"),
    ("source", "run", "conversation_id"),
    ("source", "provider"),
    ("source", "provider", "base_url"),
    ("source", "provider", "model"),
    ("reconstruction",),
    ("reconstruction", "version"),
    ("reconstruction", "consumed_at"),
    ("reconstruction", "appended_results"),
    ("state_digest",),
    ("witness_digest",),
    ("contract_digest",),
    ("accounting_digest",),
)


def _replaced(raw: bytes, path: tuple[str, ...], value: Any) -> bytes:
    envelope = json.loads(raw)
    parent = envelope
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return canonical_bytes(envelope)


def _variants(raw: bytes, paths: tuple[tuple[str, ...], ...]) -> Iterator[tuple[str, bytes]]:
    original = json.loads(raw)
    for path in paths:
        current: Any = original
        for key in path:
            current = current[key]
        for value in SHAPES:
            if type(value) is type(current) and value == current:
                continue
            if isinstance(current, dict) and isinstance(value, dict):
                continue  # an object for an object is checked by its own fields
            yield f"/{'/'.join(path)}={json.dumps(value)}", _replaced(raw, path, value)
        yield f"/{'/'.join(path)} removed", _removed(raw, path)


def _removed(raw: bytes, path: tuple[str, ...]) -> bytes:
    envelope = json.loads(raw)
    parent = envelope
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return canonical_bytes(envelope)


def _typed_refusal(label: str, call: Callable[..., object], *args: object) -> None:
    try:
        call(*args)
    except (FailedPrecondition, InvalidArgument):
        return
    except Exception as error:  # noqa: BLE001 - the point: nothing else may escape
        pytest.fail(f"{label}: {type(error).__name__}: {error}")


@pytest.fixture(scope="module")
def basic() -> Case:
    return load_case("v1_basic")


@pytest.fixture(scope="module")
def derived(basic: Case) -> bytes:
    return reconstruct_invalid_read(
        basic.checkpoint, basic.raw_response, basic.version, basic.consumed_at
    ).derived_checkpoint


def test_a_historical_checkpoint_of_the_wrong_shape_is_a_typed_refusal(basic: Case) -> None:
    for label, checkpoint in _variants(basic.checkpoint, HISTORICAL_PATHS):
        _typed_refusal(label, analyze_consumed_response, checkpoint, basic.raw_response)
        _typed_refusal(
            label,
            reconstruct_invalid_read,
            checkpoint,
            basic.raw_response,
            basic.version,
            basic.consumed_at,
        )


def test_a_derived_checkpoint_of_the_wrong_shape_is_a_typed_refusal(derived: bytes) -> None:
    turn = consumed_turn("r", AT, source_revision="src")
    for label, checkpoint in _variants(derived, DERIVED_PATHS):
        _typed_refusal(label, reproduce_pending_request, checkpoint)
        _typed_refusal(
            label,
            reconstruct_readonly_observation,
            checkpoint,
            turn.raw_response,
            AT,
            {LIST_CALL: LISTED},
        )


def test_the_refusal_names_the_field(basic: Case) -> None:
    checkpoint = _replaced(basic.checkpoint, ("runtime",), [])
    with pytest.raises(FailedPrecondition) as refused:
        analyze_consumed_response(checkpoint, basic.raw_response)
    assert refused.value.reason == "CHECKPOINT_FORMAT_UNSUPPORTED"
    assert refused.value.metadata["field"] == "/runtime"
    checkpoint = _replaced(basic.checkpoint, ("run", "conversation_id"), 3)
    with pytest.raises(FailedPrecondition) as refused:
        analyze_consumed_response(checkpoint, basic.raw_response)
    assert refused.value.metadata["field"] == "/run/conversation_id"


def _resealed(raw: bytes, path: tuple[str | int, ...], value: Any) -> bytes:
    """``raw`` with a state field replaced and the state digest sealed over it again: what a
    writer that seals whatever it holds would store."""
    envelope = json.loads(raw)
    parent = envelope["state"]
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    envelope["state_digest"] = digest_of(envelope["state"])
    return canonical_bytes(envelope)


STATE_PATHS: tuple[tuple[str | int, ...], ...] = (
    ("messages",),
    ("messages", 0),
    ("messages", -1),
    ("messages", -1, "instructions"),
    ("messages", 1, "usage"),
    ("messages", 1, "parts"),
    ("usage",),
    ("limits",),
    ("model_settings",),
    ("model_request_parameters",),
    ("model_request_parameters", "function_tools"),
    ("model_request_parameters", "function_tools", 0),
    ("telemetry_mcp_url_ids",),
)


def test_a_sealed_state_of_the_wrong_shape_is_a_typed_refusal(basic: Case) -> None:
    for path in STATE_PATHS:
        for value in SHAPES:
            label = f"/state/{'/'.join(map(str, path))}={json.dumps(value)}"
            checkpoint = _resealed(basic.checkpoint, path, value)
            _typed_refusal(
                label,
                reconstruct_invalid_read,
                checkpoint,
                basic.raw_response,
                basic.version,
                basic.consumed_at,
            )
