"""Shared fixture access: the committed historical held runs (see tools/fixtures)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "fixtures"
MANIFEST: dict[str, Any] = json.loads((FIXTURES / "manifest.json").read_text())


@dataclass(frozen=True)
class Case:
    name: str
    checkpoint: bytes
    raw_response: bytes
    events: list[Any]
    version: int
    consumed_at: str
    expect: dict[str, Any]


def load_case(name: str) -> Case:
    entry = MANIFEST[name]
    folder = FIXTURES / name
    return Case(
        name=name,
        checkpoint=(folder / "checkpoint.json").read_bytes(),
        raw_response=(folder / "raw_response.json").read_bytes(),
        events=json.loads((folder / "events.json").read_text()),
        version=entry["version"],
        consumed_at=entry["consumed_at"],
        expect=entry["expect"],
    )


@pytest.fixture
def basic() -> Case:
    return load_case("v1_basic")
