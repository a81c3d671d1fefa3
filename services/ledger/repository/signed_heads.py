"""The signed_heads table: the ledger's signature over each run head a committing append made."""

from __future__ import annotations

from sqlalchemy import Connection, insert, select

from services.ledger.domain.signing import SignedHead
from services.ledger.schema import signed_heads

_INSERT = insert(signed_heads)


def insert_signed_head(connection: Connection, head: SignedHead) -> None:
    connection.execute(
        _INSERT,
        {
            "run_id": head.run_id,
            "sequence": head.sequence,
            "head_hash": head.head_hash,
            "key_id": head.key_id,
            "signed_at": head.signed_at,
            "signature": head.signature,
        },
    )


def read_signed_heads(
    connection: Connection, run_id: str, from_sequence: int, limit: int
) -> list[SignedHead]:
    """Up to ``limit`` signed heads of the run from ``from_sequence`` on, in sequence order."""
    rows = connection.execute(
        select(
            signed_heads.c.run_id,
            signed_heads.c.sequence,
            signed_heads.c.head_hash,
            signed_heads.c.key_id,
            signed_heads.c.signed_at,
            signed_heads.c.signature,
        )
        .where(signed_heads.c.run_id == run_id, signed_heads.c.sequence >= from_sequence)
        .order_by(signed_heads.c.sequence)
        .limit(limit)
    )
    return [
        SignedHead(
            row.run_id,
            int(row.sequence),
            row.head_hash,
            row.key_id,
            row.signed_at,
            bytes(row.signature),
        )
        for row in rows
    ]
