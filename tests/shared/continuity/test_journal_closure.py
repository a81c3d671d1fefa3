"""The closure is one definition for both readers: the ledger's stored rows (read through
PayloadRow, only the closure kinds kept) name the same request, consume, checkpoint and blobs as
the candidate's parsed entries."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from shared.continuity.journal_closure import CLOSURE_KINDS, Closure, PayloadRow, closure_of
from tests.candidate.memory import CHECKPOINT_DIGEST, RESPONSE_DIGEST, chained, held_journal

TWO_TURNS = [
    ("checkpoint_stored", {"checkpoint_digest": "sha256:" + "1" * 64}),
    ("model_request_sent", {"request_id": "req-0", "checkpoint_digest": "sha256:" + "1" * 64}),
    ("response_consumed", {"request_id": "req-0", "response_digest": "sha256:" + "2" * 64}),
    *held_journal(),
    ("response_consumed", {"request_id": "req-1", "response_digest": "sha256:" + "3" * 64}),
]


def shape(closure: Closure[Any]) -> tuple[object, ...]:
    """The sequences of the closure's entries and the blobs it names."""
    parts = (closure.request, closure.consume, closure.checkpoint_stored)
    return (*(p.sequence if p is not None else None for p in parts), closure.blob_digests)


@pytest.mark.parametrize("journal", [held_journal(), TWO_TURNS, held_journal()[:3]])
def test_stored_rows_and_parsed_entries_name_the_same_closure(
    journal: list[tuple[str, dict[str, Any]]],
) -> None:
    entries = chained(journal)
    candidate = closure_of(entries)
    ledger = closure_of([PayloadRow(e) for e in entries if e.kind in CLOSURE_KINDS])
    assert shape(ledger) == shape(candidate)


def test_the_held_journal_names_its_checkpoint_then_its_response() -> None:
    assert closure_of(chained(held_journal())).blob_digests == (CHECKPOINT_DIGEST, RESPONSE_DIGEST)
    # The first response_consumed of the last request counts, not a later one.
    assert closure_of(chained(TWO_TURNS)).blob_digests == (CHECKPOINT_DIGEST, RESPONSE_DIGEST)


def test_a_payload_that_is_not_an_object_names_nothing() -> None:
    entries = chained(held_journal())
    broken = [
        replace(e, payload_json="[1]") if e.kind == "model_request_sent" else e for e in entries
    ]
    assert closure_of(broken).blob_digests == ("",)
    assert closure_of([PayloadRow(e) for e in broken]).blob_digests == ("",)
