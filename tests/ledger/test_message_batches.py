"""How a journal page and a stream's batches are cut (``journal.batches``): in order, nothing lost
or repeated, at most the asked number of entries, and about ``MESSAGE_PAYLOAD_BYTES`` of payloads
a message, as full as those two bounds allow."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.ledger.domain.journal import StoredEntry
from services.ledger.transactions.journal import MESSAGE_PAYLOAD_BYTES, batches


def _entry(sequence: int, payload_bytes: int) -> StoredEntry:
    payload = '{"n":"' + "é" * max(0, (payload_bytes - 8) // 2) + '"}'  # two bytes a character
    return StoredEntry("run-1", sequence, "run_held", payload, "", f"h{sequence}", "a", "")


def _size(entry: StoredEntry) -> int:
    return len(entry.payload_json.encode("utf-8"))


@given(
    sizes=st.lists(st.integers(0, 300 * 1024), max_size=40),
    limit=st.integers(1, 12),
)
def test_batches_keep_every_entry_in_order_within_both_bounds(sizes: list[int], limit: int) -> None:
    entries = [_entry(n, size) for n, size in enumerate(sizes, start=1)]
    cut = list(batches(entries, limit))
    assert [entry for batch in cut for entry in batch] == entries
    for batch, following in zip(cut, [*cut[1:], None], strict=False):
        assert 1 <= len(batch) <= limit
        total = sum(map(_size, batch))
        assert total <= MESSAGE_PAYLOAD_BYTES or len(batch) == 1
        if following is not None:  # cut only where the next entry would break a bound
            assert len(batch) == limit or total + _size(following[0]) > MESSAGE_PAYLOAD_BYTES


def test_large_payloads_are_cut_by_bytes_before_the_count() -> None:
    entries = [_entry(n, 200 * 1024) for n in range(1, 9)]
    assert [len(batch) for batch in batches(entries, 100)] == [5, 3]
    assert [len(batch) for batch in batches(entries, 2)] == [2, 2, 2, 2]
    assert list(batches([], 5)) == []
