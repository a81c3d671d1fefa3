"""Registered identities: the one supported SDK transition and the target runtime."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any, Final

from shared.continuity.sdk_epochs import (
    DERIVED_FORMAT,
    HISTORICAL_FORMAT,
    SOURCE_RUNTIME,
    TARGET_RUNTIME,
    TRANSITION_ID,
)
from shared.runtime.errors import Internal

__all__ = [
    "DERIVED_FORMAT",
    "HISTORICAL_FORMAT",
    "SOURCE_RUNTIME",
    "TARGET_RUNTIME",
    "TRANSITION_ID",
    "WITNESS_FORMAT",
    "transition",
    "verify_target_runtime",
]

WITNESS_FORMAT: Final = "forge.continuity.migration-witness/1"

_DISTRIBUTIONS: Final = {
    "pydantic_ai": "pydantic-ai-slim",
    "openai": "openai",
    "genai_prices": "genai-prices",
}


def transition() -> dict[str, Any]:
    """The exact registered SDK transition, as recorded on derived checkpoints and witnesses."""
    return {"id": TRANSITION_ID, "from": dict(SOURCE_RUNTIME), "to": dict(TARGET_RUNTIME)}


def verify_target_runtime() -> None:
    """The installed SDK must be the pinned target: its serialized form is what we promise."""
    for key, dist in _DISTRIBUTIONS.items():
        installed = version(dist)
        if installed != TARGET_RUNTIME[key]:
            raise Internal(
                "TARGET_SDK_MISMATCH",
                f"{dist} {installed} is installed, reconstruction is pinned to "
                f"{TARGET_RUNTIME[key]}",
                metadata={"field": dist},
            )
