"""Listing runs and execution requests a page at a time (ADR 0022): the filter and the page
token are checked before any statement runs, and one read-only statement reads the page."""

from __future__ import annotations

from dataclasses import dataclass

from services.ledger.domain.execution import ExecutionRequestRecord, as_read
from services.ledger.domain.listing import (
    Collection,
    Cursor,
    decode_page_token,
    encode_page_token,
    page_size,
    parse_filter,
)
from services.ledger.repository import listing as listing_rows
from services.ledger.repository.listing import RunRow
from services.ledger.transactions.base import LedgerContext
from shared.continuity.timeutil import to_text


@dataclass(frozen=True)
class RunPage:
    runs: list[RunRow]
    next_page_token: str


@dataclass(frozen=True)
class ExecutionRequestPage:
    execution_requests: list[ExecutionRequestRecord]
    next_page_token: str


def list_runs(context: LedgerContext, requested_size: int, token: str, text: str) -> RunPage:
    listing = parse_filter(Collection.RUNS, text)
    cursor = decode_page_token(Collection.RUNS, listing, token)
    size = page_size(requested_size)
    with context.read() as connection:
        # one row more than the page says whether another page follows
        rows = listing_rows.list_runs(connection, listing, cursor, size + 1)
    if len(rows) <= size:
        return RunPage(rows, "")
    last = rows[size - 1]
    after = Cursor(last.updated_at, last.run.spec.run_id)
    return RunPage(rows[:size], encode_page_token(Collection.RUNS, listing, after))


def list_execution_requests(
    context: LedgerContext, requested_size: int, token: str, text: str
) -> ExecutionRequestPage:
    listing = parse_filter(Collection.EXECUTION_REQUESTS, text)
    cursor = decode_page_token(Collection.EXECUTION_REQUESTS, listing, token)
    size = page_size(requested_size)
    now = context.clock()
    with context.read() as connection:
        stored = listing_rows.list_execution_requests_page(
            connection, listing, cursor, size + 1, to_text(now)
        )
    rows = [as_read(record, now) for record in stored]
    if len(rows) <= size:
        return ExecutionRequestPage(rows, "")
    last = rows[size - 1]
    after = Cursor(last.updated_at, last.execution_request_id)
    token_out = encode_page_token(Collection.EXECUTION_REQUESTS, listing, after)
    return ExecutionRequestPage(rows[:size], token_out)
