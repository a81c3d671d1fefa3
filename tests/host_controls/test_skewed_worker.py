"""A reference worker process whose host's wall clock is wrong (libfaketime) against a ledger on
PostgreSQL measuring leases on the database's clock (ADR 0057): the worker bounds its effects by
what the claim said was left of the lease, counted on its monotonic clock, so

- 20 minutes behind, with a 45 s lease and a 75 s command, it kills the command before the
  lease ends, starts nothing after, and fails the request ``lease_exhausted`` inside the lease
  (on its own wall clock the lease had 20 minutes more: the old rule let the command run to its
  end, 30 s past the lease, and the ledger then refused its outcome ``LEASE_EXPIRED``);
- an hour ahead, with a 15 minutes' lease, it completes the continuation (the old rule found the
  lease over at the first effect and failed it ``lease_exhausted``).

The worker's own ``consumed_at`` stamps show the skew applied: each sits the skew off the
ledger's ``recorded_at`` of its entry."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2
from services.demo.scripted_provider import ScriptedProvider, reference_script
from services.ledger.database_clock import DatabaseClock
from services.ledger.local_process_verifier import LocalProcessVerifier
from services.ledger.service import Ledger
from services.worker import config as settings
from services.worker.run import EXIT_COMPLETED, EXIT_FAILED
from shared.continuity.timeutil import from_text, from_timestamp
from tests.admission.conftest import Stack
from tests.host_controls.conftest import Workers
from tests.host_controls.test_stopping import slow_commands
from tests.recovery.conftest import Authority
from tests.reliability.faketime import FAKETIME_AVAILABLE, faketime_environment
from tests.worker.conftest import COMMANDS, Continuation, admit, kind_name

#: The lease, from the admission, and the first command's length: the command outlives it.
LEASE_SECONDS = 45
COMMAND_SECONDS = 75
#: How far a worker stamp may sit from the skew off the ledger's (a loaded host).
STAMP_TOLERANCE = 5.0


@pytest.fixture
def ledger(engine: Engine, authority: Authority) -> Iterator[Ledger]:
    """The ledger as production runs it on PostgreSQL: on the database's clock."""
    clock = DatabaseClock(engine).start()
    try:
        yield Ledger(engine, clock, authority=authority, verifier=LocalProcessVerifier())
    finally:
        clock.stop()


def skewed(offset: str) -> dict[str, str]:
    if not FAKETIME_AVAILABLE:
        if os.environ.get("CI") == "true":
            pytest.fail("libfaketime is not installed: make faketime")
        pytest.skip("libfaketime is not installed (make faketime)")
    return faketime_environment(offset)


def worker_entries(continuation: Continuation) -> list[common_pb2.JournalEntry]:
    """Every entry from the worker's claim on."""
    entries = continuation.journal()
    start = max(
        i for i, e in enumerate(entries) if e.kind == common_pb2.JOURNAL_ENTRY_KIND_WORKER_CLAIMED
    )
    return entries[start:]


def assert_skew_applied(entries: list[common_pb2.JournalEntry], seconds: float) -> None:
    """The worker's wall clock (its ``consumed_at``) sits ``seconds`` off the ledger's."""
    consumed = [e for e in entries if kind_name(e) == "response_consumed"]
    assert consumed, "the worker consumed no answer"
    for entry in consumed:
        stamp = from_text(json.loads(entry.payload_json)["consumed_at"])
        offset = (stamp - from_timestamp(entry.recorded_at)).total_seconds()
        assert abs(offset - seconds) < STAMP_TOLERANCE, (offset, seconds)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_worker_behind_the_ledgers_clock_starts_no_effect_after_its_lease(
    stack: Stack, tmp_path: Path
) -> None:
    commands = slow_commands(COMMAND_SECONDS)
    continuation = admit(stack, tmp_path, granted=commands, window_seconds=LEASE_SECONDS)
    expires = from_timestamp(continuation.ticket.execution_request.lease.expires_at)
    workers = Workers(continuation)
    try:
        with ScriptedProvider(reference_script(commands)) as model:
            worker = workers.start(
                model,
                env={
                    **skewed("-20m"),
                    settings.GRANTED_COMMANDS: json.dumps([list(c) for c in commands]),
                },
            )
            finished = worker.finish(timeout=COMMAND_SECONDS + 120)
    finally:
        workers.stop_all()
    entries = worker_entries(continuation)
    assert_skew_applied(entries, -1200)
    # the command started inside the lease and was killed before its end: it never finished
    assert (continuation.source / "started").exists()
    assert not (continuation.source / "done").exists(), "the command ran past the lease"
    assert not (continuation.source / "ran-2").exists()
    assert finished.returncode == EXIT_FAILED, finished.stdout + finished.stderr
    assert "lease_exhausted" in finished.message
    payloads = [(kind_name(e), json.loads(e.payload_json), e) for e in entries]
    killed = [
        p for k, p, _ in payloads if k == "tool_outcome" and p["call_id"] == "call_scripted_4"
    ]
    assert killed == [{**killed[0], "status": "failed", "error": "TimeoutExpired"}]
    # no effect started after it, and every record, the failure last, is inside the lease
    assert [k for k, _, _ in payloads].count("model_request_sent") == 4
    [failed] = [p for k, p, _ in payloads if k == "request_failed"]
    assert failed["reason"] == "lease_exhausted"
    for _, _, entry in payloads:
        assert from_timestamp(entry.recorded_at) < expires, kind_name(entry)
    assert continuation.request().state == common_pb2.EXECUTION_REQUEST_STATE_FAILED


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_worker_ahead_of_the_ledgers_clock_does_not_stop_early(
    stack: Stack, tmp_path: Path
) -> None:
    # A worker an hour ahead: on its own wall clock the lease (15 minutes) is over at once.
    continuation = admit(stack, tmp_path)
    assert continuation.ticket.execution_request.lease.seconds < 3600
    workers = Workers(continuation)
    try:
        with ScriptedProvider(reference_script(COMMANDS)) as model:
            finished = workers.start(model, env=skewed("+1h")).finish()
    finally:
        workers.stop_all()
    assert finished.returncode == EXIT_COMPLETED, finished.stdout + finished.stderr
    entries = worker_entries(continuation)
    assert_skew_applied(entries, 3600)
    assert (continuation.source / "ran-1").exists() and (continuation.source / "ran-2").exists()
    assert continuation.request().state == common_pb2.EXECUTION_REQUEST_STATE_COMPLETED
