"""The database keeps the journal append-only (migration 0013, ADR 0036). On PostgreSQL the
ledger connects as its own role, which PostgreSQL refuses any UPDATE or DELETE of a journal row,
a signature, a blob, a ticket or any other record, while the ledger's every workflow still runs
under it; on SQLite triggers refuse the same. The owner (an attacker with its credentials, or
the file) still can: that is what the signed heads and the offline audit are for (ADR 0015).
Roles are the server's: migrations of many schemas at once create the role once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    Engine,
    LargeBinary,
    String,
    delete,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.exc import DBAPIError

from forge.continuity.v1 import execution_pb2
from services.ledger.database import (
    INSUFFICIENT_PRIVILEGE,
    downgrade,
    make_engine,
    sqlstate,
    upgrade,
)
from services.ledger.domain.signing import HeadSigner
from services.ledger.repository import roles
from services.ledger.schema import journal_entries, metadata, runs
from services.ledger.schema_revisions import schema_problem
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from services.ledger.table_access import APPEND_ONLY, LEDGER_ACCESS, MIGRATOR_TABLES
from shared.continuity.canonical import digest_of
from tests.conftest import postgres_schema
from tests.ledger.admission_support import S, admitted, claim_request, execution
from tests.ledger.conftest import Clock, LedgerClients, run_request
from tests.support import (
    LEDGER_ROLE,
    POSTGRES_URL,
    as_database_owner,
    owner_engine,
    row_counts,
    serve,
    token_roles,
)

RUN_ID = "run-append-only"
ROOT = Path(__file__).resolve().parents[2]


def _value(column: Any) -> object:
    """A value of ``column``'s type, for a row the guards are tried on."""
    if isinstance(column.type, LargeBinary):
        return b"x"
    if isinstance(column.type, String):
        return RUN_ID if column.name == "run_id" else "x"
    return False if column.type.python_type is bool else 1


@pytest.fixture
def records(engine: Engine) -> Engine:
    """The migrated database with one row in every append-only table, written as the owner
    (the ledger's role may not write unsigned_prefixes)."""
    with as_database_owner(engine) as connection:
        connection.execute(
            insert(runs).values({column.name: _value(column) for column in runs.columns})
        )
        for table in metadata.sorted_tables:
            if table.name in APPEND_ONLY and table.name != "policy_revisions":  # it has one
                row = {column.name: _value(column) for column in table.columns}
                connection.execute(insert(table).values(row))
    return engine


def _refusal(engine: Engine, statement: Any) -> str:
    """What the database answers ``statement`` run on the ledger's connection (it must fail)."""
    with pytest.raises(DBAPIError) as refused, engine.begin() as connection:
        connection.execute(statement)
    if engine.dialect.name == "postgresql":
        assert sqlstate(refused.value) == INSUFFICIENT_PRIVILEGE, refused.value
        return str(refused.value.orig.diag.message_primary)  # type: ignore[union-attr]
    return str(refused.value.orig)


@pytest.mark.parametrize("table_name", APPEND_ONLY)
def test_the_ledgers_connection_cannot_change_or_remove_a_record(
    records: Engine, table_name: str
) -> None:
    table = metadata.tables[table_name]
    before = row_counts(records)
    first = next(iter(table.columns))
    changed = _refusal(records, update(table).values({first.name: first}))
    removed = _refusal(records, delete(table))
    if records.dialect.name == "sqlite":
        assert changed == removed == f"{table_name} is append-only"
    else:
        # the lockable table holds UPDATE on one column for FOR UPDATE: its trigger refuses
        locking = bool(LEDGER_ACCESS[table_name].lock_column)
        assert changed == (
            f"{table_name} is append-only"
            if locking
            else f"permission denied for table {table_name}"
        )
        assert removed == f"permission denied for table {table_name}"
    assert row_counts(records) == before


def test_the_owner_can_and_the_guards_are_back_afterwards(records: Engine) -> None:
    """What the offline audit exists for: whoever holds the owner's access rewrites a row; the
    ledger's connection still cannot."""
    with as_database_owner(records) as connection:
        connection.execute(text("UPDATE journal_entries SET actor = 'mallory'"))
        connection.execute(text("DELETE FROM signed_heads"))
    with records.connect() as connection:
        actors = connection.execute(select(func.min(journal_entries.c.actor))).scalar()
    assert actors == "mallory"
    assert row_counts(records)["signed_heads"] == 0
    assert "journal_entries" in _refusal(records, text("UPDATE journal_entries SET actor = 'x'"))


