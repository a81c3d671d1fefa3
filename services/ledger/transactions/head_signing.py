"""Signing the head an append makes, and refusing to sign over a head this ledger did not sign
(ADR 0015, "A rewrite is refused, not re-signed").

Before it signs head n+1 the ledger checks that head n carries a signature that verifies under
a key it publishes (inside the key's window) and names head n's hash; the new signature then
names that one (``previous``). A database writer without the key who rewrites a run's rows,
deletes its signatures or truncates its journal leaves a head that fails this check: the append
is refused (``FAILED_PRECONDITION JOURNAL_HEAD_UNSIGNED``), one alarm line is logged and the
refusal is counted by finding; nothing is signed over it. The exceptions are a run's declared
pre-signing prefix (``unsigned_prefixes``, migration 0012) and an empty journal.

Every append is signed before its insert and the signature stored by the insert's own
statement (ADR 0060); a refusal is raised only after the insert succeeded, so a head that a
concurrent append moved fails the insert, never the check (:class:`Signing`). The signature this
process made last for each run is remembered once its transaction commits (:class:`SignedHeads`):
an append at that head chains to it without reading or verifying it again. Equal head hashes
mean an unchanged history, so the memory never vouches for a rewrite; any other head is judged
by the database, never refused on the memory alone (the commit event comes before the commit,
which may still fail).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from sqlalchemy import Connection, event
from sqlalchemy.engine import Engine

from services.ledger.domain.journal import StoredEntry
from services.ledger.domain.signing import (
    SIGNED_HEAD_FORMAT,
    HeadSigner,
    PreviousHead,
    SignedHead,
)
from services.ledger.repository import signed_heads as signed_head_rows
from shared.runtime.errors import FailedPrecondition, PreconditionViolation
from shared.runtime.metrics import count_journal_head_refusal, declare_journal_head_findings

_log = logging.getLogger("forge.ledger")

#: Runs remembered (least recently signed out): about 400 bytes each.
DEFAULT_REMEMBERED_RUNS: Final = 10_000
_PENDING = "forge_signed_heads_pending"
#: What JOURNAL_HEAD_UNSIGNED's ``finding`` may say (docs/formats.md, "Signed head").
FINDINGS: Final = (
    "head_unsigned",
    "signature_mismatch",
    "signed_beyond_head",
    "key_unknown",
    "key_outside_window",
    "signature_invalid",
)
declare_journal_head_findings(FINDINGS)


class SignedHeads:
    """The newest signature this process committed for each run, bounded. A signature joins it
    when its transaction commits (a connection event), never before: a rolled-back signature is
    never chained to. The event precedes the database's commit, so an entry is a hint for the
    head it names, never evidence against another."""

    def __init__(self, max_runs: int = DEFAULT_REMEMBERED_RUNS) -> None:
        self._max_runs = max_runs
        self._heads: OrderedDict[str, SignedHead] = OrderedDict()
        self._lock = threading.Lock()
        # several ledgers may share one engine (tests): each keeps its own pending signatures
        self._pending_key = (_PENDING, id(self))

    def watch(self, engine: Engine) -> None:
        """Take pending signatures into memory when their connection commits; drop them when it
        rolls back."""
        event.listen(engine, "commit", self._committed)
        event.listen(engine, "rollback", self._dropped)

    def get(self, run_id: str, connection: Connection) -> SignedHead | None:
        """The newest signature of the run this process made: one ``connection``'s open
        transaction made (a transaction that appends twice), else one that committed."""
        pending: list[SignedHead] = connection.info.get(self._pending_key, [])
        for head in reversed(pending):
            if head.run_id == run_id:
                return head
        with self._lock:
            return self._heads.get(run_id)

    def pending(self, connection: Connection, head: SignedHead) -> None:
        connection.info.setdefault(self._pending_key, []).append(head)

    def _committed(self, connection: Connection) -> None:
        pending: list[SignedHead] = connection.info.pop(self._pending_key, [])
        if not pending:
            return
        with self._lock:
            for head in pending:
                self._heads[head.run_id] = head
                self._heads.move_to_end(head.run_id)
            while len(self._heads) > self._max_runs:
                self._heads.popitem(last=False)

    def _dropped(self, connection: Connection) -> None:
        # A connection lost mid-transaction is invalidated: the pool discards its info (the
        # pending signatures with it), and reading it here would raise and hide the lost
        # connection, which the servicer answers UNAVAILABLE, behind an internal error.
        if connection.invalidated:
            return
        connection.info.pop(self._pending_key, None)


@dataclass(frozen=True)
class Signing:
    """What an append stores beside its entries: the signature of the head they make, or why
    this ledger will not sign it. Prepared before the insert (:func:`prepare_signing`), settled
    after it succeeded (:func:`settle_signing`): a refusal or a warning about a head a
    concurrent append moved is never raised or logged, since that append fails the insert."""

    signed: SignedHead | None
    #: Why the head the entries extend is not the one this ledger signed last (the finding and
    #: the run's newest signature), raised by :func:`settle_signing`.
    refusal: tuple[str, SignedHead | None] | None = None
    #: This process's own signature at or beyond the extended head over another history, which
    #: the database no longer holds (warned about once the insert succeeded).
    superseded: SignedHead | None = None


def prepare_signing(
    signer: HeadSigner,
    memory: SignedHeads,
    connection: Connection,
    first: StoredEntry,
    head: StoredEntry,
    now: str,
) -> Signing:
    """The signature of ``head``, the last of the entries a transaction is about to insert
    from ``first`` on, chained to the signature of the head ``first`` extends, for the insert to
    store in its own statement (ADR 0060). When this process signed that head last, it chains
    to it unread; otherwise one statement reads the run's newest signature and declared prefix
    and judges them (:func:`judge_extends`); a finding becomes the refusal
    :func:`settle_signing` raises after the insert."""
    run_id, extended = head.run_id, (first.sequence - 1, first.prev_hash)
    known = memory.get(run_id, connection)
    superseded = None
    previous: PreviousHead | None
    if known is not None and (known.sequence, known.head_hash) == extended:
        # the head this process signed last: chain to it unread
        previous, unsigned_through, after = (
            known.as_previous(), known.unsigned_through, known.signed_at
        )  # fmt: skip
    else:
        if known is not None and known.sequence >= extended[0]:
            # This process signed a head at or beyond that sequence over another history. The
            # database decides: it refuses when the signature is still there; when it is not, a
            # commit that failed after its commit event cannot be told from a truncation that
            # also removed the signatures, so the append goes on and a witnessed head convicts
            # a rollback.
            superseded = known
        newest, declared = signed_head_rows.newest_signed_head_and_prefix(connection, run_id)
        judged = judge_extends(signer, newest, declared, *extended)
        if isinstance(judged, str):
            return Signing(None, refusal=(judged, newest))
        previous, unsigned_through, after = judged
    # A replica whose clock is behind never signs before the head it extends.
    signed = signer.sign(
        run_id, head.sequence, head.hash, max(now, after), previous, unsigned_through
    )
    return Signing(signed, superseded=superseded)


def settle_signing(
    memory: SignedHeads, connection: Connection, signing: Signing, first: StoredEntry
) -> None:
    """After the insert succeeded (so the head its entries extend was the run's head): raise
    the refusal (``FAILED_PRECONDITION JOURNAL_HEAD_UNSIGNED``, with its alarm line and count),
    or take the stored signature into memory when the transaction commits."""
    run_id, sequence, head_hash = first.run_id, first.sequence - 1, first.prev_hash
    if signing.refusal is not None:
        finding, newest = signing.refusal
        raise _refused(run_id, sequence, head_hash, finding, newest)
    superseded = signing.superseded
    if superseded is not None:
        _log.warning(
            "this ledger signed head %d of %s (%s), which the database no longer holds: a failed "
            "commit, or a rollback to compare with witnessed heads",
            superseded.sequence, run_id, superseded.head_hash,
        )  # fmt: skip
    if signing.signed is not None:
        memory.pending(connection, signing.signed)


def check_extends(
    signer: HeadSigner, connection: Connection, run_id: str, sequence: int, head_hash: str
) -> tuple[PreviousHead | None, int, str]:
    """(the signature to chain to, the run's unsigned prefix, the newest signed_at) for an append
    after head (``sequence``, ``head_hash``); refuses when that head is not the one this ledger
    signed last (bulk seeding, whose head nothing else moves)."""
    newest, declared = signed_head_rows.newest_signed_head_and_prefix(connection, run_id)
    judged = judge_extends(signer, newest, declared, sequence, head_hash)
    if isinstance(judged, str):
        raise _refused(run_id, sequence, head_hash, judged, newest)
    return judged


def judge_extends(
    signer: HeadSigner,
    newest: SignedHead | None,
    declared_through: int,
    sequence: int,
    head_hash: str,
) -> tuple[PreviousHead | None, int, str] | str:
    """(the signature to chain to, the run's unsigned prefix, the newest signed_at) for an
    append after head (``sequence``, ``head_hash``), given the run's newest signature and its
    declared pre-signing prefix; the finding when that head is not the one this ledger signed
    last."""
    if newest is not None and newest.format == SIGNED_HEAD_FORMAT:
        unsigned_through = newest.unsigned_through  # signed: the declaration cannot change
    else:
        unsigned_through = declared_through
    finding = _finding(signer, newest, sequence, head_hash, unsigned_through)
    if finding is not None:
        return finding
    if newest is None:
        return None, unsigned_through, ""
    return newest.as_previous(), unsigned_through, newest.signed_at


def _finding(
    signer: HeadSigner,
    newest: SignedHead | None,
    sequence: int,
    head_hash: str,
    unsigned_through: int,
) -> str | None:
    """What is wrong with extending head ``sequence`` given the run's newest signature, or None."""
    if newest is not None and newest.sequence > sequence:
        return "signed_beyond_head"  # the journal lost entries the ledger signed: a rollback
    if newest is None or newest.sequence < sequence:
        # no signature at the head: only inside a declared prefix (or an empty journal)
        return None if sequence <= unsigned_through else "head_unsigned"
    if newest.head_hash != head_hash:
        return "signature_mismatch"  # the signed head was rewritten
    return signer.distrusts(newest)


def _refused(
    run_id: str, sequence: int, head_hash: str, finding: str, newest: SignedHead | None
) -> FailedPrecondition:
    count_journal_head_refusal(finding)
    signed = "none" if newest is None else str(newest.sequence)
    _log.error(
        "ALARM journal head not signed by this ledger: run_id=%s head_sequence=%d head_hash=%s "
        "finding=%s newest_signed_sequence=%s; refusing to sign over it (the database was "
        "written around the ledger: compare with witnessed heads, docs/architecture.md)",
        run_id, sequence, head_hash, finding, signed,
    )  # fmt: skip
    return FailedPrecondition(
        "JOURNAL_HEAD_UNSIGNED",
        f"the journal head of {run_id} at sequence {sequence} is not the head this ledger signed "
        f"last ({finding}); the ledger will not sign over it",
        metadata={
            "run_id": run_id,
            "head_sequence": str(sequence),
            "finding": finding,
            "newest_signed_sequence": signed,
        },
        precondition_violations=[
            PreconditionViolation(
                "JOURNAL_HEAD_SIGNATURE", f"runs/{run_id}/journal", f"{finding} at {sequence}"
            )
        ],
    )
