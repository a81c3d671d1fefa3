"""What an admission reads before the policy lock is one statement: the journal rows its checks
judge, exactly as ``newest_entries`` reads them, and the stored bytes of the source checkpoint
the newest model_request_sent names, found by the database reading the payload itself. A name
the database cannot use (absent, not text, not stored) finds nothing and refuses nothing: the
admission then reads the bytes under the lock as before (transactions/admission.py)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from services.demo.seed import seed_held_run
from services.ledger.domain.journal import EntryKind, seal
from services.ledger.repository import blobs as blob_rows
from services.ledger.repository import journal as journal_rows
from services.ledger.repository import journal_reads
from services.ledger.repository.admission_journal import newest_entries_and_checkpoint
from shared.continuity.canonical import canonical_text, digest_of
from shared.continuity.timeutil import to_text, utc_now
from tests.ledger.admission_support import FIXTURE
from tests.ledger.conftest import LedgerClients

JUDGED = (
    EntryKind.RUN_STARTED,
    EntryKind.CHECKPOINT_STORED,
    EntryKind.MODEL_REQUEST_SENT,
    EntryKind.RESPONSE_CONSUMED,
)


def test_the_read_finds_the_journal_rows_and_the_named_checkpoint(
    clients: LedgerClients, engine: Engine
) -> None:
    seeded = seed_held_run(clients.ledger(), FIXTURE, "run-early")  # type: ignore[arg-type]
    with engine.begin() as connection:
        newest, found = newest_entries_and_checkpoint(connection, "run-early", JUDGED)
        expected = journal_reads.newest_entries(connection, "run-early", JUDGED)
        stored = blob_rows.get_content(connection, seeded.checkpoint_digest)
    assert newest == expected
    assert newest.last is not None and newest.last.hash == seeded.head_hash
    assert stored is not None
    assert found == {seeded.checkpoint_digest: stored}


@pytest.mark.parametrize(
    "named",
    [
        {"checkpoint_digest": digest_of("never stored")},
        {"checkpoint_digest": 7},
        {"checkpoint_digest": None},
        {"other": "no name at all"},
    ],
    ids=["not-stored", "a-number", "null", "absent"],
)
def test_a_name_the_database_cannot_use_finds_nothing(
    clients: LedgerClients, engine: Engine, named: dict[str, object]
) -> None:
    seed_held_run(clients.ledger(), FIXTURE, "run-odd")  # type: ignore[arg-type]
    with engine.begin() as connection:
        sequence, head = journal_reads.journal_head(connection, "run-odd")
        entry = seal(
            "run-odd",
            sequence + 1,
            EntryKind.MODEL_REQUEST_SENT,
            canonical_text(named),
            head,
            "platform",
            to_text(utc_now()),
        )
        journal_rows.insert_journal_entries(connection, [entry])
        newest, found = newest_entries_and_checkpoint(connection, "run-odd", JUDGED)
    assert newest.newest(EntryKind.MODEL_REQUEST_SENT) == entry
    assert found == {}


def test_a_run_without_entries_reads_nothing(engine: Engine) -> None:
    with engine.begin() as connection:
        newest, found = newest_entries_and_checkpoint(connection, "no-such-run", JUDGED)
    assert newest.last is None and newest.of_kind == {} and found == {}
