"""The signed head is stored by the write's own statement (ADR 0060): signed before the insert,
checked before it in one read when this ledger did not sign the head it extends, refused only
after the insert proved that head is the run's. Two ledgers on one database stand in for two
replicas."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, event

from services.ledger.domain.journal import EntryKind, StoredEntry
from services.ledger.domain.signing import HeadSigner, SignedHead
from services.ledger.repository.signed_heads import read_signed_heads
from services.ledger.service import Ledger
from services.ledger.transactions.known_heads import KnownHeads
from tests.ledger.conftest import run_spec
from tests.support import token_roles

NOTE = EntryKind.STARTUP_RECOVERY_ANNOTATION


def _note(ledger: Ledger, head: str, text: str) -> StoredEntry:
    return ledger.append("run-1", head, NOTE, json.dumps({"annotation": text}), "writer")


@pytest.fixture
def signer() -> HeadSigner:
    return HeadSigner.generate()


@pytest.fixture
def replicas(engine: Engine, signer: HeadSigner) -> tuple[Ledger, Ledger]:
    first = Ledger(engine, authority=token_roles, signer=signer)
    second = Ledger(engine, authority=token_roles, signer=signer)
    first.create_run(run_spec("run-1"), "writer")
    return first, second


@pytest.fixture
def statements(engine: Engine) -> Iterator[list[str]]:
    """Every SQL statement the engine runs from here on, lower-cased."""
    seen: list[str] = []

    def record(*args: object) -> None:
        seen.append(str(args[2]).lower())

    event.listen(engine, "before_cursor_execute", record)
    yield seen
    event.remove(engine, "before_cursor_execute", record)


def _signatures(engine: Engine) -> list[SignedHead]:
    with engine.connect() as connection:
        return read_signed_heads(connection, "run-1", 1, 1000)


def _chained_and_trusted(signer: HeadSigner, heads: list[SignedHead]) -> None:
    """Each signature verifies and names the one before it (ADR 0015)."""
    assert heads
    for before, after in zip([None, *heads], heads, strict=False):
        assert signer.distrusts(after) is None
        if before is None:
            assert after.previous is None
        else:
            assert after.previous == before.as_previous()


def _touching_signed_heads(statements: list[str]) -> list[str]:
    return [sql for sql in statements if "signed_heads" in sql]


def test_a_head_this_ledger_signed_is_signed_in_the_appends_own_statement(
    replicas: tuple[Ledger, Ledger], engine: Engine, signer: HeadSigner, statements: list[str]
) -> None:
    one, _ = replicas
    head = _note(one, "", "first").hash  # one signed this head: it remembers the signature
    statements.clear()
    appended = _note(one, head, "second")
    touching = _touching_signed_heads(statements)
    if engine.dialect.name == "postgresql":
        # nothing read to sign; the entry and its signature in one statement
        assert len(touching) == 1
        assert "insert into journal_entries" in touching[0]
        assert "insert into signed_heads" in touching[0]
    else:
        # SQLite has no data-modifying WITH: the signature is its own insert, after the entry
        assert len(touching) == 1 and touching[0].startswith("insert into signed_heads")
        inserts = [sql for sql in statements if sql.startswith("insert")]
        assert inserts.index(touching[0]) > 0
    heads = _signatures(engine)
    assert [(h.sequence, h.head_hash) for h in heads][-1] == (appended.sequence, appended.hash)
    _chained_and_trusted(signer, heads)


def test_a_head_another_ledger_signed_is_read_once_then_signed_in_the_write(
    replicas: tuple[Ledger, Ledger], engine: Engine, signer: HeadSigner, statements: list[str]
) -> None:
    one, two = replicas
    head = _note(one, "", "by one").hash
    statements.clear()
    appended = _note(two, head, "by two")  # two never signed this run's head: it checks it
    touching = _touching_signed_heads(statements)
    reads = [sql for sql in touching if sql.lstrip("( ").startswith("select")]
    # the newest signature and the declared prefix in one read
    assert len(reads) == 1 and "unsigned_prefixes" in reads[0]
    writes = [sql for sql in touching if sql not in reads]
    assert len(writes) == 1
    if engine.dialect.name == "postgresql":
        assert "insert into journal_entries" in writes[0]
    assert appended.sequence == 2
    _chained_and_trusted(signer, _signatures(engine))
    # and one, whose memory is now behind, checks again and chains to two's signature
    assert _note(one, appended.hash, "by one again").sequence == 3
    _chained_and_trusted(signer, _signatures(engine))


@pytest.mark.parametrize(
    "hint",
    [
        lambda entries: (entries[-2].sequence, entries[-1].hash),  # right hash, wrong sequence
        lambda entries: (entries[-2].sequence, entries[-2].hash),  # the head before the real one
        lambda entries: (entries[-1].sequence + 3, entries[-1].hash),  # beyond the head
    ],
    ids=["one-before", "behind", "beyond"],
)
def test_a_wrong_remembered_head_is_never_an_alarm_about_the_signatures(
    replicas: tuple[Ledger, Ledger],
    engine: Engine,
    signer: HeadSigner,
    caplog: pytest.LogCaptureFixture,
    hint: object,
) -> None:
    """The ledger's own newer signature is judged against a head that is not the run's (a stale
    hint): the check that would refuse it (``signed_beyond_head``) must not speak before the
    insert proved the head is the run's; the append lands at the real head, signed, as without
    a key."""
    one, _ = replicas
    head = ""
    for n in range(3):
        head = _note(one, head, f"n{n}").hash
    entries = one.read_journal("run-1", 1, 100).entries
    forged = KnownHeads()
    sequence, digest = hint(entries)  # type: ignore[operator]
    forged.note(StoredEntry("run-1", sequence, "x", "{}", "", digest, "", ""))
    object.__setattr__(one._context, "heads", forged)  # the hint under test
    with caplog.at_level(logging.WARNING, logger="forge.ledger"):
        appended = _note(one, head, "after the head")
    assert (appended.sequence, appended.prev_hash) == (4, head)
    assert not [r for r in caplog.records if "ALARM" in r.getMessage()]
    assert one.verify("run-1").valid
    heads = _signatures(engine)
    assert [h.sequence for h in heads] == [1, 2, 3, 4]
    _chained_and_trusted(signer, heads)
