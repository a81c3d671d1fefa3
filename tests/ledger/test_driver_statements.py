"""The statements every admission and every worker write runs go to the driver's cursor on
PostgreSQL (repository/driver.py) and keep what SQLAlchemy's execution gave the ledger: the same
rows, the cursor events, a unique conflict raised as the IntegrityError the transaction retry
looks for, a timeout as UNAVAILABLE DATABASE_TIMEOUT, and the transaction begun with its begin
events. On SQLite (positional parameters, type processing) they run through SQLAlchemy as
before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, String, bindparam, event, insert, select, text
from sqlalchemy.exc import IntegrityError

from services.demo.seed import seed_held_run
from services.ledger.database import make_engine
from services.ledger.domain.journal import EntryKind
from services.ledger.repository import (
    admission_journal,
    admissions,
    execution_requests,
    journal,
    journal_reads,
    policy,
    runs,
    snapshot_header,
)
from services.ledger.repository import tickets as ticket_rows
from services.ledger.repository.driver import DriverStatement, execute, fetch, positional
from services.ledger.schema import blobs
from shared.runtime.config import DatabaseSettings
from shared.runtime.errors import Unavailable
from tests.ledger.admission_support import FIXTURE
from tests.ledger.conftest import LedgerClients, counted

_JUDGED = (
    EntryKind.RUN_STARTED,
    EntryKind.CHECKPOINT_STORED,
    EntryKind.MODEL_REQUEST_SENT,
    EntryKind.RESPONSE_CONSUMED,
)


def _hot_statements(dialect: str) -> dict[str, DriverStatement]:
    gated = dialect == "postgresql"
    return {
        # every admission
        "snapshot header": snapshot_header._HEADER,
        "admission's early read": admission_journal._statement(len(_JUDGED), dialect),
        "policy lock": policy._LOCKING[False, gated],
        "admission's reads": ticket_rows._ADMISSION_READS,
        **{
            f"admission's rows ({blob=}, {signing=})": admissions._statement(
                2, with_blob=blob, signing=signing
            )
            for blob in (False, True)
            for signing in (False, True)
        },
        # every fenced worker write and native append
        "shared policy lock": policy._LOCKING[True, gated],
        "request locked": execution_requests._LOCK_WITH_NEWEST_POLICY,
        "request updated": execution_requests._UPDATE,
        "run": runs._GET,
        "run noted, head read": runs._TOUCH_RETURNING,
        "run held, head read": runs._HOLD_RETURNING,
        **{f"run noted ({n})": alone for n, alone in enumerate(runs._RUN_ALONE.values())},
        "entry inserted": journal._INSERT_ONE,
        "entry inserted with its signed head": journal._INSERT_ONE_SIGNED,
        **{
            f"entry inserted after a known head {key}": one
            for key, one in journal._AFTER_KNOWN_HEAD.items()
        },
        "head": journal_reads._HEAD_ALONE,
        "kinds and head": journal_reads._of_kinds(
            ("ownership_claim", "request_event"), with_head=True
        ),
        "kinds, head and kinds beside": journal_reads._of_kinds(
            ("ownership_claim", "request_event"), with_head=True, from_start=("command_executed",)
        ),
        "kinds": journal_reads._of_kinds(("command_executed",), with_head=False),
        **{
            f"run noted, entry inserted ({n})": one
            for n, one in enumerate(journal._NOTED_INSERT.values())
        },
    }


def test_each_hot_statement_runs_on_the_driver_on_postgresql(engine: Engine) -> None:
    """A change that gives one of them an IN list or a processed type would silently send it
    back through SQLAlchemy's execution: this names it."""
    dialect = engine.dialect
    on_driver = {
        name: statement.compiled(dialect) is not None
        for name, statement in _hot_statements(dialect.name).items()
        if dialect.name == "postgresql" or not name.startswith("admission's rows (blob=True")
    }
    expected = dialect.name == "postgresql"
    assert on_driver == dict.fromkeys(on_driver, expected)


def test_the_rows_are_sqlalchemys(clients: LedgerClients, engine: Engine) -> None:
    seeded = seed_held_run(clients.ledger(), FIXTURE, "run-driver")  # type: ignore[arg-type]
    header = snapshot_header._HEADER
    early = admission_journal._statement(len(_JUDGED), engine.dialect.name)
    kinds = journal_reads._of_kinds(("run_started", "response_consumed"), with_head=True)
    beside = journal_reads._of_kinds(
        ("response_consumed",), with_head=True, from_start=("run_started", "checkpoint_stored")
    )
    parameters: dict[str, object] = {
        "run_id": seeded.run_id,
        "checkpoint_kind": EntryKind.MODEL_REQUEST_SENT.value,
        "from_sequence": 1,
    }
    parameters.update({f"kind_{n}": kind.value for n, kind in enumerate(_JUDGED)})
    with engine.begin() as connection:
        for statement in (header, early, kinds, beside, runs._GET):
            through_sqlalchemy = [
                dict(row) for row in connection.execute(statement.statement, parameters).mappings()
            ]
            assert through_sqlalchemy  # the run has rows to compare
            assert fetch(connection, statement, parameters) == through_sqlalchemy


def test_the_cursor_events_see_each_statement(engine: Engine) -> None:
    with engine.begin() as connection, counted(engine) as statements:
        # (SQLite's BEGIN IMMEDIATE ran when the transaction began, before counting)
        assert fetch(connection, snapshot_header._HEADER, {"run_id": "no-such-run"}) == []
    assert len(statements) == 1 and "current_policy" in statements[0]


