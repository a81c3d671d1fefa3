"""The policy lock's re-read (ADR 0016): a policy write inserts a new revision instead of updating
one, so a transaction whose lock statement waited behind a policy write locks the revision that
was newest when the statement began, now superseded. ``lock_current_policy`` re-reads until the
locked row is the newest; without it a recovery or reconciliation queued behind a revocation is
judged against the policy it revoked. PostgreSQL only: SQLite's BEGIN IMMEDIATE serializes
writers before their first read."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from sqlalchemy import Engine

from services.ledger.database import make_engine
from services.ledger.domain.policy import PolicyRevision, policy_digest
from services.ledger.repository import policy as policy_rows
from services.ledger.transactions.base import lock_policy_counting_due
from shared.runtime.config import DatabaseSettings
from tests.conftest import postgres_schema
from tests.ledger.conftest import waiting_for_locks

APPLICATION = "policy-lock-reread"
QUEUE_DEADLINE_SECONDS = 60.0


@pytest.fixture
def engines() -> Iterator[tuple[Engine, Engine]]:
    """The policy writer's engine, and the waiter's (its sessions named, to see it queue)."""
    with postgres_schema(application_name=APPLICATION) as url:
        no_timeouts = DatabaseSettings(lock_timeout_ms=0, statement_timeout_ms=0)
        writer, waiter = make_engine(url, no_timeouts), make_engine(url, no_timeouts)
        try:
            yield writer, waiter
        finally:
            writer.dispose()
            waiter.dispose()


def test_a_lock_that_waited_behind_a_revocation_judges_the_revocation(
    engines: tuple[Engine, Engine],
) -> None:
    writer, waiter = engines
    judged: list[PolicyRevision] = []

    def queued() -> None:
        with waiter.begin() as connection:
            # what recoveries and reconciliations take first (execution_stops.Expiry)
            judged.append(lock_policy_counting_due(connection, "9999-12-31T00:00:00.000000Z")[0])

    with writer.begin() as connection:
        current = policy_rows.lock_current_policy(connection)
        thread = threading.Thread(target=queued)
        thread.start()
        deadline = time.monotonic() + QUEUE_DEADLINE_SECONDS
        while waiting_for_locks(writer, APPLICATION) < 1:
            assert time.monotonic() < deadline, "the second transaction never queued"
            time.sleep(0.02)
        revoked = replace(current.settings, enabled=False)
        revision = current.revision + 1
        policy_rows.insert_policy_revision(
            connection,
            PolicyRevision(
                revision, revoked, "test", current.updated_at, policy_digest(revision, revoked)
            ),
        )
    thread.join(timeout=QUEUE_DEADLINE_SECONDS)
    assert [(p.revision, p.settings.enabled) for p in judged] == [(revision, False)]
