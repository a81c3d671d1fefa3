"""Migration 0011 stores new blobs and journal payloads with LZ4 on PostgreSQL: the columns'
compression is LZ4 after it and the default after its downgrade, and bytes stored under either
read back unchanged. On SQLite it changes nothing, both ways."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from forge.continuity.v1 import ledger_pb2
from services.ledger.database import downgrade, upgrade
from tests.ledger.conftest import LedgerClients
from tests.support import owner_engine

# Past PostgreSQL's compression threshold (about 2 KB), and compressible.
LARGE = 9_000


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """The schema's owner: the test migrates down and up, and the ledger that stores at 0010 is
    that release's, which connected as the owner (0013 grants the ledger its own role)."""
    with owner_engine(database_url) as owner:
        yield owner


def compression(engine: Engine) -> dict[str, str]:
    """Each compressed column's method: 'l' LZ4, 'p' pglz, '' the server's default."""
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT attrelid::regclass::text, attname, attcompression FROM pg_attribute"
                " WHERE (attrelid, attname) IN (('blobs'::regclass, 'content'),"
                " ('journal_entries'::regclass, 'payload_json'))"
            )
        )
        return {f"{table}.{column}": method for table, column, method in rows}


def stored_with(engine: Engine, digest: str) -> str | None:
    """The method the stored value of ``digest`` was compressed with (None: not compressed)."""
    with engine.connect() as connection:
        method: str | None = connection.execute(
            text("SELECT pg_column_compression(content) FROM blobs WHERE digest = :digest"),
            {"digest": digest},
        ).scalar_one()
        return method


def put(clients: LedgerClients, tag: str) -> tuple[str, bytes]:
    content = json.dumps({"tag": tag, "text": "a checkpoint's messages " * (LARGE // 24)}).encode()
    reply = clients.ledger().PutBlob(ledger_pb2.PutBlobRequest(content=content))
    return reply.digest, content


def read(clients: LedgerClients, digest: str) -> bytes:
    reply = clients.ledger("reader-token").GetBlob(ledger_pb2.GetBlobRequest(digest=digest))
    return reply.content


def test_new_values_are_stored_with_lz4_and_every_value_reads_back(
    clients: LedgerClients, engine: Engine
) -> None:
    postgresql = engine.dialect.name == "postgresql"
    lz4 = {"blobs.content": "l", "journal_entries.payload_json": "l"}
    default = {"blobs.content": "", "journal_entries.payload_json": ""}
    if postgresql:
        assert compression(engine) == lz4
    downgrade(engine, "0010")
    if postgresql:
        assert compression(engine) == default
    before = put(clients, "before")
    upgrade(engine)
    after = put(clients, "after")
    if postgresql:
        assert compression(engine) == lz4
        assert stored_with(engine, before[0]) == "pglz"
        assert stored_with(engine, after[0]) == "lz4"
    for digest, content in (before, after):
        assert read(clients, digest) == content
