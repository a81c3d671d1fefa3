"""Shared fixtures. Every storage test runs on SQLite and on PostgreSQL.

PostgreSQL comes from FORGE_TEST_POSTGRES_URL (default: the local server, database
``forge_continuity_test``; a database whose name does not end in ``_test`` is refused). Each test
gets its own schema, dropped afterwards. When PostgreSQL is unreachable the run fails; only
FORGE_TEST_POSTGRES=optional (outside CI) skips its variants, saying so. As in a deployment
(ADR 0036), the schema's owner migrates it and the ledger connects as its own role,
``forge_ledger``, which may not change a journal row: the URLs these fixtures hand out are the
ledger's; a test that must write as the owner (a migration, a tampered row) goes through
``tests.support.owner_url`` or ``as_database_owner``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from urllib.parse import quote, urlencode

import pytest
from sqlalchemy import Engine, create_engine, text

from services.ledger.database import make_engine, migrate
from services.ledger.repository.roles import take_role_lock
from services.ledger.service import Ledger
from tests.support import (
    LEDGER_ROLE,
    POSTGRES_REQUIREMENT,
    POSTGRES_URL,
    dedicated_database_problem,
    ledger_url,
    token_roles,
)

__all__ = ["POSTGRES_URL", "postgres_schema", "require_postgres"]

_postgres_problem: str | None = None


def _postgres_reachable() -> str | None:
    try:
        engine = create_engine(POSTGRES_URL, connect_args={"connect_timeout": 3})
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        engine.dispose()
        return None
    except Exception as exc:  # noqa: BLE001 - any failure means "unreachable"
        return f"{type(exc).__name__}: {exc}"


def _ledger_login() -> None:
    """The ledger's role, with a login, as a deployment provides it (deploy/README.md): the
    migrations create it NOLOGIN only when it is absent. Under the migrations' own lock, since
    roles are the server's and other test sessions may be migrating."""
    engine = create_engine(POSTGRES_URL)
    try:
        with engine.begin() as connection:
            take_role_lock(connection)
            login = connection.execute(
                text("SELECT rolcanlogin FROM pg_roles WHERE rolname = :r"), {"r": LEDGER_ROLE}
            ).scalar()
            if login is None:
                connection.execute(text(f'CREATE ROLE "{LEDGER_ROLE}" LOGIN'))
            elif not login:
                connection.execute(text(f'ALTER ROLE "{LEDGER_ROLE}" LOGIN'))
    finally:
        engine.dispose()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Refuse a database not named as a test one; fail when PostgreSQL is unreachable unless
    the machine says it has none (``FORGE_TEST_POSTGRES=optional``, never under CI): its
    variants never skip silently."""
    global _postgres_problem
    refused = dedicated_database_problem(POSTGRES_URL)
    if refused:
        raise pytest.UsageError(refused)
    _postgres_problem = _postgres_reachable()
    optional = os.environ.get(POSTGRES_REQUIREMENT) == "optional" and os.environ.get("CI") != "true"
    if _postgres_problem and not optional:
        raise pytest.UsageError(
            f"PostgreSQL at {POSTGRES_URL} is unreachable: {_postgres_problem}. Start it and "
            f"run `make test-database`, or set {POSTGRES_REQUIREMENT}=optional to skip the "
            "PostgreSQL variants"
        )
    if not _postgres_problem:
        _ledger_login()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> Iterator[str]:
    """A fresh, migrated database: a SQLite file or a new PostgreSQL schema. The ledger never
    migrates by itself, so the fixture applies the migrations as the migration job would."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/ledger.db"
        migrate(url)
        yield url
        return
    with postgres_schema() as url:
        yield url


def _libpq_option(name: str, value: str) -> str:
    """``-c name=value`` for the libpq ``options`` parameter (spaces escaped)."""
    escaped = value.replace("\\", "\\\\").replace(" ", "\\ ")
    return f"-c{name}={escaped}"


def require_postgres() -> None:
    """Skip the test, saying why, when PostgreSQL is unreachable: only under
    ``FORGE_TEST_POSTGRES=optional`` does the session get this far without it."""
    if _postgres_problem:
        pytest.skip(
            f"PostgreSQL unreachable ({POSTGRES_REQUIREMENT}=optional): {_postgres_problem}"
        )


@contextmanager
def postgres_schema(
    settings: Mapping[str, str] | None = None, application_name: str = ""
) -> Iterator[str]:
    """The URL of a new PostgreSQL schema, migrated by its owner, for the ledger's role; dropped
    afterwards; skips the test when PostgreSQL is unreachable. ``settings`` become the
    connection's server settings (as a role or database default would), ``application_name``
    names its sessions in pg_stat_activity."""
    require_postgres()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    admin = create_engine(POSTGRES_URL)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    options = " ".join(
        _libpq_option(name, value)
        for name, value in {"search_path": schema, **(settings or {})}.items()
    )
    parameters = {"options": options}
    if application_name:
        parameters["application_name"] = application_name
    separator = "&" if "?" in POSTGRES_URL else "?"
    url = f"{POSTGRES_URL}{separator}{urlencode(parameters, quote_via=quote)}"
    try:
        migrate(url)
        yield ledger_url(url)
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def ledger(engine: Engine) -> Ledger:
    return Ledger(engine, authority=token_roles)
