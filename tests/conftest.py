"""Shared fixtures. Every storage test runs on SQLite and on PostgreSQL.

PostgreSQL comes from FORGE_TEST_POSTGRES_URL (default: the local server, database ``test``).
Each test gets its own schema, dropped afterwards. When CI=true and PostgreSQL is unreachable the
run fails; it never silently skips.
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
from services.ledger.service import Ledger
from tests.support import token_roles

POSTGRES_URL = os.environ.get(
    "FORGE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
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


def pytest_sessionstart(session: pytest.Session) -> None:
    global _postgres_problem
    _postgres_problem = _postgres_reachable()
    if _postgres_problem and os.environ.get("CI") == "true":
        raise pytest.UsageError(
            f"CI=true but PostgreSQL at {POSTGRES_URL} is unreachable: {_postgres_problem}"
        )


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


@contextmanager
def postgres_schema(
    settings: Mapping[str, str] | None = None, application_name: str = ""
) -> Iterator[str]:
    """The URL of a new, migrated PostgreSQL schema, dropped afterwards; skips the test when
    PostgreSQL is unreachable. ``settings`` become the connection's server settings (as a role
    or database default would), ``application_name`` names its sessions in pg_stat_activity."""
    if _postgres_problem:
        pytest.skip(f"PostgreSQL unreachable (set CI=true to make this fatal): {_postgres_problem}")
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
        yield url
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