def test_the_ledgers_role_holds_exactly_the_listed_privileges(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("roles are PostgreSQL's")
    with engine.connect() as connection:
        who = connection.execute(text("SELECT session_user, current_user")).one()
        assert tuple(who) == (LEDGER_ROLE, LEDGER_ROLE)
        held = {
            table: {
                privilege
                for privilege in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "TRIGGER")
                if connection.execute(
                    text("SELECT has_table_privilege(:table, :privilege)"),
                    {"table": table, "privilege": privilege},
                ).scalar_one()
            }
            for table in {**LEDGER_ACCESS, **MIGRATOR_TABLES}
        }
        expected = {
            table: {p for p in access.privileges() if "(" not in p}
            for table, access in {**LEDGER_ACCESS, **MIGRATOR_TABLES}.items()
        }
        assert held == expected
        # the one column a lock needs, and no other
        columns = {
            column.name
            for column in metadata.tables["policy_revisions"].columns
            if connection.execute(
                text("SELECT has_column_privilege('policy_revisions', :column, 'UPDATE')"),
                {"column": column.name},
            ).scalar_one()
        }
        assert columns == {"revision"}
        schema = connection.execute(text("SELECT current_schema()")).scalar_one()
        create = text("SELECT has_schema_privilege(:schema, 'CREATE')")
        assert connection.execute(create, {"schema": schema}).scalar_one() is False


def test_every_workflow_runs_under_the_ledgers_role(engine: Engine, clock: Clock) -> None:
    """A held run is seeded, admitted, claimed, charged a command and completed, with every head
    signed, on the ledger's own connection (on PostgreSQL its restricted role): every statement
    of those paths is one the role may run, the pending count's trigger included."""
    ledger = Ledger(engine, clock, authority=token_roles, signer=HeadSigner.generate())
    with serve("ledger", bindings(ledger)) as served:
        clients = LedgerClients(served)
        clients.ledger().CreateRun(run_request("run-plain"))
        _seeded, ticket = admitted(clients)
        exr = ticket.execution_request.execution_request_id
        worker = execution(clients)
        worker.ClaimExecutionRequest(claim_request(clients, exr))
        worker.RecordCommand(
            execution_pb2.RecordCommandRequest(
                execution_request_id=exr,
                lease_generation=1,
                command_id="cmd-1",
                command_digest=digest_of({"command": "ls"}),
            )
        )
        done = worker.CompleteExecutionRequest(
            execution_pb2.CompleteExecutionRequestRequest(
                execution_request_id=exr, lease_generation=1
            )
        ).execution_request
    assert done.state == S.EXECUTION_REQUEST_STATE_COMPLETED
    counts = row_counts(engine)
    assert counts["signed_heads"] > 0 and counts["admission_tickets"] == 1
    with engine.connect() as connection:
        assert connection.execute(text("SELECT sum(pending) FROM queue_depth")).scalar() == 0


# --- the migration, its role and its guards -------------------------------------------------


def test_the_migration_runs_again_and_grants_the_same(database_url: str, engine: Engine) -> None:
    """Down to 0012 the ledger's access and the guards are gone (a ledger run as the role
    waits, naming why); up again they are back, as before."""
    with owner_engine(database_url) as owner:
        downgrade(owner, "0012")
        if engine.dialect.name == "postgresql":
            problem = schema_problem(engine)
            assert problem is not None and "permission denied" in problem
        else:
            with engine.begin() as connection:  # the file's owner: no guard any more
                connection.execute(text("UPDATE policy_revisions SET updated_by = 'x'"))
        upgrade(owner)
        upgrade(owner)  # at head: nothing to do
        with owner.begin() as connection:  # granted twice: the same privileges
            if engine.dialect.name == "postgresql":
                roles.grant_ledger_access(connection, LEDGER_ROLE)
            roles.create_append_only_guards(connection)
    assert schema_problem(engine) is None
    assert "policy_revisions" in _refusal(engine, text("UPDATE policy_revisions SET revision = 9"))


