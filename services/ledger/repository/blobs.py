"""The blobs table: content-addressed bytes."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, bindparam, insert, select
from sqlalchemy.dialects import postgresql, sqlite

from services.ledger.schema import blobs

# Built once (building and cache-keying a statement per call cost more than running it).
_GET = select(blobs.c.content, blobs.c.media_type).where(blobs.c.digest == bindparam("digest"))
_GET_MANY = select(blobs.c.digest, blobs.c.content, blobs.c.media_type).where(
    blobs.c.digest.in_(bindparam("digests", expanding=True))
)
_EXISTS = select(blobs.c.digest).where(blobs.c.digest == bindparam("digest"))
_INSERT_IF_ABSENT = {
    "postgresql": postgresql.insert(blobs).on_conflict_do_nothing(index_elements=[blobs.c.digest]),
    "sqlite": sqlite.insert(blobs).on_conflict_do_nothing(index_elements=[blobs.c.digest]),
}


def get_blob(connection: Connection, digest: str) -> tuple[bytes, str] | None:
    row = connection.execute(_GET, {"digest": digest}).first()
    return None if row is None else (bytes(row.content), str(row.media_type))


def get_content(connection: Connection, digest: str) -> bytes | None:
    """The stored bytes of ``digest`` (None when not stored)."""
    found = get_blob(connection, digest)
    return None if found is None else found[0]


def get_blobs(connection: Connection, digests: Sequence[str]) -> dict[str, tuple[bytes, str]]:
    """(content, media type) of each stored blob of ``digests``, by digest (one statement;
    digests not stored are absent)."""
    if not digests:
        return {}
    rows = connection.execute(_GET_MANY, {"digests": sorted(set(digests))})
    return {str(row.digest): (bytes(row.content), str(row.media_type)) for row in rows}


def blob_exists(connection: Connection, digest: str) -> bool:
    return connection.execute(_EXISTS, {"digest": digest}).first() is not None


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
    values = blob_values(digest, content, media_type, created_at)
    connection.execute(_INSERT_IF_ABSENT[connection.dialect.name], values)


def blob_values(digest: str, content: bytes, media_type: str, created_at: str) -> dict[str, object]:
    """The row a blob is stored as, by column name."""
    return {
        "digest": digest,
        "content": content,
        "media_type": media_type,
        "size": len(content),
        "created_at": created_at,
    }
