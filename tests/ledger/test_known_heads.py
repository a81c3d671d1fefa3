"""A native append at the head its ledger appended last notes and inserts in one statement
(transactions.known_heads). The head a ledger remembers is only a hint: whatever it holds, an
append lands exactly after the run's real head or is refused as stale, and writes nothing else.
Two ledgers on one database stand in for two replicas."""

from __future__ import annotations

import json
import threading

import pytest
from sqlalchemy import Engine, select

from services.ledger.domain.journal import EntryKind, StoredEntry
from services.ledger.schema import runs
from services.ledger.service import Ledger
from services.ledger.transactions.known_heads import KnownHeads
from shared.continuity.canonical import GENESIS_HASH
from shared.runtime.errors import Aborted, NotFound
from tests.ledger.conftest import Clock, run_spec
from tests.support import row_counts, token_roles

NOTE = EntryKind.STARTUP_RECOVERY_ANNOTATION


def _note(ledger: Ledger, head: str, text: str, run_id: str = "run-1") -> StoredEntry:
    return ledger.append(run_id, head, NOTE, json.dumps({"annotation": text}), "writer")


def _intact_chain(ledger: Ledger, run_id: str = "run-1") -> list[StoredEntry]:
    verification = ledger.verify(run_id)
    assert verification.valid, verification
    entries = ledger.read_journal(run_id, 1, 1000).entries
    assert [e.sequence for e in entries] == list(range(1, len(entries) + 1))
    assert [e.prev_hash for e in entries] == [GENESIS_HASH, *(e.hash for e in entries[:-1])]
    return list(entries)


def _updated_at(engine: Engine, run_id: str = "run-1") -> str:
    with engine.connect() as connection:
        return str(
            connection.execute(
                select(runs.c.updated_at).where(runs.c.run_id == run_id)
            ).scalar_one()
        )


@pytest.fixture
def replicas(engine: Engine) -> tuple[Ledger, Ledger]:
    first, second = Ledger(engine, authority=token_roles), Ledger(engine, authority=token_roles)
    first.create_run(run_spec("run-1"), "writer")
    return first, second


def test_an_append_after_another_replica_appended_lands_after_the_real_head(
    replicas: tuple[Ledger, Ledger], engine: Engine
) -> None:
    one, two = replicas
    head = _note(one, "", "one").hash
    head = _note(one, head, "one again").hash  # one now knows this head
    moved = _note(two, head, "two").hash  # two appends: what one knows is stale
    counts, touched = row_counts(engine), _updated_at(engine)
    with pytest.raises(Aborted) as refused:
        _note(one, head, "stale")
    assert refused.value.reason == "JOURNAL_HEAD_STALE"
    assert refused.value.metadata["current_head_hash"] == moved
    assert row_counts(engine) == counts and _updated_at(engine) == touched
    landed = _note(one, moved, "at the real head")
    assert (landed.sequence, landed.prev_hash) == (4, moved)
    assert _note(one, landed.hash, "known again").sequence == 5
    assert len(_intact_chain(one)) == 5


@pytest.mark.parametrize(
    "hint",
    [
        lambda entries: (entries[-2].sequence, entries[-1].hash),  # right hash, wrong sequence
        lambda entries: (entries[-1].sequence + 3, entries[-1].hash),  # beyond the head
        lambda entries: (entries[-1].sequence - 1, entries[-1].hash),  # before it
        lambda entries: (entries[-1].sequence, entries[-1].hash),  # the real head
    ],
    ids=["one-before", "beyond", "behind", "right"],
)
def test_whatever_head_a_ledger_remembers_an_append_links_to_the_real_head(
    replicas: tuple[Ledger, Ledger], engine: Engine, hint: object
) -> None:
    """A remembered head that names the right hash at another sequence (as after a lost
    commit, a restored database or a bug) never produces a gap, a fork or a second note."""
    one, _ = replicas
    head = ""
    for n in range(3):
        head = _note(one, head, f"n{n}").hash
    entries = _intact_chain(one)
    forged = KnownHeads()
    sequence, digest = hint(entries)  # type: ignore[operator]
    forged.note(StoredEntry("run-1", sequence, "x", "{}", "", digest, "", ""))
    object.__setattr__(one._context, "heads", forged)  # the hint under test
    appended = _note(one, head, "after the head")
    assert (appended.sequence, appended.prev_hash) == (4, head)
    assert len(_intact_chain(one)) == 4
    assert forged.get("run-1") == (4, appended.hash)


def test_an_unknown_run_is_not_found_even_with_a_remembered_head(
    replicas: tuple[Ledger, Ledger], engine: Engine
) -> None:
    one, _ = replicas
    entry = _note(one, "", "first")
    one._context.heads.note(StoredEntry("run-2", 1, "x", "{}", "", entry.hash, "", ""))
    counts = row_counts(engine)
    with pytest.raises(NotFound):
        _note(one, entry.hash, "nowhere", run_id="run-2")
    assert row_counts(engine) == counts


def test_a_run_held_entry_at_a_known_head_marks_the_run_held(
    replicas: tuple[Ledger, Ledger], engine: Engine
) -> None:
    one, _ = replicas
    head = _note(one, "", "first").hash
    payload = json.dumps({"reason": "evidence query rejected", "call_id": "c1"})
    held = one.append("run-1", head, EntryKind.RUN_HELD, payload, "writer")
    assert held.sequence == 2
    with engine.connect() as connection:
        state = connection.execute(
            select(runs.c.continuity_state).where(runs.c.run_id == "run-1")
        ).scalar_one()
    assert state == "held"


def test_racing_appends_on_two_replicas_never_fork(
    replicas: tuple[Ledger, Ledger], engine: Engine
) -> None:
    """Writers on both replicas append at whatever head they last saw, each retrying at the head
    a stale refusal names: every append lands exactly once, in one unbroken chain."""
    writers, appends_each = 6, 5
    head = _note(replicas[0], "", "start").hash
    failures: list[BaseException] = []
    start = threading.Barrier(writers)

    def writer(index: int) -> None:
        ledger = replicas[index % 2]
        seen = head
        try:
            start.wait()
            for n in range(appends_each):
                for _attempt in range(200):
                    try:
                        seen = _note(ledger, seen, f"w{index}-{n}").hash
                        break
                    except Aborted as stale:
                        seen = str(stale.metadata["current_head_hash"])
                else:
                    raise AssertionError(f"writer {index} never appended {n}")
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    entries = _intact_chain(replicas[1])
    notes = sorted(json.loads(e.payload_json)["annotation"] for e in entries[1:])
    assert notes == sorted(f"w{i}-{n}" for i in range(writers) for n in range(appends_each))


def test_an_append_at_a_known_head_leaves_the_run_row_as_the_two_statement_append_does(
    engine: Engine, clock: Clock
) -> None:
    """The one-statement append notes exactly what the two-statement one notes on the run row
    (a parameter named like a runs column would also set that column)."""
    one, two = (
        Ledger(engine, clock, authority=token_roles),
        Ledger(engine, clock, authority=token_roles),
    )
    rows, start = {}, clock.now
    for run_id, second in (("run-known", one), ("run-read", two)):
        clock.now = start
        one.create_run(run_spec(run_id), "writer")
        head = _note(one, "", "first", run_id).hash
        clock.advance(1)
        _note(second, head, "second", run_id)  # one knows the head of run-known only
        with engine.connect() as connection:
            row = connection.execute(select(runs).where(runs.c.run_id == run_id)).mappings().one()
        rows[run_id] = {k: v for k, v in row.items() if k not in ("run_id", "run_digest")}
    assert rows["run-known"] == rows["run-read"]
