"""The reconstruction service answers from its content-addressed cache exactly as it computes
(the cache itself: tests/shared/runtime/test_content_cache.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forge.continuity.v1 import reconstruction_pb2
from services.reconstruction.domain import reconstruct_invalid_read
from services.reconstruction.servicer import ReconstructionServicer
from shared.runtime.content_cache import ContentCache
from shared.runtime.deadline import reset_inbound_deadline, set_inbound_deadline
from shared.runtime.errors import DeadlineExceeded, InvalidArgument
from shared.runtime.memory_size import held_bytes

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


def test_a_call_whose_deadline_passed_does_not_start_the_sdk() -> None:
    servicer = ReconstructionServicer()
    request = reconstruction_pb2.AnalyzeConsumedResponseRequest(
        checkpoint=(CASE / "checkpoint.json").read_bytes(),
        raw_response=(CASE / "raw_response.json").read_bytes(),
    )
    token = set_inbound_deadline(0.0)  # the call waited in the queue past its deadline
    try:
        with pytest.raises(DeadlineExceeded) as stopped:
            servicer.AnalyzeConsumedResponse(request, None)
    finally:
        reset_inbound_deadline(token)
    assert stopped.value.reason == "CALL_DEADLINE_PASSED"
    assert servicer.caches()["analyses"].misses == 1
    assert servicer.AnalyzeConsumedResponse(request, None).SerializeToString()  # in time: answered


def test_the_caches_count_the_memory_their_results_hold() -> None:
    """A result holds far more than its inputs' size (the derived checkpoint, the witness, the
    contract, each as bytes and as parsed values): the caches measure it."""
    servicer = ReconstructionServicer(reconstructions=ContentCache(), analyses=ContentCache())
    checkpoint = (CASE / "checkpoint.json").read_bytes()
    raw = (CASE / "raw_response.json").read_bytes()
    consumed_at = MANIFEST["v1_basic"]["consumed_at"]
    request = reconstruction_pb2.ReconstructInvalidReadRequest(
        checkpoint=checkpoint,
        raw_response=raw,
        version=reconstruction_pb2.RECONSTRUCTION_VERSION_V1,
        consumed_at=consumed_at,
    )
    servicer.ReconstructInvalidRead(request, None)
    counted = servicer.caches()["reconstructions"].held_bytes
    # The cache counted 2 × the inputs' length before; the result holds several times more.
    assert counted > 4 * (len(checkpoint) + len(raw))
    # The same result computed here (strings may be shared differently after the worker's pickle).
    held = held_bytes(reconstruct_invalid_read(checkpoint, raw, 1, consumed_at))
    assert held / 2 < counted < 2 * held
