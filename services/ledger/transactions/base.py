"""What every ledger transaction shares: the engine and clock, the retry of a transaction that
lost a race (a unique conflict, a serialization failure, a deadlock), and helpers that run on
the caller's connection (the head, appending an entry, the policy lock, and the errors they
raise)."""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from services.ledger.database import RETRIED_SQLSTATES, read_transaction, sqlstate
from services.ledger.domain.admission import check_capacity as check_capacity_rules
from services.ledger.domain.admission import pending_limit_reached
from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.journal import EntryKind, StoredEntry, seal
from services.ledger.domain.policy import PolicyRevision
from services.ledger.domain.runs import Run
from services.ledger.domain.signing import HeadSigner
from services.ledger.repository import admissions as admission_rows
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository import journal as journal_rows
from services.ledger.repository import journal_reads
from services.ledger.repository import policy as policy_rows
from services.ledger.repository import runs as run_rows
from services.ledger.repository.admissions import AdmittedRows
from services.ledger.transactions import policy_lock_hold
from services.ledger.transactions.head_signing import (
    SignedHeads,
    Signing,
    prepare_signing,
    settle_signing,
)
from services.ledger.transactions.known_heads import KnownHeads
from shared.continuity.canonical import canonical_text
from shared.continuity.timeutil import Clock, to_text, utc_now
from shared.runtime.errors import (
    Aborted,
    FieldViolation,
    InvalidArgument,
    NotFound,
    PreconditionViolation,
    ResourceExhausted,
)
from shared.runtime.metrics import count_cap_refusal, observe_policy_lock_wait

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True)
class LedgerContext:
    """The database and the clock every transaction runs against, and the key that signs the
    heads appends make (None: heads are not signed)."""

    engine: Engine
    clock: Clock = field(default=utc_now)
    signer: HeadSigner | None = None
    #: Each run's head after this process's last append to it (a hint: known_heads).
    heads: KnownHeads = field(default_factory=KnownHeads, compare=False, repr=False)
    #: Each run's newest signature this process committed (head_signing: chained to unread).
    signed: SignedHeads = field(default_factory=SignedHeads, compare=False, repr=False)

    def __post_init__(self) -> None:
        policy_lock_hold.watch(self.engine)
        if self.signer is not None:
            self.signed.watch(self.engine)

    def now(self) -> str:
        return to_text(self.clock())

    def read(self) -> AbstractContextManager[Connection]:
        """A read-only connection (it never takes SQLite's write lock) in a transaction that
        commits when the read ends (``read_transaction``: a rollback would cost PostgreSQL the
        pooled connection's prepared statements); writes use ``engine.begin()``."""
        return read_transaction(self.engine)


# Runs of one transaction at most (the first and the retries), and the ceiling of the random
# pause before a retry, which doubles from BACKOFF_BASE_SECONDS per retry up to the cap.
TRANSACTION_ATTEMPTS = 6
BACKOFF_BASE_SECONDS = 0.005
BACKOFF_CAP_SECONDS = 0.2
UNIQUE_CONFLICT = "unique_conflict"


