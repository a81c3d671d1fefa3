"""On PostgreSQL an admission writes its rows in one statement (repository/admissions.py). The
rows are exactly those its statements one by one write (the path SQLite takes): the same
admission, in two fresh schemas on the same clock, leaves every table equal, column for column,
whether the derived checkpoint's bytes were sent and new or stored already."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, select

from forge.continuity.v1 import ledger_pb2
from services.demo.seed import seed_held_run
from services.ledger.database import make_engine
from services.ledger.repository import admissions
from services.ledger.repository import execution_requests as request_rows
from services.ledger.schema import metadata, queue_depth
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from tests.conftest import postgres_schema
from tests.ledger.admission_support import (
    FIXTURE,
    commit,
    commit_request,
    enable_policy,
    reconstructed,
)
from tests.ledger.conftest import Clock, LedgerClients, counted
from tests.support import serve, token_roles

Rows = dict[str, list[tuple[Any, ...]]]


def _every_row(engine: Engine) -> Rows:
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


def _admitted(*, one_statement: bool, bytes_sent: bool, monkeypatch: pytest.MonkeyPatch) -> Rows:
    dialects = admissions.ONE_STATEMENT_DIALECTS if one_statement else frozenset()
    with monkeypatch.context() as patched, postgres_schema() as url:
        patched.setattr(admissions, "ONE_STATEMENT_DIALECTS", dialects)
        engine = make_engine(url)
        try:
            ledger = Ledger(engine, Clock(), authority=token_roles)
            with serve("ledger", bindings(ledger)) as served:
                clients = LedgerClients(served)
                seeded = seed_held_run(clients.ledger(), FIXTURE, "run-1")  # type: ignore[arg-type]
                derived = reconstructed(1).derived_checkpoint
                if not bytes_sent:
                    stored = ledger_pb2.PutBlobRequest(content=derived)
                    clients.ledger("service-token").PutBlob(stored)
                enable_policy(clients)
                extra = {"derived_checkpoint": derived} if bytes_sent else {}
                request = commit_request(clients, seeded, **extra)
                with counted(engine) as statements:
                    assert commit(clients, request).created
            # the path under test was the one taken
            assert any(s.startswith("WITH noted") for s in statements) == one_statement
            return _every_row(engine)
        finally:
            engine.dispose()


@pytest.mark.parametrize("bytes_sent", [True, False], ids=["bytes-sent", "bytes-stored"])
def test_one_statement_writes_the_rows_the_statements_one_by_one_write(
    bytes_sent: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = _admitted(one_statement=True, bytes_sent=bytes_sent, monkeypatch=monkeypatch)
    by_one = _admitted(one_statement=False, bytes_sent=bytes_sent, monkeypatch=monkeypatch)
    assert len(one["admission_tickets"]) == len(one["execution_requests"]) == 1
    assert one == by_one
