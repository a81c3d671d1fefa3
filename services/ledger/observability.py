"""The ledger's metrics that are read, not counted: computed when Prometheus scrapes
(shared.runtime.metrics.export_at_scrape), so nothing is queried between scrapes.

Per scrape: the connection pool's counts (no query), the transaction retries by cause, the
journal followers in use, and one read-only transaction for the queued / claimed execution
requests, the pending-ticket cap of the current policy and the schema revision.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy import Engine

from services.ledger.database import (
    RETRIED_SQLSTATES,
    current_revision,
    read_transaction,
    required_revision,
)
from services.ledger.domain.execution import PENDING_STATES, RequestState
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository import policy as policy_rows
from services.ledger.service import Ledger
from services.ledger.transactions.base import TRANSACTION_RETRIES, UNIQUE_CONFLICT
from shared.runtime.metrics import (
    CAP_REFUSALS,
    counter_family,
    export_at_scrape,
    gauge_family,
)

#: The states the queue gauges report (pending = queued + claimed, what the cap counts).
REPORTED_STATES = (RequestState.QUEUED, RequestState.CLAIMED)
CAP_REASONS = ("PENDING_TICKET_LIMIT", "PER_RUN_TICKET_LIMIT")


def export_ledger_metrics(engine: Engine, ledger: Ledger) -> None:
    """Report ``engine``'s pool and database and ``ledger``'s followers at every scrape."""
    for reason in CAP_REASONS:
        CAP_REFUSALS.labels(reason)  # exported as 0 until the first refusal
    export_at_scrape("ledger", lambda: _families(engine, ledger))
    # Apart, so a database that does not answer leaves the other families in the scrape.
    export_at_scrape("ledger_database", lambda: _database(engine))


def _families(engine: Engine, ledger: Ledger) -> Iterator[Metric]:
    yield from _pool(engine)
    retries = dict.fromkeys((UNIQUE_CONFLICT, *sorted(RETRIED_SQLSTATES)), 0)
    retries.update(TRANSACTION_RETRIES.snapshot())
    yield counter_family(
        "forge_ledger_transaction_retries",
        "Write transactions run again after losing a race, by cause (unique_conflict, or the "
        "SQLSTATE: 40001 serialization failure, 40P01 deadlock); ADR 0016",
        "cause",
        retries,
    )
    followers = ledger.journal_followers
    yield gauge_family(
        "forge_ledger_journal_followers_in_use",
        "StreamJournal followers open now",
        followers.in_use,
    )
    yield gauge_family(
        "forge_ledger_journal_followers_limit",
        "StreamJournal followers allowed at once (FORGE_MAX_JOURNAL_FOLLOWERS)",
        followers.limit,
    )
    yield gauge_family(
        "forge_ledger_journal_streams_in_use",
        "StreamJournal streams that do not follow and streamed snapshots open now",
        followers.streams.in_use,
    )
    yield gauge_family(
        "forge_ledger_journal_streams_limit",
        "Streams that do not follow and streamed snapshots allowed at once "
        "(FORGE_MAX_JOURNAL_STREAMS)",
        followers.streams.limit,
    )


def _pool(engine: Engine) -> Iterator[Metric]:
    pool = engine.pool
    checked_out = getattr(pool, "checkedout", None)
    if checked_out is not None:
        yield gauge_family(
            "forge_ledger_db_pool_in_use",
            "Database connections checked out of the pool now",
            float(checked_out()),
        )
    size, overflow = getattr(pool, "size", None), getattr(pool, "_max_overflow", None)
    if size is not None and isinstance(overflow, int):
        yield gauge_family(
            "forge_ledger_db_pool_capacity",
            "Connections the pool may hold at once (FORGE_DB_POOL_SIZE + FORGE_DB_MAX_OVERFLOW)",
            float(size() + max(overflow, 0)),
        )
    yield gauge_family(
        "forge_ledger_db_pool_waiting",
        "Callers waiting for a database connection now (steadily above 0: pool exhausted)",
        float(getattr(pool, "waiting", 0)),
    )


def _database(engine: Engine) -> Iterator[Metric]:
    with read_transaction(engine) as connection:
        counts = request_rows.count_by_state(connection, REPORTED_STATES)
        policy = policy_rows.current_policy(connection)
    yield gauge_family(
        "forge_ledger_execution_requests",
        "Execution requests by state (queued: admitted, not claimed; claimed: a worker holds it)",
        state={state.value: count for state, count in counts.items()},
    )
    yield gauge_family(
        "forge_ledger_pending_tickets",
        "Execution requests counted against the pending-ticket cap (queued + claimed)",
        float(sum(counts[state] for state in PENDING_STATES if state in counts)),
    )
    yield gauge_family(
        "forge_ledger_pending_ticket_limit",
        "The current policy's pending-ticket cap",
        float(policy.settings.pending_ticket_limit),
    )
    current, required = current_revision(engine) or "", required_revision()
    info = GaugeMetricFamily(
        "forge_ledger_schema_info",
        "1, labelled with the database schema revision and the revision this release requires",
        labels=["revision", "required"],
    )
    info.add_metric([current, required], 1)
    yield info
    if current.isdigit():
        yield gauge_family(
            "forge_ledger_schema_revision", "The database schema revision", float(current)
        )
