"""The pinned target runtime the installed agent runs on: the SDK distributions whose versions
the serialized agent state (a derived checkpoint, a pending request) depends on."""

from __future__ import annotations

from importlib.metadata import version
from typing import Final

from shared.continuity.sdk_epochs import TARGET_RUNTIME
from shared.runtime.errors import Internal

_DISTRIBUTIONS: Final = {
    "pydantic_ai": "pydantic-ai-slim",
    "openai": "openai",
    "genai_prices": "genai-prices",
}


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
