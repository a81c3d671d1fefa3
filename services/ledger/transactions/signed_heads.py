"""Reads of the signed heads, of the head feed monitors follow, and of the keys that sign them
(ADR 0015). The signatures are written by :mod:`services.ledger.transactions.head_signing`, in
the appending transaction."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from services.ledger.domain.runs import check_identifier
from services.ledger.domain.signing import PublishedKey, SignedHead
from services.ledger.repository import signed_heads as signed_head_rows
from services.ledger.transactions.base import LedgerContext, check_not_negative, existing_run
from shared.continuity.timeutil import to_text
from shared.runtime.errors import field_invalid

DEFAULT_PAGE = 500
MAX_PAGE = 1000
#: How far a caught-up feed cursor steps back: longer than any signing transaction takes from
#: its signature to its commit (statements time out after 30 s, an idle transaction after 60 s),
#: so a head that committed after a later-signed one is still returned to a follower.
FEED_SETTLE_SECONDS: Final = 120


@dataclass(frozen=True)
class SignedHeadPage:
    """Signed heads in sequence order and where the next page starts (0: none left)."""

    signed_heads: list[SignedHead]
    next_sequence: int


@dataclass(frozen=True)
class HeadFeedPage:
    """A page of the head feed: each run's newest signed head, and where to continue."""

    heads: list[SignedHead]
    next_cursor: str
    caught_up: bool
    settle_seconds: int = FEED_SETTLE_SECONDS


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


def feed(context: LedgerContext, cursor: str, page_size: int) -> HeadFeedPage:
    """The newest signed head of each run signed after ``cursor``, in (signed_at, run_id) order.
    A full page continues after its last head; a caught-up one continues from
    FEED_SETTLE_SECONDS before now, so a head that committed late is still returned: a follower
    may see a head again and keeps the newest per run (docs/formats.md, "Heads file")."""
    check_not_negative(page_size=page_size)
    limit = min(page_size or DEFAULT_PAGE, MAX_PAGE)
    signed_at, run_id = _position(cursor)
    with context.read() as connection:
        heads = signed_head_rows.newest_heads_after(connection, signed_at, run_id, limit)
    if len(heads) == limit:
        return HeadFeedPage(heads, _cursor(heads[-1].signed_at, heads[-1].run_id), False)
    settled = to_text(context.clock() - timedelta(seconds=FEED_SETTLE_SECONDS))
    return HeadFeedPage(heads, _cursor(settled, ""), True)


def _cursor(signed_at: str, run_id: str) -> str:
    text = json.dumps({"run_id": run_id, "signed_at": signed_at}, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode("ascii")


def _position(cursor: str) -> tuple[str, str]:
    """(signed_at, run_id) a cursor continues after; ("", "") from the beginning."""
    if not cursor:
        return "", ""
    try:
        members = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        signed_at, run_id = members["signed_at"], members["run_id"]
        if not (isinstance(signed_at, str) and isinstance(run_id, str)):
            raise ValueError("members are not text")
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeError):
        raise field_invalid(
            "cursor",
            "the next_cursor of an earlier ListHeads response, or empty",
            "cursor is not a ListHeads cursor",
        ) from None
    return signed_at, run_id
