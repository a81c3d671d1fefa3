"""The snapshot header (read by every candidate and so by every admission) is prepared once per
connection and then runs on PostgreSQL's generic plan: a statement whose plan the server cannot
cost without its parameter values is planned again on every execution (the header's bound
``LIMIT`` was, 0.2 ms of server CPU a read; docs/performance-history.md, tenth pass)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text

from services.ledger.repository.snapshot_header import get_snapshot_header

# psycopg prepares a statement on its fifth execution; PostgreSQL then tries five custom plans
# before it settles on the generic one when that costs no more.
EXECUTIONS = 15


def test_the_snapshot_header_settles_on_one_plan(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("prepared statements and their plans are PostgreSQL's")
    with engine.connect() as connection:
        for _ in range(EXECUTIONS):
            assert get_snapshot_header(connection, "no-such-run") is None
        plans = connection.execute(
            text(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE '%current_policy%'"
            )
        ).all()
    assert len(plans) == 1
    generic, custom = plans[0]
    assert custom <= 5 and generic > 0
