"""Registered identities: the one supported SDK transition and the target runtime."""

from __future__ import annotations

from importlib.metadata import version
from types import MappingProxyType
from typing import Any, Final

from shared.errors import Internal

HISTORICAL_FORMAT: Final = "firefly.agentic.checkpoint/3"
DERIVED_FORMAT: Final = "forge.continuity.derived-checkpoint/1"
WITNESS_FORMAT: Final = "forge.continuity.migration-witness/1"

# Runtime identity a historical checkpoint must carry exactly (field → value).
SOURCE_RUNTIME: Final[MappingProxyType[str, str]] = MappingProxyType(
    {
        "agentic": "26.10.1",
        "pydantic_ai": "2.58.0",
        "openai": "3.57.0",
        "genai_prices": "0.2.3",
        "prompt_catalog": "1.0.0",
    }
)
TARGET_RUNTIME: Final[MappingProxyType[str, str]] = MappingProxyType(
    {
        "agentic": "26.10.1",
        "pydantic_ai": "2.55.0",
        "openai": "3.57.0",
        "genai_prices": "0.2.3",
        "prompt_catalog": "1.0.1",
    }
)
TRANSITION_ID: Final = "firefly-agentic-26.10.1/pydantic-ai-2.58.0-to-2.55.0"

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
