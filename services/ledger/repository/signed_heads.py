"""The signed_heads table (the ledger's signature over each run head a committing append made)
and the declared pre-signing prefixes it is checked against (unsigned_prefixes)."""

from __future__ import annotations

from sqlalchemy import (
    CTE,
    Connection,
    RowMapping,
    bindparam,
    cast,
    func,
    insert,
    null,
    select,
    tuple_,
    union_all,
)

from services.ledger.domain.signing import (
    SIGNED_HEAD_FORMAT_V1,
    PreviousHead,
    SignedHead,
)
from services.ledger.repository.runs import typed_parameters
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
    connection.execute(_INSERT, signed_head_values(head))


def signed_head_values(head: SignedHead) -> dict[str, object]:
    """The row ``head`` is stored as, by column name."""
    previous = head.previous
    return {
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
    }


#: The prefix of a signed head's parameters in a statement that writes it beside its entries.
SIGNED_HEAD_PREFIX = "h_"


def signing_from(source: CTE | None) -> CTE:
    """PostgreSQL: a data-modifying WITH that stores the signed head (parameters
    :func:`signing_parameters`) once for the row ``source`` returns, the same row the
    statement's journal insert selects from, so the head is stored exactly when its entries are
    (ADR 0060). No ``source``: once, unconditionally (for a statement whose insert is
    unconditional, and fails whole if it fails)."""
    values = select(*typed_parameters(signed_heads, SIGNED_HEAD_PREFIX))
    if source is not None:
        values = values.select_from(source)
    stored = insert(signed_heads).from_select(
        [column.name for column in signed_heads.columns], values
    )
    return stored.cte("signed_head")


def signing_parameters(head: SignedHead) -> dict[str, object]:
    """The parameters of :func:`signing_from` for ``head``."""
    values = signed_head_values(head)
    return {f"{SIGNED_HEAD_PREFIX}{name}": value for name, value in values.items()}


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


# The newest signature and the declared prefix in one statement: a UNION ALL of the two lookups,
# the prefix's row carrying only ``declared_through`` (no run has a signature at sequence NULL).
# NULLs are cast to their column's type: PostgreSQL types an untyped NULL in a subquery as text.
_DECLARED = unsigned_prefixes.c.through_sequence
_NEWEST_AND_PREFIX = union_all(
    select(_NEWEST.add_columns(cast(null(), _DECLARED.type).label("declared_through")).subquery()),
    select(
        *(cast(null(), column.type).label(column.name) for column in _COLUMNS),
        _DECLARED.label("declared_through"),
    ).where(unsigned_prefixes.c.run_id == bindparam("run_id")),
)


def newest_signed_head_and_prefix(
    connection: Connection, run_id: str
) -> tuple[SignedHead | None, int]:
    """The run's newest signature (what the next chains to) and its declared pre-signing prefix
    (0: none declared), in one round trip: the check before every append this process did not
    sign last (transactions/head_signing)."""
    newest, declared = None, 0
    for row in connection.execute(_NEWEST_AND_PREFIX, {"run_id": run_id}):
        values = row._mapping
        if values["sequence"] is None:
            declared = int(values["declared_through"] or 0)
        else:
            newest = _signed_head(values)
    return newest, declared


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
