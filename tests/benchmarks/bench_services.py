"""Benchmarks of the interactive paths, through the real in-process services on SQLite and
PostgreSQL: one journal append, one candidate read, one admission. Run with ``make bench``."""

from __future__ import annotations

import itertools
import json
from typing import Any

from forge.continuity.v1 import common_pb2, ledger_pb2
from services.demo.seed import load_fixture, seed_held_run
from tests.admission.conftest import Stack, stack, submission  # noqa: F401 - the stack fixture
from tests.ledger.conftest import run_request

FIXTURE = load_fixture("v1_basic")


def test_journal_append(benchmark: Any, stack: Stack) -> None:  # noqa: F811
    writer = stack.ledger_stub()
    writer.CreateRun(run_request("bench-append"))
    head = [""]
    counter = itertools.count()

    def append() -> None:
        entry = writer.AppendJournalEntry(
            ledger_pb2.AppendJournalEntryRequest(
                run_id="bench-append",
                expected_head_hash=head[0],
                kind=common_pb2.JOURNAL_ENTRY_KIND_STARTUP_RECOVERY_ANNOTATION,
                payload_json=json.dumps({"annotation": f"n{next(counter)}"}),
            )
        ).entry
        head[0] = entry.hash

    benchmark(append)


def test_candidate_read(benchmark: Any, stack: Stack) -> None:  # noqa: F811
    seed_held_run(stack.ledger_stub(), FIXTURE, "bench-candidate")
    stack.set_policy()
    candidate = benchmark(stack.candidate_of, "bench-candidate")
    assert candidate.eligible


def test_admission(benchmark: Any, stack: Stack) -> None:  # noqa: F811
    stack.set_policy(pending_ticket_limit=10_000)
    runs = itertools.count()
    admissions = stack.admissions()

    def prepare() -> tuple[tuple[Any], dict[str, Any]]:
        run_id = f"bench-admit-{next(runs)}"
        seed_held_run(stack.ledger_stub(), FIXTURE, run_id)
        return (submission(stack.candidate_of(run_id)),), {}

    response = benchmark.pedantic(
        admissions.RequestInvalidReadContinuity, setup=prepare, rounds=8, iterations=1
    )
    assert response.created
