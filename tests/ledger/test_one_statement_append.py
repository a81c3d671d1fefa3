"""A native append at the head its ledger appended last is one statement, and on PostgreSQL that
statement is its own transaction: no BEGIN and no COMMIT are sent around it (ADR 0065). So it
must write nothing at all where it does not append, the run row included, and the ledger must
not send it where it would refuse the head it extends: nothing it sent can be rolled back."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import Connection, Engine, event

from services.ledger.database import make_engine
from services.ledger.domain.journal import EntryKind, StoredEntry
from services.ledger.domain.signing import HeadSigner
from services.ledger.service import Ledger
from shared.runtime.config import DatabaseSettings
from shared.runtime.errors import Aborted, FailedPrecondition
from tests.attacker import delete_signatures
from tests.ledger.conftest import run_spec
from tests.support import row_counts, run_row, token_roles

NOTE = EntryKind.STARTUP_RECOVERY_ANNOTATION


def _note(ledger: Ledger, head: str, text: str) -> StoredEntry:
    return ledger.append("run-1", head, NOTE, json.dumps({"annotation": text}), "writer")


def _statuses(engine: Engine) -> list[tuple[str, str]]:
    """Each statement the engine sends from now on, with the session's transaction status after
    it (IDLE: the statement was a transaction of its own)."""
    seen: list[tuple[str, str]] = []

    def note(connection: Connection, _cursor: object, statement: str, *_: object) -> None:
        info = connection.connection.dbapi_connection.info  # type: ignore[union-attr]
        seen.append((statement, info.transaction_status.name))

    event.listen(engine, "after_cursor_execute", note)
    return seen


def test_an_append_at_a_known_head_is_a_transaction_of_its_own(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite appends in a local transaction, without round trips")
    ledger = Ledger(engine, authority=token_roles)
    ledger.create_run(run_spec("run-1"), "writer")
    head = _note(ledger, "", "first").hash  # the ledger now knows the head
    seen = _statuses(engine)
    _note(ledger, head, "at the known head")
    assert [status for _, status in seen] == ["IDLE"]
    assert " ".join(seen[0][0].split()).startswith("WITH noted AS (UPDATE runs")


def test_behind_a_transaction_mode_pooler_the_append_keeps_its_transaction(
    database_url: str,
) -> None:
    """Where the timeouts are set in every transaction, a statement outside one would run
    without them: there the append runs in a transaction, its timeouts set first."""
    if not database_url.startswith("postgresql"):
        pytest.skip("the per-transaction timeouts are PostgreSQL's")
    engine = make_engine(database_url, DatabaseSettings(server_prepares=False), pool_size=1)
    try:
        ledger = Ledger(engine, authority=token_roles)
        ledger.create_run(run_spec("run-1"), "writer")
        head = _note(ledger, "", "first").hash
        seen = _statuses(engine)
        _note(ledger, head, "at the known head")
    finally:
        engine.dispose()
    assert len(seen) == 2
    assert "set_config('statement_timeout'" in seen[0][0]
    assert [status for _, status in seen] == ["INTRANS", "INTRANS"]


def test_a_hold_refused_at_a_stale_known_head_leaves_the_run_row_as_it_was(
    engine: Engine,
) -> None:
    """A ``run_held`` entry at a head another replica moved past fails the whole statement (the
    link constraint): it neither marks the run held nor touches its time. (The statement notes
    the run row only where it inserts: tests/ledger/test_outstanding_ticket.py.)"""
    one, two = Ledger(engine, authority=token_roles), Ledger(engine, authority=token_roles)
    one.create_run(run_spec("run-1"), "writer")
    head = _note(one, "", "first").hash  # one knows this head
    moved = _note(two, head, "second").hash
    counts, row = row_counts(engine), run_row(engine)
    payload = json.dumps({"reason": "evidence query rejected", "call_id": "c1"})
    with pytest.raises(Aborted) as refused:
        one.append("run-1", head, EntryKind.RUN_HELD, payload, "writer")
    assert refused.value.reason == "JOURNAL_HEAD_STALE"
    assert refused.value.metadata["current_head_hash"] == moved
    assert row_counts(engine) == counts
    assert run_row(engine) == row and row["continuity_state"] != "held"


def test_a_head_the_ledger_would_not_sign_is_refused_with_nothing_written(
    engine: Engine,
) -> None:
    """A ledger that knows the head but not its signature (another replica, or a memory that let
    it go) reads the run's signatures before it signs. Where a database writer deleted them, it
    refuses the head: the append must not be sent as a statement that commits by itself."""
    signer = HeadSigner.generate()
    one = Ledger(engine, authority=token_roles, signer=signer)
    one.create_run(run_spec("run-1"), "writer")
    first = _note(one, "", "first")
    second = _note(one, first.hash, "second")
    delete_signatures(engine, "run-1")
    other = Ledger(engine, authority=token_roles, signer=signer)
    other._context.heads.note(second)  # the head hint, without the signature in memory
    counts = row_counts(engine)
    with pytest.raises(FailedPrecondition) as refused:
        _note(other, second.hash, "after the deletion")
    assert refused.value.reason == "JOURNAL_HEAD_UNSIGNED"
    assert refused.value.metadata["finding"] == "head_unsigned"
    assert row_counts(engine) == counts
