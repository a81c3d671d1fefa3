"""The admission reads the journal rows and stored bytes it judges before it takes the policy
lock (shared since ADR 0049; a policy write waits for it), and decides only under the lock
(services/ledger/transactions/admission.py): the rows read early stand only while the head
read under the lock is the one they end with. An entry appended in between is judged as a later
caller would judge it, in the same transaction, and nothing is written. The lock is confirmed by
the statement that reads the rows the admission decides on: a policy revision committed while
the admission waited for the lock is the one it is judged against."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import grpc
import pytest
from sqlalchemy import Engine

from services.ledger.domain.policy import PolicyRevision, policy_digest
from services.ledger.repository import policy as policy_rows
from services.ledger.transactions.base import TRANSACTION_RETRIES
from tests.errors import expect_error
from tests.ledger.admission_support import commit, commit_request, enable_policy, seed
from tests.ledger.conftest import LedgerClients, annotate, counted, waiting_for_locks
from tests.support import row_counts

NOTE = "appended while the admission read"


def _is_policy_lock(statement: str) -> bool:
    # the policy lock is the schema's advisory gate, joined to the read of the newest revision
    return "pg_advisory_xact_lock" in statement and "FROM policy_revisions" in statement


@contextmanager
def before_policy_lock(engine: Engine, action: Callable[[], None]) -> Iterator[list[str]]:
    """Run ``action`` once, just before the first policy lock statement (PostgreSQL:
    every earlier statement of that transaction has run). Yields every statement seen."""

    def hook(statement: str, seen: list[str]) -> None:
        if _is_policy_lock(statement) and sum(map(_is_policy_lock, seen)) == 1:
            action()

    with counted(engine, hook) as seen:
        yield seen


@pytest.fixture
def postgres_only(database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite's BEGIN IMMEDIATE takes the write lock before the first read")


@pytest.mark.usefixtures("postgres_only")
def test_an_entry_appended_before_the_lock_is_judged_under_it_without_a_retry(
    clients: LedgerClients, engine: Engine
) -> None:
    seeded = seed(clients)
    enable_policy(clients)
    request = commit_request(clients, seeded)
    moved: list[str] = []
    retries = TRANSACTION_RETRIES.snapshot()
    with before_policy_lock(
        engine, lambda: moved.append(annotate(clients, seeded.run_id, seeded.head_hash, NOTE))
    ):
        counts = row_counts(engine)  # the annotation is counted after the call
        refused = expect_error(
            grpc.StatusCode.ABORTED, "JOURNAL_HEAD_STALE", lambda: commit(clients, request)
        )
    assert len(moved) == 1
    after = row_counts(engine)
    assert after == {**counts, "journal_entries": counts["journal_entries"] + 1}
    # Refused by the transaction that read the moved head under the lock, not by a retry after
    # its insert at the old head collided with the annotation.
    assert TRANSACTION_RETRIES.snapshot() == retries
    # The refusal names the head as the lock found it.
    assert refused.metadata["current_head_hash"] == moved[0]


@pytest.mark.usefixtures("postgres_only")
def test_the_journal_and_blob_reads_run_before_the_lock_and_three_statements_under_it(
    clients: LedgerClients, engine: Engine
) -> None:
    seeded = seed(clients)
    enable_policy(clients)
    with before_policy_lock(engine, lambda: None) as seen:
        assert commit(clients, commit_request(clients, seeded)).created
    lock = next(index for index, statement in enumerate(seen) if _is_policy_lock(statement))
    early, locked = seen[:lock], seen[lock:]
    assert any("UNION ALL" in statement for statement in early)  # the newest entries
    assert any("FROM blobs" in statement for statement in early)  # the source checkpoint
    assert not any("UNION ALL" in s or "FROM blobs" in s for s in locked)
    # Under the lock: the lock itself, the one read that confirms it and holds every row the
    # admission decides on, and the one statement that takes its place under the pending cap
    # and writes its rows (ADR 0049).
    assert len(locked) == 3, locked
    assert locked[2].startswith("WITH pending_slot")


@pytest.mark.usefixtures("postgres_only")
def test_a_policy_revision_committed_while_the_admission_waits_is_the_one_judged(
    clients: LedgerClients, engine: Engine
) -> None:
    seeded = seed(clients)
    enable_policy(clients)
    request = commit_request(clients, seeded)  # names the revision current now
    locked, written = threading.Event(), threading.Event()

    def policy_write() -> None:
        # as a policy write does (transactions/policy.py), holding the lock until the admission
        # waits for it
        with engine.begin() as connection:
            current = policy_rows.lock_current_policy(connection)
            locked.set()
            deadline = time.monotonic() + 10
            while waiting_for_locks(engine) == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            settings = replace(current.settings, window_seconds=60)
            revision = current.revision + 1
            policy_rows.insert_policy_revision(
                connection,
                PolicyRevision(
                    revision,
                    settings,
                    "admin",
                    "2026-12-01T12:00:01.000000Z",
                    policy_digest(revision, settings),
                ),
            )
        written.set()

    writer = threading.Thread(target=policy_write)
    writer.start()
    assert locked.wait(10)
    counts = row_counts(engine)
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "POLICY_REVISION_CHANGED",
        lambda: commit(clients, request),
    )
    writer.join(10)
    assert written.is_set()
    assert row_counts(engine) == {**counts, "policy_revisions": counts["policy_revisions"] + 1}
