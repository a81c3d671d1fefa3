"""The hash-chained journal: native appends at an expected head, pages and verification
(followers: services.ledger.transactions.followers)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from services.ledger.database import single_statement_write
from services.ledger.domain.commands import CommandLedger
from services.ledger.domain.execution import PENDING_STATES, check_worker_write
from services.ledger.domain.journal import (
    LEDGER_ONLY_KINDS,
    NATIVE_RESUME_KINDS,
    EntryKind,
    StoredEntry,
    seal,
    validate_payload,
)
from services.ledger.domain.lease_records import WORKER_RECORD_KINDS
from services.ledger.domain.recovery_authority import Authority
from services.ledger.domain.runs import Run, check_identifier
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository import journal_reads
from services.ledger.transactions.base import (
    LedgerContext,
    check_not_negative,
    existing_run,
    existing_run_noting_entry,
    insert_after_known_head,
    insert_entries,
    retry_on_unique_conflict,
    stale_head,
)
from services.ledger.transactions.execution_rules import check_fenced_write, lock_for_fenced_write
from shared.continuity.canonical import GENESIS_HASH, is_digest, parse_json
from shared.continuity.journal_chain import IntactEntries, Verification, verify_chain
from shared.runtime.errors import (
    Conflict,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    PermissionDenied,
    field_invalid,
)

FENCED_NATIVE_KINDS = frozenset(
    {EntryKind.WORKER_CLAIMED, EntryKind.REQUEST_FAILED, EntryKind.COMMAND_EXECUTED}
)
MAX_JOURNAL_PAGE = 1000
DEFAULT_JOURNAL_PAGE = 100
FOLLOW_PAGE = 200
# A page's (or a stream message's) payloads stay within about this many bytes: one entry always
# goes, whatever its size (a payload is at most 256 KiB), so one message of entries stays well
# below the 4 MiB a gRPC client receives by default, whatever page size was asked for.
MESSAGE_PAYLOAD_BYTES = 1 << 20
# Entries this process already recomputed intact, by the digest of their exact stored fields: a
# verification recomputes only new or altered rows and gives the same answer
# (shared.continuity.journal_chain).
INTACT = IntactEntries()


# --- append ---------------------------------------------------------------------------------


def append(
    context: LedgerContext,
    run_id: str,
    expected_head_hash: str,
    kind: EntryKind,
    payload_json: str,
    actor: str,
    authority: Authority,
    *,
    worker: bool = False,
) -> StoredEntry:
    """Append one native entry at the expected head (empty means the genesis head). The entry
    is a fenced worker write (:func:`_check_worker_append`, checked against ``authority``) when
    the caller is a worker (``worker``: no platform writer role), and when it is a worker record
    naming a continuity execution request, whoever sends it: only the lease holder writes those
    (a platform writer's record naming none stays a native write)."""
    check_identifier("run_id", run_id)
    if kind in LEDGER_ONLY_KINDS:
        raise InvalidArgument(
            "JOURNAL_ENTRY_KIND_RESERVED",
            f"{kind.value} entries are written only by the ledger's own transactions",
            metadata={"kind": kind.value},
            field_violations=[FieldViolation("kind", "reserved for ledger transactions")],
        )
    canonical = validate_payload(kind, payload_json)
    expected = expected_head_hash or GENESIS_HASH
    if not is_digest(expected):
        raise field_invalid(
            "expected_head_hash",
            "must be sha256:<64 hex>",
            "expected_head_hash must be sha256:<64 hex> (or empty for an empty journal)",
        )
    return _append_at(context, run_id, expected, kind, canonical, actor, authority, worker)


@retry_on_unique_conflict
def _append_at(
    context: LedgerContext,
    run_id: str,
    expected: str,
    kind: EntryKind,
    canonical: str,
    actor: str,
    authority: Authority,
    worker: bool,
) -> StoredEntry:
    # A concurrent append that committed at the same head first makes the retry report where
    # the head is now (JOURNAL_HEAD_STALE).
    # The canonical payload parsed once, for every check below and the seal (a worker's record
    # was parsed five times: the checks each read it, and the seal hashes it).
    parsed = _Parsed(canonical)
    named = _named_request(kind, parsed)
    if not worker and named is None and kind not in FENCED_NATIVE_KINDS:
        appended = _append_after_known_head(context, run_id, expected, kind, canonical, actor)
        if appended is not None:
            return appended
    with context.engine.begin() as connection:
        recorded_at = ""
        # A request of this run created after this read came with its admission's entry, so
        # the head check below refuses the append as stale (another run's request never reads
        # this journal).
        fenced = worker or (
            named is not None and request_rows.get_execution_request(connection, named) is not None
        )
        if not fenced:
            # a native append: the run row noted, locked and read with its head in one statement
            recorded_at = context.now()
            command_limit, (sequence, head) = existing_run_noting_entry(
                connection, run_id, expected, recorded_at, held=kind is EntryKind.RUN_HELD
            )
        else:
            # the fenced write's checks already locked the run row and read its head
            run, (sequence, head) = _check_worker_append(
                context, connection, authority, run_id, kind, parsed.value(), actor
            )
            command_limit = run.spec.command_limit
            if head != expected:
                raise stale_head(run_id, expected, sequence, head)
        _check_native_write(connection, run_id, command_limit, kind, parsed.value(), fenced=fenced)
        entry = seal(
            run_id,
            sequence + 1,
            kind,
            canonical,
            head,
            actor,
            recorded_at or context.now(),
            payload=parsed.value(),
        )
        insert_entries(context, connection, [entry], noted=not fenced)
    context.heads.note(entry)
    return entry


class _HeadNotThere(Exception):
    """The known head is not the run's head (or the run is unknown): roll back, read it."""


def _append_after_known_head(
    context: LedgerContext,
    run_id: str,
    expected: str,
    kind: EntryKind,
    canonical: str,
    actor: str,
) -> StoredEntry | None:
    """A native append at the head this process appended last (context.heads), in one
    statement on PostgreSQL (base.insert_after_known_head): the run row noted and locked, the
    entry inserted where the entry it links to is stored. None where there is no such hint, it
    is not ``expected``, or the statement found another head (rolled back): the caller then
    reads the head as every other append does. A kind this path does not check
    (the fenced kinds, whose checks read other rows) never comes here."""
    known = context.heads.get(run_id)
    if known is None or known[1] != expected or context.engine.dialect.name != "postgresql":
        return None
    entry = seal(run_id, known[0] + 1, kind, canonical, expected, actor, context.now())
    try:
        # One statement, its own transaction (ADR 0065): no BEGIN and no COMMIT round trip.
        with single_statement_write(context.engine) as connection:
            if not insert_after_known_head(context, connection, entry):
                raise _HeadNotThere
    except _HeadNotThere:
        context.heads.forget(run_id)
        return None
    except Exception:
        # e.g. a concurrent append won the link: the retry reads the head
        context.heads.forget(run_id)
        raise
    context.heads.note(entry)
    return entry


class _Parsed:
    """A canonical payload, parsed when first asked for and then kept: it never changes."""

    __slots__ = ("_text", "_value")

    def __init__(self, text: str) -> None:
        self._text, self._value = text, None

    def value(self) -> Any:
        if self._value is None:
            self._value = parse_json(self._text)
        return self._value


def _named_request(kind: EntryKind, parsed: _Parsed) -> str | None:
    """The execution request a worker record names; None for every other entry."""
    if kind not in WORKER_RECORD_KINDS:
        return None
    payload = parsed.value()
    named = payload.get("execution_request_id") if isinstance(payload, dict) else None
    return named if isinstance(named, str) else None


def _check_native_write(
    connection: Connection,
    run_id: str,
    command_limit: int,
    kind: EntryKind,
    payload: Any,
    *,
    fenced: bool,
) -> None:
    """Native appends may not route around the continuity rules: a continuity execution
    request is written only through ExecutionService under its lease generation (12), a native
    resume (any kind of :data:`NATIVE_RESUME_KINDS`) waits until no continuity request of the
    run is outstanding, and a native command is charged against the same command limit (13).
    ``payload``: the parsed canonical payload (an object: validate_payload refuses others)."""
    assert isinstance(payload, dict)
    named = payload.get("execution_request_id")
    if (
        kind in FENCED_NATIVE_KINDS
        and isinstance(named, str)
        and request_rows.get_execution_request(connection, named) is not None
    ):
        raise InvalidArgument(
            "EXECUTION_REQUEST_FENCED",
            f"{named} is a continuity execution request: write through ExecutionService "
            "with its lease generation",
            metadata={"execution_request_id": named, "kind": kind.value},
        )
    if not fenced and kind in NATIVE_RESUME_KINDS:
        # Automatic verification before native work: while a continuity request of the run is
        # queued or claimed, the run resumes only under its lease (ExecutionService): generic
        # retry, resume or handoff cannot bypass the outstanding ticket.
        outstanding = request_rows.list_execution_requests(connection, run_id, PENDING_STATES)
        if outstanding:
            raise FailedPrecondition(
                "CONTINUITY_TICKET_OUTSTANDING",
                f"run {run_id} has continuity execution request "
                f"{outstanding[0].execution_request_id} outstanding; a native {kind.value} is "
                "refused until it ends: the run resumes only under its lease, through "
                "ExecutionService",
                metadata={
                    "run_id": run_id,
                    "execution_request_id": outstanding[0].execution_request_id,
                },
            )
    if kind is EntryKind.COMMAND_EXECUTED:
        usage = CommandLedger.from_entries(journal_reads.command_entries(connection, run_id))
        command_id = str(payload["command_id"])
        if usage.receipt(command_id) is not None:
            raise Conflict(
                "COMMAND_ALREADY_RECORDED",
                f"command {command_id} is already charged to this run",
                metadata={"command_id": command_id},
            )
        usage.check_room(command_limit)


def _check_worker_append(
    context: LedgerContext,
    connection: Connection,
    authority: Authority,
    run_id: str,
    kind: EntryKind,
    payload: Any,
    worker: str,
) -> tuple[Run, tuple[int, str]]:
    """A worker's own record is a fenced write like a command's (12): it names a request of this
    run and the generation it holds, and the lease, policy and recovery-authority checks of
    RecordCommand are repeated, so a worker that lost its lease or authority cannot record (and,
    recording first, does not make) its next model request or tool call; and nobody but the
    lease holder (a platform writer neither) writes a record reconciliation or certification
    would count as the worker's. The run, locked, and its head. ``payload``: the parsed
    canonical payload."""
    assert isinstance(payload, dict)
    execution_request_id, generation = (
        payload.get("execution_request_id"),
        payload.get("lease_generation"),
    )
    if (
        kind not in WORKER_RECORD_KINDS
        or not isinstance(execution_request_id, str)
        or not isinstance(generation, int)
        or isinstance(generation, bool)
    ):
        raise PermissionDenied(
            "WORKER_APPEND_NOT_LEASED",
            f"a worker appends only {', '.join(sorted(k.value for k in WORKER_RECORD_KINDS))} "
            "entries naming execution_request_id and lease_generation",
            metadata={"identity": worker, "kind": kind.value},
        )
    # the lock order of every fenced write: the policy lock, then the request row
    policy, record = lock_for_fenced_write(connection, execution_request_id)
    if record.run_id != run_id:
        raise PermissionDenied(
            "WORKER_APPEND_NOT_LEASED",
            f"execution request {execution_request_id} does not continue run {run_id}",
            metadata={"identity": worker, "kind": kind.value},
        )
    check_worker_write(record, worker, generation, context.clock())
    custody, effects = check_fenced_write(connection, authority, policy, record, None)
    return custody.run, effects.head


# --- reads ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JournalPage:
    """One page of entries, the head when it was read, and where the next page starts (0 when
    the page reaches the head)."""

    entries: list[StoredEntry]
    head: tuple[int, str]

    @property
    def next_sequence(self) -> int:
        if not self.entries or self.entries[-1].sequence >= self.head[0]:
            return 0
        return self.entries[-1].sequence + 1


def read(context: LedgerContext, run_id: str, from_sequence: int, page_size: int) -> JournalPage:
    check_identifier("run_id", run_id)
    check_not_negative(from_sequence=from_sequence, page_size=page_size)
    limit = min(page_size or DEFAULT_JOURNAL_PAGE, MAX_JOURNAL_PAGE)
    # A plain connection, never begin(): a read must not take SQLite's write lock.
    with context.read() as connection:
        existing_run(connection, run_id)
        entries = journal_reads.read_journal(connection, run_id, max(from_sequence, 1), limit)
        # Cut short when the payloads pass the message budget; next_sequence goes on from there.
        page = next(batches(entries, limit), [])
        return JournalPage(page, journal_reads.journal_head(connection, run_id))


def verify(context: LedgerContext, run_id: str) -> Verification:
    check_identifier("run_id", run_id)
    with context.read() as connection:
        existing_run(connection, run_id)
        return verify_chain(journal_reads.iter_journal(connection, run_id), INTACT)


def pages_from(
    context: LedgerContext, run_id: str, from_sequence: int
) -> Iterator[list[StoredEntry]]:
    """Entries from ``from_sequence`` up to the current head, page by page (no empty page)."""
    next_sequence = max(from_sequence, 1)
    while True:
        page = read(context, run_id, next_sequence, FOLLOW_PAGE)
        if page.entries:
            yield page.entries
        if not page.next_sequence:
            return
        next_sequence = page.next_sequence


def batches(entries: Sequence[StoredEntry], limit: int) -> Iterator[list[StoredEntry]]:
    """``entries`` cut, in order, into runs of at most ``limit`` entries whose payloads stay
    within ``MESSAGE_PAYLOAD_BYTES`` (an entry larger than that goes alone)."""
    batch: list[StoredEntry] = []
    size = 0
    for entry in entries:
        length = len(entry.payload_json.encode("utf-8"))
        if batch and (len(batch) == limit or size + length > MESSAGE_PAYLOAD_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(entry)
        size += length
    if batch:
        yield batch
