"""Reads of the signed heads and of the keys that sign them (ADR 0015). The signatures are
written by :func:`services.ledger.transactions.base.insert_entries`, in the appending
transaction."""

from __future__ import annotations

from dataclasses import dataclass

from services.ledger.domain.runs import check_identifier
from services.ledger.domain.signing import PublishedKey, SignedHead
from services.ledger.repository import signed_heads as signed_head_rows
from services.ledger.transactions.base import LedgerContext, check_not_negative, existing_run

DEFAULT_PAGE = 500
MAX_PAGE = 1000


@dataclass(frozen=True)
class SignedHeadPage:
    """Signed heads in sequence order and where the next page starts (0: none left)."""

    signed_heads: list[SignedHead]
    next_sequence: int


def published_keys(context: LedgerContext) -> list[PublishedKey]:
    """The current signing key and every earlier one still published; none without a key."""
    return context.signer.published() if context.signer is not None else []


def read(context: LedgerContext, run_id: str, from_sequence: int, page_size: int) -> SignedHeadPage:
    check_identifier("run_id", run_id)
    check_not_negative(from_sequence=from_sequence, page_size=page_size)
    limit = min(page_size or DEFAULT_PAGE, MAX_PAGE)
    with context.read() as connection:
        existing_run(connection, run_id)
        heads = signed_head_rows.read_signed_heads(connection, run_id, max(from_sequence, 1), limit)
    following = heads[-1].sequence + 1 if len(heads) == limit else 0
    return SignedHeadPage(heads, following)
