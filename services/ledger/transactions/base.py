"""What every ledger transaction shares: the engine and clock, the retry on a unique conflict,
and helpers that run on the caller's connection (the head, appending an entry, the policy lock,
and the errors they raise)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import IntegrityError

from services.ledger.database import read_only_connection
from services.ledger.domain.journal import EntryKind, StoredEntry, seal
from services.ledger.domain.policy import PolicyRevision
from services.ledger.domain.runs import Run
from services.ledger.domain.signing import HeadSigner
from services.ledger.repository import journal as journal_rows
from services.ledger.repository import policy as policy_rows
from services.ledger.repository import runs as run_rows
from services.ledger.repository import signed_heads as signed_head_rows
from shared.continuity.canonical import canonical_text
from shared.continuity.timeutil import Clock, to_text, utc_now
from shared.runtime.errors import (
    Aborted,
    FieldViolation,
    InvalidArgument,
    NotFound,
    PreconditionViolation,
)

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True)
class LedgerContext:
    """The database and the clock every transaction runs against, and the key that signs the
    heads appends make (None: heads are not signed)."""

    engine: Engine
    clock: Clock = field(default=utc_now)
    signer: HeadSigner | None = None

    def now(self) -> str:
        return to_text(self.clock())

    def read(self) -> Connection:
        """A read-only connection (it never takes SQLite's write lock); writes use
        ``engine.begin()``."""
        return read_only_connection(self.engine)


def retry_on_unique_conflict(transaction: Callable[P, T]) -> Callable[P, T]:
    """Run ``transaction`` once more when a unique constraint fired.

    A unique constraint firing means a concurrent transaction committed the same key first. The
    transactions re-read everything they decide on, so the second run answers as the second
    caller would: an identical repeat, a conflict, or a stale head."""

    @functools.wraps(transaction)
    def once_more_on_conflict(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return transaction(*args, **kwargs)
        except IntegrityError:
            return transaction(*args, **kwargs)

    return once_more_on_conflict


def run_not_found(run_id: str) -> NotFound:
    return NotFound("RUN_NOT_FOUND", f"run {run_id} is not registered", metadata={"run_id": run_id})


def existing_run(connection: Connection, run_id: str) -> Run:
    run = run_rows.get_run(connection, run_id)
    if run is None:
        raise run_not_found(run_id)
    return run


def existing_run_at_head(
    connection: Connection, run_id: str, expected: str
) -> tuple[Run, tuple[int, str]]:
    """:func:`existing_run` and :func:`check_head` in one read: the run and its head, which must
    still be ``expected``."""
    found = run_rows.get_run_with_head(connection, run_id)
    if found is None:
        raise run_not_found(run_id)
    run, (sequence, head) = found
    if head != expected:
        raise stale_head(run_id, expected, sequence, head)
    return run, (sequence, head)


def stale_head(run_id: str, expected: str, sequence: int, head: str) -> Aborted:
    return Aborted(
        "JOURNAL_HEAD_STALE",
        f"journal of {run_id} is at sequence {sequence}, not at the expected head",
        metadata={
            "run_id": run_id,
            "expected_head_hash": expected,
            "current_head_sequence": str(sequence),
            "current_head_hash": head,
        },
        precondition_violations=[
            PreconditionViolation(
                "JOURNAL_HEAD", f"runs/{run_id}/journal", f"current head is {head} at {sequence}"
            )
        ],
    )


def current_head(connection: Connection, run_id: str) -> tuple[int, str]:
    """(sequence, hash) of the run's newest entry; (0, genesis) for an empty journal."""
    return journal_rows.journal_head(connection, run_id)


def check_head(connection: Connection, run_id: str, expected: str) -> tuple[int, str]:
    """The head, which must still be ``expected`` (``ABORTED JOURNAL_HEAD_STALE`` otherwise)."""
    sequence, head = current_head(connection, run_id)
    if head != expected:
        raise stale_head(run_id, expected, sequence, head)
    return sequence, head


def append_entry(
    context: LedgerContext,
    connection: Connection,
    run_id: str,
    kind: EntryKind,
    payload: object,
    actor: str,
) -> StoredEntry:
    """Seal and insert one entry after the current head, inside the caller's transaction."""
    sequence, head = current_head(connection, run_id)
    entry = seal(run_id, sequence + 1, kind, canonical_text(payload), head, actor, context.now())
    insert_entries(context, connection, [entry])
    return entry


def insert_entries(
    context: LedgerContext, connection: Connection, entries: Sequence[StoredEntry]
) -> None:
    """Insert sealed entries (in sequence order, one run), then, with a signing key, sign the
    head they make, inside the caller's transaction: the head commits only with its signature
    and a signature only with its head (ADR 0015). Every journal insert goes through here."""
    if len(entries) == 1:
        journal_rows.insert_journal_entry(connection, entries[0])
    else:
        journal_rows.insert_journal_entries(connection, entries)
    if context.signer is not None and entries:
        head = entries[-1]
        signed = context.signer.sign(head.run_id, head.sequence, head.hash, context.now())
        signed_head_rows.insert_signed_head(connection, signed)


def seal_after(
    context: LedgerContext,
    run_id: str,
    kind: EntryKind,
    payload: object,
    actor: str,
    head: tuple[int, str],
) -> StoredEntry:
    """The entry sealed after ``head`` (sequence, hash), not yet inserted: a transaction that
    already read the head seals its entries in order and inserts them in one statement (a
    concurrent append at the same head still fails the (run_id, prev_hash) and key constraints)."""
    sequence, prev = head
    return seal(run_id, sequence + 1, kind, canonical_text(payload), prev, actor, context.now())


def lock_policy(connection: Connection) -> PolicyRevision:
    """Lock the current policy row; writers that judge the policy serialize on it."""
    return policy_rows.lock_current_policy(connection)


def check_not_negative(**values: int) -> None:
    """Paging arguments: ``INVALID_ARGUMENT FIELD_INVALID`` naming each negative field (a negative
    LIMIT must never reach the database)."""
    negative = [name for name, value in values.items() if value < 0]
    if negative:
        raise InvalidArgument(
            "FIELD_INVALID",
            f"{' and '.join(values)} must not be negative",
            metadata={"field": ",".join(negative)},
            field_violations=[FieldViolation(name, "must not be negative") for name in negative],
        )
