"""The signed_heads table (the ledger's signature over each run head a committing append made)
and the declared pre-signing prefixes it is checked against (unsigned_prefixes)."""

from __future__ import annotations

from sqlalchemy import Connection, RowMapping, bindparam, func, insert, select, tuple_

from services.ledger.domain.signing import (
    SIGNED_HEAD_FORMAT_V1,
    PreviousHead,
    SignedHead,
)
from services.ledger.schema import signed_heads, unsigned_prefixes

_INSERT = insert(signed_heads)
_outer = signed_heads.alias("feed")
_COLUMNS = (
    signed_heads.c.run_id,
    signed_heads.c.sequence,
    signed_heads.c.head_hash,
    signed_heads.c.key_id,
    signed_heads.c.signed_at,
    signed_heads.c.signature,
    signed_heads.c.format,
    signed_heads.c.previous_sequence,
    signed_heads.c.previous_head_hash,
    signed_heads.c.previous_signature_digest,
    signed_heads.c.unsigned_through,
)


def insert_signed_head(connection: Connection, head: SignedHead) -> None:
    previous = head.previous
    connection.execute(
        _INSERT,
        {
            "run_id": head.run_id,
            "sequence": head.sequence,
            "head_hash": head.head_hash,
            "key_id": head.key_id,
            "signed_at": head.signed_at,
            "signature": head.signature,
            "format": head.format,
            "previous_sequence": None if previous is None else previous.sequence,
            "previous_head_hash": None if previous is None else previous.head_hash,
            "previous_signature_digest": None if previous is None else previous.signature_digest,
            "unsigned_through": head.unsigned_through,
        },
    )


def _signed_head(values: RowMapping) -> SignedHead:
    previous = (
        None
        if values["previous_sequence"] is None
        else PreviousHead(
            int(values["previous_sequence"]),
            values["previous_head_hash"],
            values["previous_signature_digest"],
        )
    )
    stored_format = values["format"]
    return SignedHead(
        values["run_id"],
        int(values["sequence"]),
        values["head_hash"],
        values["key_id"],
        values["signed_at"],
        bytes(values["signature"]),
        SIGNED_HEAD_FORMAT_V1 if stored_format is None else stored_format,
        previous,
        int(values["unsigned_through"] or 0),
    )


def read_signed_heads(
    connection: Connection, run_id: str, from_sequence: int, limit: int
) -> list[SignedHead]:
    """Up to ``limit`` signed heads of the run from ``from_sequence`` on, in sequence order."""
    rows = connection.execute(
        select(*_COLUMNS)
        .where(signed_heads.c.run_id == run_id, signed_heads.c.sequence >= from_sequence)
        .order_by(signed_heads.c.sequence)
        .limit(limit)
    )
    return [_signed_head(row._mapping) for row in rows]


# Built once: an append that extends a head this process did not sign reads both (head_signing).
_NEWEST = (
    select(*_COLUMNS)
    .where(signed_heads.c.run_id == bindparam("run_id"))
    .order_by(signed_heads.c.sequence.desc())
    .limit(1)
)
_PREFIX = select(unsigned_prefixes.c.through_sequence).where(
    unsigned_prefixes.c.run_id == bindparam("run_id")
)


def newest_signed_head(connection: Connection, run_id: str) -> SignedHead | None:
    """The run's signature at its highest sequence (what the next signature chains to)."""
    row = connection.execute(_NEWEST, {"run_id": run_id}).first()
    return None if row is None else _signed_head(row._mapping)


def unsigned_prefix(connection: Connection, run_id: str) -> int:
    """The run's declared pre-signing prefix (0: none declared)."""
    through = connection.execute(_PREFIX, {"run_id": run_id}).scalar()
    return int(through or 0)


def newest_heads_after(
    connection: Connection, signed_at: str, run_id: str, limit: int
) -> list[SignedHead]:
    """The head feed: each run's newest signed head whose (signed_at, run_id) is after the given
    position, in that order, at most ``limit``."""
    newest = (
        select(func.max(signed_heads.c.sequence))
        .where(signed_heads.c.run_id == _outer.c.run_id)
        .scalar_subquery()
    )
    rows = connection.execute(
        select(*(_outer.c[column.name] for column in _COLUMNS))
        .where(
            tuple_(_outer.c.signed_at, _outer.c.run_id) > tuple_(signed_at, run_id),
            _outer.c.sequence == newest,
        )
        .order_by(_outer.c.signed_at, _outer.c.run_id)
        .limit(limit)
    )
    return [_signed_head(row._mapping) for row in rows]
