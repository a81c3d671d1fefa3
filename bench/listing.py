"""Figure 6 (ADR 0022): listing runs and execution requests stays fast with many runs. 10,000
runs are seeded in bulk through the ledger's repository (a third held, a fifth admitted with a
queued execution request), then the first page of ListRuns, a filtered page (``state = held``,
and ``held = true`` with an update-time bound), the 20th page of the unfiltered listing, and a
page of queued execution requests across runs are timed through the running ledger's gRPC API.

The tables are analyzed after the bulk load, as autovacuum would do on a live database. A
figure, not a test: it is printed and recorded in bench/results, never asserted."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import create_engine, text

from bench.figures import Clients
from forge.continuity.v1 import execution_pb2, ledger_pb2
from services.ledger.domain.execution import ExecutionRequestRecord, RequestState
from services.ledger.domain.runs import Run, RunSpec
from services.ledger.repository.execution_requests import insert_execution_request
from services.ledger.repository.runs import insert_run, note_entry
from shared.continuity.timeutil import to_text, utc_now

RUNS = 10_000
HELD_EVERY = 3
ADMITTED_EVERY = 5
REPEATS = 30
READER_TOKEN = "dev-operator-token"  # noqa: S105 - local-only development credential
SEED_ACTOR = "bench-listing-seed"


def seed_runs(database_url: str, count: int) -> str:
    """``count`` runs, one microsecond apart; returns the update time of the middle run."""
    engine = create_engine(database_url)
    start = utc_now() - timedelta(days=1)
    middle = ""
    try:
        with engine.begin() as connection:
            for index in range(count):
                moment = to_text(start + timedelta(microseconds=index * 1000))
                if index == count // 2:
                    middle = moment
                spec = RunSpec(
                    run_id=f"bench-list-{index:06d}",
                    task_id="task-bench",
                    attempt_id=f"attempt-{index}",
                    source_revision="git:bench",
                    configuration_digest="sha256:" + "c" * 64,
                    provider_timeout_seconds=900,
                    active_deadline=None,
                    command_limit=22,
                    time_budget_protocol="provider-timeout-v1",
                    source_profile="profile-bench",
                )
                insert_run(connection, Run(spec, SEED_ACTOR, moment, spec.digest))
                if index % HELD_EVERY == 0:
                    note_entry(connection, spec.run_id, moment, held=True)
                elif index % ADMITTED_EVERY == 0:
                    insert_execution_request(
                        connection,
                        ExecutionRequestRecord(
                            execution_request_id=f"exr_bench_{index:06d}",
                            run_id=spec.run_id,
                            attempt_id=spec.attempt_id,
                            request_id=f"req-{index}",
                            checkpoint_digest="sha256:" + "d" * 64,
                            policy_revision=1,
                            state=RequestState.QUEUED,
                            lease_generation=0,
                            lease_seconds=900,
                            lease_expires_at=None,
                            owner="",
                            created_at=moment,
                            updated_at=moment,
                        ),
                    )
        # As autovacuum would after a bulk load: without statistics the planner guesses a
        # handful of held runs and sorts them all instead of reading the index backwards.
        with engine.begin() as connection:
            connection.execute(text("ANALYZE runs"))
            connection.execute(text("ANALYZE execution_requests"))
    finally:
        engine.dispose()
    return middle


def _timed(call: Callable[[], Any], repeats: int) -> dict[str, float]:
    call()  # the first call warms the channel and the statement cache
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        samples.append((time.perf_counter() - began) * 1000)
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 2),
        "p95_ms": round(samples[int(len(samples) * 0.95) - 1], 2),
        "max_ms": round(samples[-1], 2),
    }


def listing_latency(clients: Clients, database_url: str, count: int = RUNS) -> dict[str, Any]:
    seeding = time.perf_counter()
    middle = seed_runs(database_url, count)
    seeded_seconds = round(time.perf_counter() - seeding, 1)
    ledger = clients.ledger(READER_TOKEN)
    execution = clients.execution(READER_TOKEN)

    def runs(filter_text: str = "", token: str = "") -> ledger_pb2.ListRunsResponse:
        request = ledger_pb2.ListRunsRequest(page_size=50, filter=filter_text, page_token=token)
        return ledger.ListRuns(request)

    token = ""
    for _ in range(19):
        token = runs(token=token).next_page_token
    held = runs("state = held")
    assert len(held.runs) == 50  # the figure is of full pages
    return {
        "runs": count,
        "page_size": 50,
        "seed_seconds": seeded_seconds,
        "first_page": _timed(runs, REPEATS),
        "held_page": _timed(lambda: runs("state = held"), REPEATS),
        "held_since_page": _timed(
            lambda: runs(f'held = true AND updated_at > "{middle}"'), REPEATS
        ),
        "page_20": _timed(lambda: runs(token=token), REPEATS),
        "queued_requests_page": _timed(
            lambda: execution.ListAllExecutionRequests(
                execution_pb2.ListAllExecutionRequestsRequest(page_size=50, filter="state = queued")
            ),
            REPEATS,
        ),
    }
