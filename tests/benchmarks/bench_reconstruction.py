"""Benchmark: one typical reconstruction (v1, held after one list_files turn).

Run with ``make bench``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from services.reconstruction.domain import reconstruct_invalid_read

CASE = Path(__file__).resolve().parents[1] / "data" / "fixtures" / "v1_basic"
MANIFEST = json.loads((CASE.parent / "manifest.json").read_text())


def test_reconstruct_typical_held_run(benchmark: Any) -> None:
    checkpoint = (CASE / "checkpoint.json").read_bytes()
    raw = (CASE / "raw_response.json").read_bytes()
    consumed_at = MANIFEST["v1_basic"]["consumed_at"]
    result = benchmark(reconstruct_invalid_read, checkpoint, raw, 1, consumed_at)
    assert result.derived_checkpoint_digest.startswith("sha256:")
