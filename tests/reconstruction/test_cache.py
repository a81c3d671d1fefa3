"""The reconstruction service answers from its content-addressed cache exactly as it computes
(the cache itself: tests/shared/runtime/test_content_cache.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forge.continuity.v1 import reconstruction_pb2
from services.reconstruction.servicer import ReconstructionServicer
from shared.runtime.errors import InvalidArgument

CASE = Path(__file__).resolve().parents[1] / "data" / "fixtures" / "v1_basic"
MANIFEST = json.loads((CASE.parent / "manifest.json").read_text())


def test_servicer_answers_identically_from_the_cache() -> None:
    servicer = ReconstructionServicer()
    request = reconstruction_pb2.ReconstructInvalidReadRequest(
        checkpoint=(CASE / "checkpoint.json").read_bytes(),
        raw_response=(CASE / "raw_response.json").read_bytes(),
        version=reconstruction_pb2.RECONSTRUCTION_VERSION_V1,
        consumed_at=MANIFEST["v1_basic"]["consumed_at"],
    )
    first = servicer.ReconstructInvalidRead(request, None)
    second = servicer.ReconstructInvalidRead(request, None)
    assert first.SerializeToString(deterministic=True) == second.SerializeToString(
        deterministic=True
    )
    analyze = reconstruction_pb2.AnalyzeConsumedResponseRequest(
        checkpoint=request.checkpoint, raw_response=request.raw_response
    )
    assert servicer.AnalyzeConsumedResponse(analyze, None) == servicer.AnalyzeConsumedResponse(
        analyze, None
    )
    # A different consumption time is different content: computed, not served from the cache.
    other = reconstruction_pb2.ReconstructInvalidReadRequest()
    other.CopyFrom(request)
    other.consumed_at = "not a time"
    with pytest.raises(InvalidArgument):
        servicer.ReconstructInvalidRead(other, None)
