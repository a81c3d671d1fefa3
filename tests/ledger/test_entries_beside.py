"""``repository.journal_reads.entries_of_kinds_and_head`` with ``from_start``: one statement that
answers what ``entries_of_kinds`` from a sequence, ``entries_of_kinds`` of further kinds from the
run's first entry and ``journal_head`` answer one by one (a claim's and a command charge's read
under the run row's lock, transactions/execution_rules.py:read_effects), whatever the journal
holds and wherever the read starts."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from services.ledger.domain.journal import EntryKind, seal
from services.ledger.domain.runs import Run
from services.ledger.repository import journal as journal_rows
from services.ledger.repository import journal_reads
from services.ledger.repository import runs as run_rows
from shared.continuity.canonical import GENESIS_HASH
from tests.ledger.conftest import run_spec

K = EntryKind
JUDGED = (K.OWNERSHIP_CLAIM, K.REQUEST_EVENT, K.TOOL_OUTCOME)
BESIDE = (K.COMMAND_EXECUTED, K.RUN_STARTED)
# Kinds of both groups and of neither, so that the read must tell them apart.
WRITTEN = st.sampled_from([*JUDGED, *BESIDE, K.TOOL_INTENT, K.RUN_HELD])
_RUNS = itertools.count()


def _run(run_id: str) -> Run:
    spec = run_spec(run_id, active_deadline="")
    return Run(spec, "writer", "2026-12-01T12:00:00.000000Z", "sha256:" + "d" * 64)


def _written(engine: Engine, run_id: str, kinds: list[EntryKind]) -> None:
    with engine.begin() as connection:
        run_rows.insert_run(connection, _run(run_id))
        head = GENESIS_HASH
        for sequence, kind in enumerate(kinds, start=1):
            payload = f'{{"n":{sequence}}}'
            entry = seal(run_id, sequence, kind, payload, head, "w", "2026-12-01T12:00:00Z")
            journal_rows.insert_journal_entry(connection, entry)
            head = entry.hash


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    kinds=st.lists(WRITTEN, max_size=30),
    neighbour=st.lists(WRITTEN, min_size=1, max_size=10),
    start=st.integers(min_value=0, max_value=32),
    beside=st.sampled_from([(K.COMMAND_EXECUTED,), (K.RUN_STARTED,), BESIDE]),
)
def test_the_read_beside_agrees_with_the_reads_one_by_one(
    engine: Engine,
    kinds: list[EntryKind],
    neighbour: list[EntryKind],
    start: int,
    beside: tuple[EntryKind, ...],
) -> None:
    n = next(_RUNS)
    run_id, other = f"run-{n}", f"neighbour-{n}"
    _written(engine, run_id, kinds)
    # another run's entries of every kind must never leak into the answer
    _written(engine, other, neighbour)
    with engine.connect() as connection:
        both, head = journal_reads.entries_of_kinds_and_head(
            connection, run_id, *JUDGED, from_sequence=start, from_start=beside
        )
        judged = journal_reads.entries_of_kinds(connection, run_id, *JUDGED, from_sequence=start)
        besides = journal_reads.entries_of_kinds(connection, run_id, *beside)
        assert both == sorted([*judged, *besides], key=lambda entry: entry.sequence)
        assert head == journal_reads.journal_head(connection, run_id)
        alone, alone_head = journal_reads.entries_of_kinds_and_head(
            connection, run_id, *JUDGED, from_sequence=start
        )
        assert (alone, alone_head) == (judged, head)
    assert len(both) == sum(
        1
        for sequence, kind in enumerate(kinds, start=1)
        if kind in beside or (kind in JUDGED and sequence >= start)
    )
