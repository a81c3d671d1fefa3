"""verify_chain with a memory of intact entries gives exactly the answer without it: identical
fields are not recomputed, any altered field is, links and order are always checked."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from shared.continuity.canonical import GENESIS_HASH, canonical_text
from shared.continuity.journal_chain import IntactEntries, entry_hash, verify_chain


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