_PUT = DriverStatement(insert(blobs))


def _blob(digest: str) -> dict[str, object]:
    return {
        "digest": digest,
        "content": b"bytes",
        "media_type": "application/octet-stream",
        "size": 5,
        "created_at": "2026-12-05T00:00:00.000000Z",
    }


def test_a_unique_conflict_is_sqlalchemys_integrity_error_and_writes_nothing(
    engine: Engine,
) -> None:
    with engine.begin() as connection:
        execute(connection, _PUT, _blob("sha256:" + "1" * 64))
    with pytest.raises(IntegrityError), engine.begin() as connection:
        execute(connection, _PUT, _blob("sha256:" + "2" * 64))
        execute(connection, _PUT, _blob("sha256:" + "1" * 64))
    with engine.connect() as connection:
        stored = connection.execute(select(blobs.c.digest)).scalars().all()
    assert stored == ["sha256:" + "1" * 64]


@pytest.fixture
def timing_out(database_url: str) -> Iterator[Engine]:
    if not database_url.startswith("postgresql"):
        pytest.skip("the statement timeout is PostgreSQL's")
    engine = make_engine(database_url, DatabaseSettings(statement_timeout_ms=50))
    yield engine
    engine.dispose()


def test_a_timeout_is_unavailable_database_timeout(timing_out: Engine) -> None:
    slow = DriverStatement(select(text("pg_sleep(1)")))
    with pytest.raises(Unavailable) as refused, timing_out.begin() as connection:
        fetch(connection, slow)
    assert refused.value.reason == "DATABASE_TIMEOUT"


def test_a_connection_outside_a_transaction_begins_one_first(engine: Engine) -> None:
    began: list[object] = []
    event.listen(engine, "begin", began.append)
    with engine.connect() as connection:
        fetch(connection, snapshot_header._HEADER, {"run_id": "no-such-run"})
        assert connection.in_transaction()
    assert len(began) == 1


# The placeholders: psycopg's ordinary cursor parses %(name)s on every execution and remembers the
# parse only for statements of at most 4,096 characters and 50 parameters; the driver's
# statements are rewritten once to PostgreSQL's own $n and run on a raw cursor (ADR 0063).


def test_named_placeholders_become_numbered_ones_in_order_of_first_use() -> None:
    sql = "SELECT %(b)s, %(a)s, %(b)s WHERE x LIKE 'a%%'"
    assert positional(sql) == ("SELECT $1, $2, $1 WHERE x LIKE 'a%'", ("b", "a"))


@pytest.mark.parametrize(
    "sql", ["SELECT $1", "SELECT %s", "SELECT %(a)d", "SELECT 5 % 2", "SELECT %(a-b)s"]
)
def test_text_it_cannot_read_exactly_stays_with_sqlalchemy(sql: str) -> None:
    assert positional(sql) is None


_NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
_LITERALS = st.text(alphabet="abc ,()'=%", max_size=6).map(lambda text: text.replace("%", "%%"))


@given(st.lists(st.tuples(_LITERALS, _NAMES), max_size=12), _LITERALS)
def test_each_placeholder_stands_for_its_name(parts: list[tuple[str, str]], tail: str) -> None:
    """Substituting each name's value for its $n gives what substituting it for %(name)s gives,
    with every %% written as %."""
    sql = "".join(f"{literal}%({name})s" for literal, name in parts) + tail
    numbered = positional(sql)
    assert numbered is not None
    rewritten, order = numbered
    assert sorted(order) == sorted({name for _, name in parts})
    values = {name: f"<{name}>" for _, name in parts}
    for index in range(len(order), 0, -1):  # $12 before $1
        rewritten = rewritten.replace(f"${index}", values[order[index - 1]])
    assert rewritten == sql % values


def test_the_hot_statements_reach_postgresql_numbered(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite's statements run through SQLAlchemy")
    for name, statement in _hot_statements("postgresql").items():
        compiled = statement.compiled(engine.dialect)
        assert compiled is not None, name
        assert "%(" not in compiled.sql and ("$1" in compiled.sql) == bool(compiled.order), name


def test_a_statement_beyond_psycopgs_parse_cache_binds_every_value(engine: Engine) -> None:
    """61 parameters in over 4,096 characters, as the admission's writing statement has: each
    value comes back where it was bound, a name bound twice both times."""
    names = ["parameter_" * 5 + str(n) for n in range(61)]
    columns = [bindparam(name, type_=String).label(f"c{n}") for n, name in enumerate(names)]
    twice = bindparam(names[0], type_=String).label("again")
    query = select(*columns, twice)
    statement = DriverStatement(query)
    if engine.dialect.name == "postgresql":
        compiled = statement.compiled(engine.dialect)
        named = str(query.compile(dialect=engine.dialect))
        assert compiled is not None and len(compiled.order) == 61 and len(named) > 4096
    values = {name: f"value {n} %s %% $1" for n, name in enumerate(names)}
    with engine.begin() as connection, counted(engine) as statements:
        rows = fetch(connection, statement, values)
    assert rows == [
        {**{f"c{n}": values[name] for n, name in enumerate(names)}, "again": values[names[0]]}
    ]
    assert len(statements) == 1
