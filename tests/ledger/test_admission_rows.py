"""On PostgreSQL an admission writes its rows in one statement (repository/admissions.py). The
rows are exactly those its statements one by one write (the path SQLite takes): the same
admission, in two fresh schemas on the same clock, leaves every table equal, column for column,
whether the derived checkpoint's bytes were sent and new or stored already."""

from __future__ import annotations

import pytest

from forge.continuity.v1 import ledger_pb2
from services.demo.seed import seed_held_run
from services.ledger.repository import admissions
from tests.ledger.admission_support import (
    FIXTURE,
    commit,
    commit_request,
    enable_policy,
    reconstructed,
)
from tests.ledger.conftest import counted
from tests.ledger.one_statement_support import Rows, every_row, served_ledger


def _admitted(*, one_statement: bool, bytes_sent: bool, monkeypatch: pytest.MonkeyPatch) -> Rows:
    with served_ledger(admissions, one_statement=one_statement, monkeypatch=monkeypatch) as (
        clients,
        engine,
    ):
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
        assert any(s.startswith("WITH pending_slot") for s in statements) == one_statement
        return every_row(engine)


@pytest.mark.parametrize("bytes_sent", [True, False], ids=["bytes-sent", "bytes-stored"])
def test_one_statement_writes_the_rows_the_statements_one_by_one_write(
    bytes_sent: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = _admitted(one_statement=True, bytes_sent=bytes_sent, monkeypatch=monkeypatch)
    by_one = _admitted(one_statement=False, bytes_sent=bytes_sent, monkeypatch=monkeypatch)
    assert len(one["admission_tickets"]) == len(one["execution_requests"]) == 1
    assert one == by_one
