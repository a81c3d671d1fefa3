"""What the tests that compare a one-statement write with its statements one by one share: a
ledger served on a fresh PostgreSQL schema with the one-statement path on or off, and every row
it left."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import pytest
from sqlalchemy import Engine, select

from services.ledger.database import make_engine
from services.ledger.repository import execution_requests as request_rows
from services.ledger.schema import metadata, queue_depth
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from tests.conftest import postgres_schema
from tests.ledger.conftest import Clock, LedgerClients
from tests.support import serve, token_roles

Rows = dict[str, list[tuple[Any, ...]]]


@contextmanager
def served_ledger(
    module: ModuleType, *, one_statement: bool, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[LedgerClients, Engine]]:
    """A ledger on a fresh schema, on a fixed clock, with ``module.ONE_STATEMENT_DIALECTS`` as
    it is (``one_statement``) or empty (the statements one by one, SQLite's path)."""
    dialects = module.ONE_STATEMENT_DIALECTS if one_statement else frozenset()
    with monkeypatch.context() as patched, postgres_schema() as url:
        patched.setattr(module, "ONE_STATEMENT_DIALECTS", dialects)
        engine = make_engine(url)
        try:
            ledger = Ledger(engine, Clock(), authority=token_roles)
            with serve("ledger", bindings(ledger)) as served:
                yield LedgerClients(served), engine
        finally:
            engine.dispose()


def every_row(engine: Engine) -> Rows:
    """Every table's rows, ordered by all their columns."""
    with engine.connect() as connection:
        rows = {
            table.name: [
                tuple(row) for row in connection.execute(select(table).order_by(*table.columns))
            ]
            for table in metadata.sorted_tables
            if table is not queue_depth
        }
        # the pending count's rows are per server session (ADR 0031): their sum is the count
        rows["queue_depth"] = [(request_rows.pending_count(connection),)]
        return rows
