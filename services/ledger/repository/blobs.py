"""The blobs table: content-addressed bytes."""

from __future__ import annotations

from sqlalchemy import Connection, insert, select
from sqlalchemy.dialects import postgresql, sqlite

from services.ledger.schema import blobs


def get_blob(connection: Connection, digest: str) -> tuple[bytes, str] | None:
    row = connection.execute(
        select(blobs.c.content, blobs.c.media_type).where(blobs.c.digest == digest)
    ).first()
    return None if row is None else (bytes(row.content), str(row.media_type))


def blob_exists(connection: Connection, digest: str) -> bool:
    return (
        connection.execute(select(blobs.c.digest).where(blobs.c.digest == digest)).first()
        is not None
    )


def insert_blob(
    connection: Connection, digest: str, content: bytes, media_type: str, created_at: str
) -> None:
    connection.execute(
        insert(blobs).values(
            digest=digest,
            content=content,
            media_type=media_type,
            size=len(content),
            created_at=created_at,
        )
    )


def insert_blob_if_absent(
    connection: Connection, digest: str, content: bytes, media_type: str, created_at: str
) -> None:
    """Insert the blob unless its digest is stored already (one statement either way)."""
    values = {
        "digest": digest,
        "content": content,
        "media_type": media_type,
        "size": len(content),
        "created_at": created_at,
    }
    if connection.dialect.name == "postgresql":
        connection.execute(
            postgresql.insert(blobs)
            .values(**values)
            .on_conflict_do_nothing(index_elements=[blobs.c.digest])
        )
    else:
        connection.execute(
            sqlite.insert(blobs)
            .values(**values)
            .on_conflict_do_nothing(index_elements=[blobs.c.digest])
        )
