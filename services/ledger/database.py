"""Engine construction and migrations for the ledger's database (SQLite or PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

MIGRATIONS = Path(__file__).parent / "migrations"


def make_engine(url: str, **options: Any) -> Engine:
    """An engine for ``url``. SQLite gets WAL, a busy timeout, foreign keys, and BEGIN IMMEDIATE
    transactions so concurrent writers queue instead of failing on lock upgrades."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 60}, **options
        )

        @event.listens_for(engine, "connect")
        def _configure(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # let SQLAlchemy's BEGIN below take over
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=60000")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(connection: Any) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    options.setdefault("pool_size", 10)
    options.setdefault("max_overflow", 40)
    options.setdefault("pool_pre_ping", True)
    return create_engine(url, **options)


def upgrade(engine: Engine) -> None:
    """Apply every pending migration (idempotent)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.connect() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        connection.commit()