class RetryCounts:
    """How many transactions were run again, by cause ("unique_conflict" or the SQLSTATE):
    what the operator watches for contention on one run or on the policy lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, cause: str) -> None:
        with self._lock:
            self._counts[cause] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


TRANSACTION_RETRIES = RetryCounts()
_log = logging.getLogger("forge.ledger")


def _retry_cause(error: DBAPIError) -> str | None:
    """Why running the transaction again may succeed, or None when it cannot."""
    if isinstance(error, IntegrityError):
        return UNIQUE_CONFLICT
    code = sqlstate(error)
    return code if code in RETRIED_SQLSTATES else None


def retry_on_unique_conflict(transaction: Callable[P, T]) -> Callable[P, T]:
    """Run ``transaction`` again when a concurrent transaction won a race: a unique constraint
    fired, or PostgreSQL rolled it back with a serialization failure (40001) or a deadlock
    (40P01). At most TRANSACTION_ATTEMPTS runs, with a short random pause before each retry
    (growing up to BACKOFF_CAP_SECONDS) so the racers do not collide again in step.

    A unique constraint firing means a concurrent transaction committed the same key first (the
    same idempotency key, or an entry at the same head); the other two mean the database undid
    the whole transaction. The transactions re-read everything they decide on, so a later run
    answers as a later caller would: an identical repeat, a conflict, or a stale head."""

    @functools.wraps(transaction)
    def retried(*args: P.args, **kwargs: P.kwargs) -> T:
        for attempt in range(1, TRANSACTION_ATTEMPTS + 1):
            try:
                return transaction(*args, **kwargs)
            except DBAPIError as error:
                cause = _retry_cause(error)
                if cause is None or attempt == TRANSACTION_ATTEMPTS:
                    raise
            TRANSACTION_RETRIES.add(cause)
            _log.info("%s: running again after %s", transaction.__name__, cause)
            ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** (attempt - 1))
            time.sleep(random.uniform(0, ceiling))  # noqa: S311 - jitter, not a secret
        raise AssertionError("unreachable: the last attempt returns or raises")

    return retried


def run_not_found(run_id: str) -> NotFound:
    return NotFound("RUN_NOT_FOUND", f"run {run_id} is not registered", metadata={"run_id": run_id})


def existing_run(connection: Connection, run_id: str) -> Run:
    """The registered run (NOT_FOUND otherwise). Writers lock its row as their last lock through
    :func:`existing_run_noting_entry` or the custody read (repository/custody.py)."""
    run = run_rows.get_run(connection, run_id)
    if run is None:
        raise run_not_found(run_id)
    return run


def existing_run_noting_entry(
    connection: Connection, run_id: str, expected: str, recorded_at: str, *, held: bool
) -> tuple[int, tuple[int, str]]:
    """The run's command limit and its head, which must still be ``expected``, read by the
    statement that notes the native append's entry (``recorded_at``, ``held``) on the run row;
    insert the entry with ``noted=True`` (a refusal after this rolls the note back).

    The update locks the run row for the transaction: appends and the fenced writes (which lock
    it when they read the request's custody, after the policy and request rows) take turns per
    run, so a fenced write that appends at the head it read is not overtaken by a native append
    committing in between — without the lock a stream of native appends could make it lose every
    one of its bounded retries (INTERNAL). The lock is always the last a transaction takes."""
    found = run_rows.note_entry_reading_head(connection, run_id, recorded_at, held=held)
    if found is None:
        raise run_not_found(run_id)
    command_limit, (sequence, head) = found
    if head != expected:
        raise stale_head(run_id, expected, sequence, head)
    return command_limit, (sequence, head)


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
    return journal_reads.journal_head(connection, run_id)


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
    *,
    request: ExecutionRequestRecord | None = None,
    completed_round: bool = False,
    head: tuple[int, str] | None = None,
) -> StoredEntry:
    """Seal and insert one entry after the current head, inside the caller's transaction
    (``request``, ``completed_round``: see :func:`insert_entries`; ``head``: the head the caller
    read under the run row's lock, not read again)."""
    sequence, prev = current_head(connection, run_id) if head is None else head
    entry = seal(run_id, sequence + 1, kind, canonical_text(payload), prev, actor, context.now())
    insert_entries(context, connection, [entry], request=request, completed_round=completed_round)
    return entry


def insert_entries(
    context: LedgerContext,
    connection: Connection,
    entries: Sequence[StoredEntry],
    *,
    request: ExecutionRequestRecord | None = None,
    completed_round: bool = False,
    noted: bool = False,
) -> None:
    """Insert sealed entries (in sequence order, one run) and, with a signing key, the signature
    of the head they make, inside the caller's transaction (in the insert's own statement on
    PostgreSQL, ADR 0060): the head commits only with its signature and a signature only with
    its head (ADR 0015). Every journal insert goes through here.

    One entry may carry the change of the execution request the transaction locked and changed
    (``request``: its row is written with the entry, and the run's listing change with the
    entry's one update of the run row; on PostgreSQL all in one statement, repository.journal)
    and a completed round. ``noted``: the caller already updated the run row for the one entry
    (a native append, :func:`existing_run_noting_entry`)."""
    if not entries:
        return
    signing = _signing(context, connection, entries[0], entries[-1])
    signed = signing.signed
    if len(entries) == 1:
        journal_rows.insert_journal_entry(
            connection,
            entries[0],
            request=request,
            completed_round=completed_round,
            noted=noted,
            signed_head=signed,
        )
    else:
        if request is not None or completed_round or noted:
            raise ValueError("a request change is recorded with a single entry")
        journal_rows.insert_journal_entries(connection, entries, signed)
    _settle(context, connection, signing, entries[0])


def insert_after_known_head(
    context: LedgerContext, connection: Connection, entry: StoredEntry
) -> bool:
    """:func:`insert_entries` for one native entry sealed after a head known beforehand, noted
    on the run row in the same statement (PostgreSQL; repository.journal), which is its own
    transaction (database.single_statement_write): nothing is written after it. False: nothing
    was written (that head is not there, or no such run), or this ledger would refuse to sign
    the head (a finding the caller's transaction judges after its insert, as every append
    does)."""
    signing = _signing(context, connection, entry, entry)
    if signing.refusal is not None:
        return False
    if not journal_rows.insert_journal_entry_after_known_head(connection, entry, signing.signed):
        return False
    _settle(context, connection, signing, entry)
    return True


def insert_admission(context: LedgerContext, connection: Connection, rows: AdmittedRows) -> None:
    """:func:`insert_entries` for the rows one admission writes (its entries, request, ticket and
    derived checkpoint; repository.admissions: one statement on PostgreSQL) with its place under
    the pending cap, then the head's signature. ``RESOURCE_EXHAUSTED PENDING_TICKET_LIMIT`` when
    the cap is full (counted by the admission transaction before could not know: a concurrent
    admission took the last place); nothing is written."""
    first = rows.entries[0]
    signing = _signing(context, connection, first, rows.entries[-1])
    if not admission_rows.insert_journal_entries_of_admission(connection, rows, signing.signed):
        refusal = pending_limit_reached(rows.pending_limit, request_rows.pending_count(connection))
        count_cap_refusal(refusal.reason)
        raise refusal
    policy_lock_hold.note_pending_slot(connection)
    _settle(context, connection, signing, first)


def _signing(
    context: LedgerContext, connection: Connection, first: StoredEntry, head: StoredEntry
) -> Signing:
    """With a signing key, the signature of the head ``head`` makes, chained to the signature of
    the head ``first`` extends, which the insert stores in its own statement (ADR 0015, ADR
    0060; head_signing refuses to sign over a head it did not sign); without one, nothing."""
    if context.signer is None:
        return Signing(None)
    return prepare_signing(context.signer, context.signed, connection, first, head, context.now())


def _settle(
    context: LedgerContext, connection: Connection, signing: Signing, first: StoredEntry
) -> None:
    """After the insert: raise the signing's refusal, or remember its signature on commit
    (nothing for an unsigned append)."""
    settle_signing(context.signed, connection, signing, first)


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


def lock_policy(
    connection: Connection, *, shared: bool = False, confirmed: bool = True
) -> PolicyRevision:
    """Take the policy lock and read the current policy; writers that judge the policy serialize
    on it, the shared holders (``shared``: admissions and the fenced worker writes) only against
    the exclusive ones (policy writes, recoveries, reconciliations; ADR 0014, 0049, 0067).
    ``confirmed`` false: the row read under the lock without the re-read that confirms it is
    still the newest (the caller confirms it in a later statement:
    execution_rules.lock_for_fenced_write). The wait is the policy-lock histogram operators
    watch for contention across replicas."""
    start = time.perf_counter()
    try:
        if not confirmed:
            locked = policy_rows.lock_policy_row(connection, shared=shared)
        else:
            locked = policy_rows.lock_current_policy(connection, shared=shared)
    finally:
        observe_policy_lock_wait(time.perf_counter() - start)
    policy_lock_hold.note_locked(connection, shared=shared)
    return locked


def lock_policy_counting_due(
    connection: Connection, now: str, *, shared: bool = False
) -> tuple[PolicyRevision, int]:
    """:func:`lock_policy`, and how many queued requests' leases ran out by ``now``, in the
    same statements (execution_stops.Expiry sweeps them)."""
    start = time.perf_counter()
    try:
        locked = policy_rows.lock_current_policy_counting_due(connection, now, shared=shared)
    finally:
        observe_policy_lock_wait(time.perf_counter() - start)
    policy_lock_hold.note_locked(connection, shared=shared)
    return locked


def check_capacity(policy: PolicyRevision, *, per_run: int, pending: int) -> None:
    """The queue caps (domain.admission.check_capacity), each refusal counted by its reason."""
    try:
        check_capacity_rules(policy, per_run=per_run, pending=pending)
    except ResourceExhausted as refusal:
        count_cap_refusal(refusal.reason)
        raise


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
