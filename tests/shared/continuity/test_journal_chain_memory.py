"""verify_chain with a memory of intact entries gives exactly the answer without it: identical
fields are not recomputed, any altered field is, links and order are always checked."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.continuity.canonical import GENESIS_HASH, canonical_text
from shared.continuity.journal_chain import (
    ChainVerifier,
    IntactEntries,
    entry_fields,
    entry_hash,
    verify_chain,
)


@dataclass(frozen=True)
class Row:
    run_id: str
    sequence: int
    kind: str
    payload_json: str
    prev_hash: str
    hash: str
    actor: str
    recorded_at: str


def chain(length: int) -> list[Row]:
    rows, prev = [], GENESIS_HASH
    for sequence in range(1, length + 1):
        payload = {"annotation": f"n{sequence}"}
        fields = {
            "run_id": "run-1",
            "sequence": sequence,
            "kind": "startup_recovery_annotation",
            "prev_hash": prev,
            "actor": "writer",
            "recorded_at": "2026-01-01T00:00:00Z",
        }
        digest = entry_hash(payload=payload, **fields)  # type: ignore[arg-type]
        rows.append(Row(payload_json=canonical_text(payload), hash=digest, **fields))  # type: ignore[arg-type]
        prev = digest
    return rows


def tampered(rows: list[Row], index: int, **changes: object) -> list[Row]:
    copy = list(rows)
    copy[index] = replace(copy[index], **changes)  # type: ignore[arg-type]
    return copy


@pytest.mark.parametrize(
    "alter",
    [
        lambda rows: tampered(rows, 3, payload_json='{"annotation":"forged"}'),
        lambda rows: tampered(rows, 3, actor="someone else"),
        lambda rows: tampered(rows, 3, payload_json='{ "annotation": "n4" }'),
        lambda rows: tampered(rows, 3, prev_hash=rows[1].hash),
        lambda rows: rows[:3] + rows[4:],
        lambda rows: [rows[1], rows[0], *rows[2:]],
    ],
)
def test_same_answer_with_and_without_the_memory(alter: object) -> None:
    rows = chain(8)
    intact = IntactEntries()
    assert verify_chain(rows, intact) == verify_chain(rows)
    assert len(intact) == 8
    altered = alter(rows)  # type: ignore[operator]
    expected = verify_chain(altered)
    assert not expected.valid
    assert verify_chain(altered, intact) == expected
    assert verify_chain(rows, intact) == verify_chain(rows)


def test_memory_is_bounded() -> None:
    intact = IntactEntries(max_entries=5)
    rows = chain(12)
    assert verify_chain(rows, intact).valid
    assert len(intact) == 5
    assert verify_chain(rows, intact) == verify_chain(rows)


ALTERATIONS = {
    "payload": lambda rows, i: tampered(rows, i, payload_json='{"annotation":"forged"}'),
    "actor": lambda rows, i: tampered(rows, i, actor="someone else"),
    "not canonical": lambda rows, i: tampered(
        rows, i, payload_json=f'{{ "annotation": "n{i + 1}" }}'
    ),
    "link": lambda rows, i: tampered(
        rows, i, prev_hash=GENESIS_HASH if i else "sha256:" + "0" * 64
    ),
    "missing": lambda rows, i: rows[:i] + rows[i + 1 :],
    "none": lambda rows, i: rows,
}


@given(
    length=st.integers(1, 24),
    alteration=st.sampled_from(sorted(ALTERATIONS)),
    where=st.floats(0, 1, exclude_max=True),
    remembered_first=st.integers(0, 24),
    cuts=st.lists(st.integers(1, 24), max_size=5),
)
def test_batches_answer_as_the_whole_chain_whatever_is_remembered(
    length: int, alteration: str, where: float, remembered_first: int, cuts: list[int]
) -> None:
    """Fed in batches of any sizes, with any prefix of the intact chain already remembered, the
    verification says exactly what a recomputation of every entry without memory says; an
    intact chain ends with every entry remembered."""
    rows = chain(length)
    intact = IntactEntries()
    verify_chain(rows[:remembered_first], intact)
    altered = ALTERATIONS[alteration](rows, int(where * length))
    verifier = ChainVerifier(intact)
    bounds = sorted({0, len(altered), *(c for c in cuts if c < len(altered))})
    for start, end in itertools.pairwise(bounds):
        verifier.add_all(altered[start:end])
    expected = verify_chain(altered)
    assert verifier.result() == expected
    if expected.valid:
        assert all(intact.known([entry_fields(row) for row in altered]))
