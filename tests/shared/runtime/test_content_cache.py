"""The content-addressed result cache (shared.runtime.content_cache): same inputs, same answer,
computed once; bounded; refusals never remembered."""

from __future__ import annotations

import pytest

from shared.runtime.content_cache import ContentCache, content_key
from shared.runtime.errors import FailedPrecondition
from shared.runtime.memory_size import held_bytes


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
        assert cache.get_or_compute("k", compute) == "value"
    assert calls == ["k"]
    assert (cache.hits, cache.misses) == (2, 1)


def test_bounded_by_entries_and_measured_bytes_least_recent_first() -> None:
    kib = held_bytes(b"x" * 1024)
    cache: ContentCache[bytes] = ContentCache(max_entries=2, max_bytes=3 * kib)
    cache.get_or_compute("a", lambda: b"a" * 1024)
    cache.get_or_compute("b", lambda: b"b" * 1024)
    cache.get_or_compute("a", lambda: b"?")  # a is now the most recent
    cache.get_or_compute("c", lambda: b"c" * 1024)  # evicts b
    assert len(cache) == 2
    assert cache.held_bytes == 2 * kib
    assert cache.get_or_compute("b", lambda: b"B") == b"B"
    cache.get_or_compute("big", lambda: b"x" * 4096)  # above the byte bound: never kept
    assert cache.held_bytes <= 3 * kib
    assert cache.get_or_compute("big", lambda: b"y") == b"y"
    # Two results of one small input are counted by what they hold, not by the input.
    wide = ContentCache[list[bytes]](max_bytes=3 * kib)
    wide.get_or_compute("small-input", lambda: [b"w" * 1024, b"v" * 1024])
    wide.get_or_compute("other", lambda: [b"u" * 1024, b"t" * 1024])  # evicts the first
    assert len(wide) == 1


def test_refusals_are_not_cached() -> None:
    cache: ContentCache[int] = ContentCache()
    attempts = []

    def refuse() -> int:
        attempts.append(1)
        raise FailedPrecondition("X_REFUSED", "no")

    for _ in range(2):
        with pytest.raises(FailedPrecondition):
            cache.get_or_compute("k", refuse)
    assert len(attempts) == 2
    assert len(cache) == 0


def test_a_result_remember_refuses_is_returned_and_computed_again() -> None:
    cache: ContentCache[str] = ContentCache()
    computed: list[str] = []

    def compute(value: str) -> str:
        computed.append(value)
        return value

    def kept(result: str) -> bool:
        return result != "refused"

    assert cache.get_or_compute("k", lambda: compute("refused"), remember=kept) == "refused"
    assert cache.get_or_compute("k", lambda: compute("answer"), remember=kept) == "answer"
    assert cache.get_or_compute("k", lambda: compute("other"), remember=kept) == "answer"
    assert computed == ["refused", "answer"]
    assert (cache.hits, cache.misses, len(cache)) == (1, 2, 1)
