"""The content-addressed result cache of the reconstruction service: same inputs, same answer,
computed once; bounded; refusals never remembered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forge.continuity.v1 import reconstruction_pb2
from services.reconstruction.cache import ContentCache, content_key
from services.reconstruction.servicer import ReconstructionServicer
from shared.runtime.errors import FailedPrecondition, InvalidArgument

CASE = Path(__file__).resolve().parents[1] / "data" / "fixtures" / "v1_basic"
MANIFEST = json.loads((CASE.parent / "manifest.json").read_text())


def test_content_key_separates_parts() -> None:
    assert content_key(b"ab", b"c") != content_key(b"a", b"bc")
    assert content_key("x", 1) == content_key(b"x", b"1")


def test_computes_once_per_key() -> None:
    cache: ContentCache[str] = ContentCache()
    calls: list[str] = []

    def compute() -> str:
        calls.append("k")
        return "value"

    for _ in range(3):
        assert cache.get_or_compute("k", 1, compute) == "value"
    assert calls == ["k"]
    assert (cache.hits, cache.misses) == (2, 1)


def test_bounded_by_entries_and_bytes_least_recent_first() -> None:
    cache: ContentCache[int] = ContentCache(max_entries=2, max_bytes=10)
    cache.get_or_compute("a", 4, lambda: 1)
    cache.get_or_compute("b", 4, lambda: 2)
    cache.get_or_compute("a", 4, lambda: 99)  # a is now the most recent
    cache.get_or_compute("c", 4, lambda: 3)  # evicts b
    assert len(cache) == 2
    assert cache.get_or_compute("b", 4, lambda: 20) == 20
    cache.get_or_compute("big", 11, lambda: 5)  # above the byte bound: never kept
    assert cache.held_bytes <= 10
    assert cache.get_or_compute("big", 11, lambda: 6) == 6


def test_refusals_are_not_cached() -> None:
    cache: ContentCache[int] = ContentCache()
    attempts = []

    def refuse() -> int:
        attempts.append(1)
        raise FailedPrecondition("X_REFUSED", "no")

    for _ in range(2):
        with pytest.raises(FailedPrecondition):
            cache.get_or_compute("k", 1, refuse)
    assert len(attempts) == 2
    assert len(cache) == 0


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