@contextmanager
def _schemas(count: int) -> Iterator[list[str]]:
    """``count`` new, unmigrated schemas (their owner's URLs), dropped afterwards."""
    names = [f"t_{uuid.uuid4().hex[:16]}" for _ in range(count)]
    admin = make_engine(POSTGRES_URL)
    try:
        with admin.begin() as connection:
            for name in names:
                connection.execute(text(f'CREATE SCHEMA "{name}"'))
        separator = "&" if "?" in POSTGRES_URL else "?"
        yield [f"{POSTGRES_URL}{separator}options=-csearch_path%3D{name}" for name in names]
    finally:
        with admin.begin() as connection:
            for name in names:
                connection.execute(text(f'DROP SCHEMA "{name}" CASCADE'))
        admin.dispose()


def _all_at_once(count: int, action: Callable[[int], None]) -> list[BaseException]:
    barrier, problems = threading.Barrier(count), []

    def run(index: int) -> None:
        try:
            barrier.wait()
            action(index)
        except BaseException as error:  # noqa: BLE001 - reported by the caller
            problems.append(error)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return problems


@pytest.fixture
def new_role() -> Iterator[str]:
    """A ledger role no server has yet; dropped afterwards."""
    with postgres_schema():  # skips where PostgreSQL is unreachable
        pass
    role = f"forge_ledger_{uuid.uuid4().hex[:12]}"
    yield role
    admin = make_engine(POSTGRES_URL)
    try:
        with admin.begin() as connection:
            connection.execute(text(f'DROP ROLE IF EXISTS "{role}"'))
    finally:
        admin.dispose()


def _migration_jobs(urls: list[str], role: str) -> list[subprocess.Popen[str]]:
    """``python -m services.ledger.migrate`` on each of ``urls`` at once, as the migration
    jobs of several deployments sharing one server would run (alembic is one migration per
    process), naming ``role`` as the ledger's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FORGE_", "OTEL_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "shared" / "gen")]))
    env.update(FORGE_DB_LEDGER_ROLE=role)
    return [
        subprocess.Popen(
            [sys.executable, "-m", "services.ledger.migrate", "--database-url", url],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for url in urls
    ]


def test_concurrent_migrations_create_the_role_once_and_grant_each_schema(new_role: str) -> None:
    with _schemas(4) as urls:
        for _ in ("from nothing", "at head"):
            jobs = _migration_jobs(urls, new_role)
            outputs = [job.communicate(timeout=120)[0] for job in jobs]
            assert [job.returncode for job in jobs] == [0] * len(jobs), outputs
        admin = make_engine(POSTGRES_URL)
        try:
            with admin.connect() as connection:
                found = connection.execute(
                    text("SELECT rolcanlogin FROM pg_roles WHERE rolname = :r"), {"r": new_role}
                ).all()
                assert [tuple(row) for row in found] == [(False,)]  # NOLOGIN: deployments log in
                for url in urls:
                    schema = url.rsplit("%3D", 1)[1]
                    granted = connection.execute(
                        text("SELECT has_table_privilege(:r, :t, 'INSERT')"),
                        {"r": new_role, "t": f'"{schema}".journal_entries'},
                    ).scalar_one()
                    assert granted
        finally:
            admin.dispose()


def test_concurrent_role_creations_all_succeed(new_role: str) -> None:
    engine = make_engine(POSTGRES_URL)

    def ensure(_index: int) -> None:
        with engine.begin() as connection:
            roles.ensure_ledger_role(connection, new_role)

    try:
        assert _all_at_once(6, ensure) == []
        ensure(0)  # and once more, when it exists
        with engine.connect() as connection:
            count = connection.execute(
                text("SELECT count(*) FROM pg_roles WHERE rolname = :r"), {"r": new_role}
            ).scalar_one()
        assert count == 1
    finally:
        engine.dispose()


def test_the_migrations_refuse_to_run_as_the_role_they_restrict(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("roles are PostgreSQL's")
    with engine.begin() as connection, pytest.raises(RuntimeError, match="schema's owner"):
        roles.ensure_ledger_role(connection, LEDGER_ROLE)
