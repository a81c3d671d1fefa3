"""``repository.journal_reads.newest_entries``: one statement that answers what reading the whole
journal answers (the admission commit judges these rows)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from services.ledger.domain.journal import EntryKind, seal
from services.ledger.domain.runs import Run
from services.ledger.repository import journal as journal_rows
from services.ledger.repository import journal_reads
from services.ledger.repository import runs as run_rows
from shared.continuity.canonical import GENESIS_HASH
from tests.ledger.conftest import run_spec

K = EntryKind
ASKED = (K.RUN_STARTED, K.CHECKPOINT_STORED, K.RESPONSE_CONSUMED)


def _run(run_id: str) -> Run:
    spec = run_spec(run_id, active_deadline="")
    return Run(spec, "writer", "2026-12-01T12:00:00.000000Z", "sha256:" + "d" * 64)


@pytest.mark.parametrize(
    "kinds",
    [
        [],
        [K.RUN_STARTED],
        [K.RUN_STARTED, K.CHECKPOINT_STORED, K.RESPONSE_CONSUMED, K.RUN_HELD],
        [
            K.RUN_STARTED,
            K.CHECKPOINT_STORED,
            K.CHECKPOINT_STORED,
            K.RESPONSE_CONSUMED,
            K.CHECKPOINT_STORED,
            K.RESPONSE_CONSUMED,
            K.RUN_HELD,
        ],
        [K.RUN_STARTED, K.RUN_HELD, K.RUN_HELD],
    ],
)
def test_newest_entries_agree_with_the_one_by_one_reads(
    engine: Engine, kinds: list[EntryKind]
) -> None:
    with engine.begin() as connection:
        for run_id in ("run-a", "run-b"):
            run_rows.insert_run(connection, _run(run_id))
        # run-b, with more entries of every kind, must never leak into run-a's answer.
        head = (0, GENESIS_HASH)
        for sequence, kind in enumerate([*ASKED, *ASKED, K.RUN_HELD], start=1):
            entry = seal("run-b", sequence, kind, "{}", head[1], "w", "2026-12-01T12:00:00Z")
            journal_rows.insert_journal_entry(connection, entry)
            head = (sequence, entry.hash)
        head = (0, GENESIS_HASH)
        for sequence, kind in enumerate(kinds, start=1):
            payload = f'{{"n":{sequence}}}'
            entry = seal("run-a", sequence, kind, payload, head[1], "w", "2026-12-01T12:00:00Z")
            journal_rows.insert_journal_entry(connection, entry)
            head = (sequence, entry.hash)
    with engine.connect() as connection:
        newest = journal_reads.newest_entries(connection, "run-a", ASKED)
        journal = list(journal_reads.iter_journal(connection, "run-a"))
        assert newest.last == (journal[-1] if journal else None)
        for kind in ASKED:
            of_kind = [entry for entry in journal if entry.kind == kind.value]
            assert newest.newest(kind) == (of_kind[-1] if of_kind else None)
        # A kind not asked for is not answered, even when present.
        assert newest.newest(K.RUN_HELD) is None
    if kinds:
        assert newest.last is not None and newest.last.sequence == len(kinds)
    else:
        assert newest.last is None and newest.of_kind == {}
