"""The shape of a stored checkpoint's envelope: every field outside the sealed state.

The sealed state digest covers the state only; the fields around it (format, runtime, run,
provider; a derived checkpoint's compatibility, source and reconstruction records) are what
reconstruction reads to decide and to rebuild. A stored checkpoint is not trusted input, so the
whole envelope is checked against its closed shape before anything reads it: a field of another
JSON type is FAILED_PRECONDITION CHECKPOINT_FORMAT_UNSUPPORTED, an unknown or missing field
MIGRATION_FIELD_REFUSED, both naming the field (JSON pointer). Nothing downstream then meets an
AttributeError or KeyError on a malformed record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from shared.agent.jsonpath import pointer
from shared.runtime.errors import FailedPrecondition


@dataclass(frozen=True)
class Optional:
    """A field that may be absent; when present it has ``shape``."""

    shape: Shape


Shape: TypeAlias = type | Mapping[str, "Shape | Optional"]

_RUN: Final[Mapping[str, Shape]] = {
    "run_id": str,
    "conversation_id": str,
    "task_id": str,
    "attempt": int,
    "request_index": int,
}
_PROVIDER: Final[Mapping[str, Shape]] = {"base_url": str, "model": str, "name": str}
_RUNTIME: Final[Mapping[str, Shape]] = {
    "agentic": str,
    "pydantic_ai": str,
    "openai": str,
    "genai_prices": str,
    "prompt_catalog": str,
}

#: A historical (2.58.0) checkpoint; ``state`` is checked by the projection.
HISTORICAL: Final[Mapping[str, Shape]] = {
    "format": str,
    "runtime": {
        **_RUNTIME,
        "advertised_schema_digest": str,
        "evidence_validator": {"name": str, "source_hash": str},
    },
    "run": _RUN,
    "provider": _PROVIDER,
    "state": dict,
    "state_digest": str,
}

#: A derived checkpoint (invalid-read: ``version``; a recovery: ``workflow``).
DERIVED: Final[Mapping[str, Shape | Optional]] = {
    "format": str,
    "compatibility": {
        "transition": {"id": str, "from": dict, "to": dict},
        "target_runtime": dict,
    },
    "source": {
        "checkpoint_digest": str,
        "state_digest": str,
        "raw_response_digest": str,
        "run": _RUN,
        "provider": _PROVIDER,
    },
    "reconstruction": {
        "consumed_at": str,
        "appended_results": list,
        "version": Optional(int),
        "workflow": Optional(str),
        # the pinned source reader, when a source reader's call is appended
        "source_reader": Optional({"name": str, "version": str, "source_hash": str}),
    },
    "state": dict,
    "state_digest": str,
    "witness_digest": str,
    "contract_digest": str,
    "accounting_digest": str,
}


def _type_name(shape: type) -> str:
    return {dict: "an object", list: "an array", str: "a string", int: "an integer"}.get(
        shape, shape.__name__
    )


def _is(value: Any, shape: type) -> bool:
    # JSON true/false parse to bool, which Python counts as an int: never a counter here.
    return isinstance(value, shape) and not (shape is int and isinstance(value, bool))


def check_shape(value: Any, shape: Shape | Optional, at: tuple[str | int, ...] = ()) -> None:
    """FAILED_PRECONDITION unless ``value`` has ``shape`` exactly (objects closed: no unknown
    and no missing field), refusing at the first field that differs, in key order."""
    if isinstance(shape, Optional):
        shape = shape.shape
    if isinstance(shape, type):
        if not _is(value, shape):
            raise _refuse("CHECKPOINT_FORMAT_UNSUPPORTED", at, f"must be {_type_name(shape)}")
        return
    if not isinstance(value, dict):
        raise _refuse("CHECKPOINT_FORMAT_UNSUPPORTED", at, "must be an object")
    required = {key for key, inner in shape.items() if not isinstance(inner, Optional)}
    for key in sorted((value.keys() - shape.keys()) | (required - value.keys())):
        raise _refuse("MIGRATION_FIELD_REFUSED", (*at, key), f"unknown or missing {key!r}")
    for key in sorted(value.keys()):
        check_shape(value[key], shape[key], (*at, key))


def check_reconstruction_kind(envelope: Mapping[str, Any]) -> None:
    """A derived checkpoint names exactly one of its invalid-read version or recovery workflow."""
    record = envelope["reconstruction"]
    if ("version" in record) == ("workflow" in record):
        raise _refuse(
            "MIGRATION_FIELD_REFUSED",
            ("reconstruction",),
            "names neither or both of version and workflow",
        )


def _refuse(reason: str, at: tuple[str | int, ...], message: str) -> FailedPrecondition:
    field = pointer(*at) if at else "/"
    return FailedPrecondition(reason, f"{field} {message}", metadata={"field": field})
