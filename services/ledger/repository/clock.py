"""The database's clock, read by the ledger's clock (services/ledger/database_clock.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, text

# clock_timestamp(), not now(): now() is the start of the transaction, clock_timestamp() the
# moment the statement reads it, which the round trip around it brackets.
_DATABASE_TIME = text("SELECT clock_timestamp()")


def database_time(connection: Connection) -> datetime:
    """The database server's clock now (timezone-aware)."""
    moment: datetime = connection.execute(_DATABASE_TIME).scalar_one()
    return moment
