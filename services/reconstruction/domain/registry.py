"""Registered identities: the one supported SDK transition and the target runtime."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.agent import historical
from shared.agent.target import verify_target_runtime
from shared.continuity.sdk_epochs import (
    DERIVED_FORMAT,
    HISTORICAL_FORMAT,
    PUBLISHED_SOURCE_READER,
    SOURCE_RUNTIME,
    TARGET_RUNTIME,
    TRANSITION_ID,
)
from shared.runtime.errors import FailedPrecondition

__all__ = [
    "DERIVED_FORMAT",
    "HISTORICAL_FORMAT",
    "SOURCE_RUNTIME",
    "TARGET_RUNTIME",
    "TRANSITION_ID",
    "source_reader_pin",
    "transition",
    "verify_target_runtime",
]


def transition() -> dict[str, Any]:
    """The exact registered SDK transition, as recorded on derived checkpoints and witnesses."""
    return {"id": TRANSITION_ID, "from": dict(SOURCE_RUNTIME), "to": dict(TARGET_RUNTIME)}


def source_reader_pin(source_file: Path | None = None) -> dict[str, str]:
    """The pinned source-reader identity a proof names, after checking that the published
    implementation is installed with exactly that hash: FAILED_PRECONDITION
    SOURCE_READER_UNPINNED when it is absent or differs."""
    path = source_file if source_file is not None else historical.SOURCE_READER_FILE
    pinned = PUBLISHED_SOURCE_READER.pin()
    if not path.is_file():
        raise FailedPrecondition(
            "SOURCE_READER_UNPINNED",
            f"the published source reader {pinned['name']} is not installed",
            metadata={"name": pinned["name"], "expected": pinned["source_hash"], "found": ""},
        )
    found = historical.source_hash(path)
    if found != pinned["source_hash"]:
        raise FailedPrecondition(
            "SOURCE_READER_UNPINNED",
            f"the installed source reader {pinned['name']} is {found}, not the pinned "
            f"{pinned['source_hash']}",
            metadata={"name": pinned["name"], "expected": pinned["source_hash"], "found": found},
        )
    return pinned
