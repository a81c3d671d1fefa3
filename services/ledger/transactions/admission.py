"""The native admission transaction (docs/architecture.md, "One admission, step by step",
step 9) and reading a saved ticket back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection

from services.ledger.domain.admission import check_policy_for_admission, validate_admission
from services.ledger.domain.derived_envelope import JournalTurn, check_derived_envelope
from services.ledger.domain.execution import (
    ExecutionRequestRecord,
    as_read,
    bound_lease,
    execution_request_id,
    queued_request,
)
from services.ledger.domain.journal import EntryKind, StoredEntry
from services.ledger.domain.policy_epochs import admission_epoch_receipt
from services.ledger.domain.runs import check_identifier
from services.ledger.domain.tickets import StoredTicket
from services.ledger.repository import blobs as blob_rows
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository import tickets as ticket_rows
from services.ledger.repository.admission_journal import newest_entries_and_checkpoint
from services.ledger.repository.admissions import AdmittedRows, NewBlob
from services.ledger.repository.journal_reads import NewestEntries, newest_entries
from services.ledger.transactions.base import (
    LedgerContext,
    check_capacity,
    insert_admission,
    retry_on_unique_conflict,
    run_not_found,
    seal_after,
    stale_head,
)
from services.ledger.transactions.execution import existing_request
from services.ledger.transactions.execution_stops import Expiry
from shared.continuity.canonical import GENESIS_HASH, parse_json
from shared.continuity.commit_admission import CommitAdmission
from shared.continuity.derived_format import ADMITTED_DERIVED_CHECKPOINT_MEDIA_TYPE
from shared.continuity.idempotency import StoredAction, replay_or_conflict
from shared.continuity.timeutil import to_text
from shared.runtime.errors import (
    Conflict,
    DomainError,
    FailedPrecondition,
    NotFound,
    PreconditionViolation,
    ResourceExhausted,
)

# The kinds whose newest entry steps 9.5, 9.5b and 9.8 judge.
_JUDGED_KINDS = (
    EntryKind.RUN_STARTED,
    EntryKind.CHECKPOINT_STORED,
    EntryKind.MODEL_REQUEST_SENT,
    EntryKind.RESPONSE_CONSUMED,
)


@dataclass(frozen=True)
class Admission:
    """A saved ticket, its execution request as it is now, and whether this call created it."""

    ticket: StoredTicket
    execution_request: ExecutionRequestRecord
    created: bool
    #: The current member of the request chain (None: ``execution_request`` itself).
    current: ExecutionRequestRecord | None = None


def commit(context: LedgerContext, admission: CommitAdmission, expiry: Expiry) -> Admission:
    """Admit, or replay the identical earlier admission; refusals write nothing (``expiry``'s
    sweep is rolled back with them)."""
    validate_admission(admission)
    return _commit(context, admission, expiry)


@retry_on_unique_conflict
def _commit(context: LedgerContext, admission: CommitAdmission, expiry: Expiry) -> Admission:
    # If a concurrent transaction commits first (a unique constraint fires), the retry answers
    # as the second caller would: replay or conflict.
    with context.engine.begin() as connection:
        return _admit(context, connection, admission, expiry)


def _admit(
    context: LedgerContext, connection: Connection, admission: CommitAdmission, expiry: Expiry
) -> Admission:
    # Before the lock: the journal rows and stored bytes the checks judge (they decide nothing
    # yet; what the policy lock covers is kept short, since a policy write waits for it).
    early = _read_before_lock(connection, admission)
    # 9.1 take the policy lock, shared (ADR 0049, 0067): a policy write cannot commit until
    # this one does, but admissions do not wait for each other or for the fenced worker writes.
    # What else an exclusive lock kept steady, they get elsewhere: the run's own rows from the
    # journal chain (9.10 inserts after the head 9.2's read returned with them, so a concurrent
    # writer of the same run makes one of the two fail and run again), the pending cap from
    # its conditional statement (9.12). Queued requests whose lease ran out expire first.
    policy, now_text = expiry.lock_policy_row(connection, shared=True)
    # The rows 9.2 to 9.7 decide on before the journal, in one read: the tickets under the
    # request id or for the consumed graph, the run and its head, and the queue counts; and
    # what confirms the lock (the newest revision, the leases due)
    reads = _admission_reads(connection, admission, now_text)
    if reads.run is None or reads.newest_policy_revision != policy.revision or reads.due:
        # A policy write committed while this waited, or leases ran out (or no run, so nothing
        # was counted): lock the newest revision and sweep first, as 9.1 says, then read again.
        policy = expiry.lock_policy(connection, shared=True)
        reads = _admission_reads(connection, admission, now_text)
    # 9.2 and 9.3: replay an identical repeat, refuse anything else, one ticket per graph
    replayed = _replay_or_refuse_admitted(connection, admission, reads)
    if replayed is not None:
        return replayed
    if reads.run is None:
        raise run_not_found(admission.run_id)
    run = reads.run
    # 9.4 the policy is enabled, still the candidate's revision, and allows the version
    check_policy_for_admission(policy, admission.policy_revision, admission.version)
    # The journal rows steps 9.5 and 9.5b judge: the last entry (the head) and the newest entry
    # of each kind they name, as read before the lock while the head is still the one they end
    # with (the journal only grows, each entry bound to the one before), else read again.
    newest = early.newest
    if _head_of(newest) != reads.head:
        newest = newest_entries(connection, run.spec.run_id, _JUDGED_KINDS)
    last = newest.last
    # 9.5 re-check the head (the last entry is the head: one read serves both checks)
    head = _head_of(newest)
    if head[1] != admission.expected_head_hash:
        raise stale_head(run.spec.run_id, admission.expected_head_hash, *head)
    # 9.5 at that head the run is held, and its consumed response is the one named
    _check_held_on_consumed_response(admission, last, _payloads_of(newest, early))
    # 9.5b the run's adopted checkpoint-mode policy epoch, recognized only in this continuity
    # preparation context (shared/continuity/policy_epochs.py), and the receipt binding both epochs
    policy_epochs = admission_epoch_receipt(
        run,
        policy,
        run_started=newest.newest(EntryKind.RUN_STARTED),
        checkpoint_stored=newest.newest(EntryKind.CHECKPOINT_STORED),
        response_consumed=newest.newest(EntryKind.RESPONSE_CONSUMED),
    )
    # 9.6 and 9.7 on the counts read with the run
    counts = reads.counts
    # 9.6 no queued or claimed execution request for the run
    if counts.run_outstanding:
        raise FailedPrecondition(
            "CLAIM_OUTSTANDING",
            "the run already has a queued or executing claim",
            metadata={"execution_request_id": counts.run_outstanding},
        )
    # 9.7 the queue caps, as counted by 9.2's read; the pending cap again, atomically, by the
    # statement that writes the rows (repository.admissions, ADR 0049)
    check_capacity(policy, per_run=counts.run_tickets, pending=counts.pending)
    # 9.8 the derived checkpoint's envelope continues the journal's consumed turn (its digest
    # was checked by validate()): judged before the lock on the same rows, or now; bytes sent
    # are stored with the rest below, bytes not sent must be stored already
    if newest is early.newest and early.envelope_judged:
        if early.envelope_refusal is not None:
            raise early.envelope_refusal
    else:
        _check_envelope(
            admission,
            _payloads_of(newest, early),
            lambda digest: _stored(connection, early, digest),
        )
    if (
        not admission.derived_checkpoint
        and admission.derived_checkpoint_digest not in early.blobs
        and not blob_rows.blob_exists(connection, admission.derived_checkpoint_digest)
    ):
        raise FailedPrecondition(
            "DERIVED_CHECKPOINT_MISSING",
            "send the derived checkpoint bytes with the admission",
            metadata={"digest": admission.derived_checkpoint_digest},
        )
    # 9.9 bound the lease
    now = context.clock()
    bounds = bound_lease(admission.valid_for_seconds, policy.settings.window_seconds, run, now)
    lease_seconds = bounds.granted_seconds
    request_id = execution_request_id(run.spec.run_id, admission.request_id)
    actor = admission.operator_identity
    # 9.10 the migration settlement and, adjacent to it, the ownership claim
    # (both sealed here after the head read in 9.5, then inserted by one statement)
    settlement = seal_after(
        context,
        run.spec.run_id,
        EntryKind.MIGRATION_SETTLEMENT,
        {
            "request_id": admission.request_id,
            "version": admission.version,
            "candidate_digest": admission.digests["candidate_digest"],
            "derived_checkpoint_digest": admission.derived_checkpoint_digest,
            "witness_digest": admission.witness_digest,
            "consumed_response_digest": admission.consumed_response_digest,
            "policy_revision": policy.revision,
            "policy_epochs": policy_epochs,
        },
        actor,
        head,
    )
    claim = seal_after(
        context,
        run.spec.run_id,
        EntryKind.OWNERSHIP_CLAIM,
        {
            "request_id": admission.request_id,
            "execution_request_id": request_id,
            "attempt_id": run.spec.attempt_id,
            "lease_seconds": lease_seconds,
        },
        actor,
        (settlement.sequence, settlement.hash),
    )
    # 9.11 the queued execution request: derived checkpoint, original attempt, generation 0
    created_at = to_text(now)
    record = queued_request(
        execution_request_id=request_id,
        run_id=run.spec.run_id,
        attempt_id=run.spec.attempt_id,
        request_id=admission.request_id,
        checkpoint_digest=admission.derived_checkpoint_digest,
        policy_revision=policy.revision,
        lease_seconds=lease_seconds,
        now=now,
    )
    # 9.12 the ticket
    ticket = StoredTicket(
        run_id=run.spec.run_id,
        request_id=admission.request_id,
        operator_identity=actor,
        settlement_sequence=settlement.sequence,
        claim_sequence=claim.sequence,
        digests=dict(admission.digests),
        policy_revision=policy.revision,
        version=admission.version,
        derived_checkpoint_digest=admission.derived_checkpoint_digest,
        request_content_digest=admission.request_content_digest,
        execution_request_id=request_id,
        created_at=created_at,
        lease_bounds=bounds,
    )
    # 9.8 to 9.12 written in one go (repository.admissions): the derived checkpoint's bytes
    # (stored bytes under a digest never change, so an existing row stays), the entries, the
    # request and the ticket
    derived = admission.derived_checkpoint
    blob = NewBlob(
        admission.derived_checkpoint_digest,
        derived,
        ADMITTED_DERIVED_CHECKPOINT_MEDIA_TYPE,
        created_at,
    )
    rows = AdmittedRows(
        entries=(settlement, claim),
        request=record,
        ticket=ticket,
        consumed_response_digest=admission.consumed_response_digest,
        blob=blob if derived else None,
        pending_limit=policy.settings.pending_ticket_limit,
    )
    raced = _insert_or_answer_as_second(context, connection, admission, rows, now_text)
    if raced is not None:
        return raced
    return Admission(ticket, record, created=True)


def _insert_or_answer_as_second(
    context: LedgerContext,
    connection: Connection,
    admission: CommitAdmission,
    rows: AdmittedRows,
    now: str,
) -> Admission | None:
    """Write the admission's rows (None), or answer as the second of two admissions of this
    request id or graph. The last place under the cap may go to a concurrent admission that
    committed while this statement waited for it; if that one admitted this request id or
    consumed graph, the answer is the one any later caller gets (9.2, 9.3), not the cap: no
    order of the two makes the graph's second admission a queue refusal (found by the model,
    tests/model/race_rules.py)."""
    try:
        insert_admission(context, connection, rows)
    except ResourceExhausted:
        raced = _replay_or_refuse_admitted(
            connection, admission, _admission_reads(connection, admission, now)
        )
        if raced is None:
            raise
        return raced
    return None


def _replay_or_refuse_admitted(
    connection: Connection, admission: CommitAdmission, reads: ticket_rows.AdmissionReads
) -> Admission | None:
    """9.2 apply idempotency again: replay an identical repeat, refuse anything else; 9.3 one
    ticket per consumed graph, under any request id or identity. None: neither is admitted."""
    stored, taken = reads.by_request, reads.by_graph
    if stored is not None:
        replay_or_conflict(
            id_field="request_id",
            action_id=admission.request_id,
            stored=StoredAction(
                stored.ticket.operator_identity, stored.ticket.request_content_digest
            ),
            identity=admission.operator_identity,
            content_digest=admission.request_content_digest,
        )
        record = existing_request(connection, stored.ticket.execution_request_id)
        return Admission(stored.ticket, record, created=False)
    if taken is not None:
        raise Conflict(
            "CONSUMED_GRAPH_ALREADY_ADMITTED",
            "this consumed response already has a continuity ticket",
            metadata={"run_id": taken.ticket.run_id, "request_id": taken.ticket.request_id},
        )
    return None


def _admission_reads(
    connection: Connection, admission: CommitAdmission, now: str
) -> ticket_rows.AdmissionReads:
    return ticket_rows.admission_reads(
        connection,
        admission.run_id,
        admission.request_id,
        admission.consumed_response_digest,
        now,
    )


@dataclass(frozen=True)
class _EarlyReads:
    """What an admission reads before it takes the policy lock: the journal's newest entries
    (as :func:`newest_entries`) and the stored bytes they name, by digest; and the
    envelope check of step 9.8 on them, which needs nothing else."""

    newest: NewestEntries
    #: The payloads of ``newest``'s judged entries, each parsed once
    payloads: _Payloads
    #: The blobs found (a stored blob never changes and is never removed, so one found before
    #: the lock stands; one not found is looked for again under it).
    blobs: dict[str, bytes]
    #: Whether every byte the envelope check needs was found, so that it was judged here
    envelope_judged: bool
    #: Its refusal, raised at 9.8 if these rows stand (None: it passed, or was not judged)
    envelope_refusal: DomainError | None


def _read_before_lock(connection: Connection, admission: CommitAdmission) -> _EarlyReads:
    """The newest entries with the bytes of the source checkpoint their model_request_sent
    names (one statement), the derived checkpoint's when its bytes were not sent (one more),
    and the envelope check on them when they hold every byte it needs."""
    newest, blobs = newest_entries_and_checkpoint(connection, admission.run_id, _JUDGED_KINDS)
    payloads = _Payloads(newest)
    checkpoint = payloads.checkpoint_digest()
    derived = admission.derived_checkpoint_digest
    if not admission.derived_checkpoint and derived and derived not in blobs:
        blobs.update(
            (digest, content)
            for digest, (content, _) in blob_rows.get_blobs(connection, [derived]).items()
        )
    judged = checkpoint in blobs and (bool(admission.derived_checkpoint) or derived in blobs)
    refusal = None
    if judged:
        try:
            _check_envelope(admission, payloads, blobs.get)
        except DomainError as refused:
            refusal = refused
    return _EarlyReads(newest, payloads, blobs, judged, refusal)


def _stored(connection: Connection, early: _EarlyReads, digest: str) -> bytes | None:
    return early.blobs.get(digest) or blob_rows.get_content(connection, digest)


def _head_of(newest: NewestEntries) -> tuple[int, str]:
    last = newest.last
    return (last.sequence, last.hash) if last is not None else (0, GENESIS_HASH)


class _Payloads:
    """The payloads of the judged kinds' newest entries, each parsed at most once: steps 9.5 and
    9.8 read the newest ``model_request_sent`` and ``response_consumed`` several times. Rows read
    once never change within the transaction (the journal only grows; a re-read is a new
    ``NewestEntries`` and gets its own)."""

    __slots__ = ("_parsed", "newest")

    def __init__(self, newest: NewestEntries) -> None:
        self.newest = newest
        self._parsed: dict[EntryKind, dict[str, object]] = {}

    def of(self, kind: EntryKind) -> dict[str, object]:
        """The newest ``kind`` entry's payload ({} for none, or for one that is no object)."""
        payload = self._parsed.get(kind)
        if payload is None:
            entry = self.newest.newest(kind)
            parsed = parse_json(entry.payload_json) if entry is not None else {}
            payload = self._parsed[kind] = parsed if isinstance(parsed, dict) else {}
        return payload

    def checkpoint_digest(self) -> str:
        """The source checkpoint the newest model_request_sent names ("" for none)."""
        return str(self.of(EntryKind.MODEL_REQUEST_SENT).get("checkpoint_digest") or "")


def _payloads_of(newest: NewestEntries, early: _EarlyReads) -> _Payloads:
    """The parsed payloads of ``newest``: those parsed before the lock when it is those rows."""
    return early.payloads if newest is early.newest else _Payloads(newest)


def _check_envelope(
    admission: CommitAdmission, payloads: _Payloads, stored: Callable[[str], bytes | None]
) -> None:
    """9.8: the derived checkpoint (the bytes sent, or those stored under its digest) names the
    source checkpoint, raw response, consumption time, version, witness and limits of the rows
    this transaction read (services/ledger/domain/derived_envelope.py). ``stored``: the bytes
    stored under a digest (None: none)."""
    content = admission.derived_checkpoint or stored(admission.derived_checkpoint_digest)
    if content is None:
        return  # not sent and not stored: refused as DERIVED_CHECKPOINT_MISSING just after
    consumed = payloads.of(EntryKind.RESPONSE_CONSUMED)
    checkpoint_digest = payloads.checkpoint_digest()
    check_derived_envelope(
        content,
        admission.derived_checkpoint_digest,
        turn=JournalTurn(
            checkpoint_digest=checkpoint_digest,
            checkpoint=stored(checkpoint_digest),
            response_digest=str(consumed.get("response_digest") or ""),
            consumed_at=str(consumed.get("consumed_at") or ""),
        ),
        version=admission.version,
        witness_digest=admission.witness_digest,
    )


def _check_held_on_consumed_response(
    admission: CommitAdmission, last: StoredEntry | None, payloads: _Payloads
) -> None:
    """The ledger does not trust the caller's ``consumed_response_digest``, which keys the
    one-ticket-per-consumed-graph rule: the run must be held (its last entry, ``last``, is
    ``run_held``), and its newest ``response_consumed`` must name that response."""
    run_id = admission.run_id
    if last is None or last.kind != EntryKind.RUN_HELD.value:
        found = last.kind if last is not None else "nothing"
        raise FailedPrecondition(
            "RUN_NOT_HELD",
            f"the run's last journal entry is {found}, not run_held",
            metadata={"run_id": run_id, "last_entry_kind": last.kind if last else ""},
            precondition_violations=[
                PreconditionViolation("RUN_HELD", f"runs/{run_id}/journal", f"last is {found}")
            ],
        )
    journal_digest = payloads.of(EntryKind.RESPONSE_CONSUMED).get("response_digest")
    if journal_digest != admission.consumed_response_digest:
        recorded = journal_digest if isinstance(journal_digest, str) else ""
        raise FailedPrecondition(
            "CONSUMED_RESPONSE_MISMATCH",
            "consumed_response_digest is not the response the run's journal records as consumed",
            metadata={
                "run_id": run_id,
                "consumed_response_digest": admission.consumed_response_digest,
                "journal_response_digest": recorded,
            },
            precondition_violations=[
                PreconditionViolation(
                    "CONSUMED_RESPONSE",
                    "consumed_response_digest",
                    f"the journal's newest response_consumed names {recorded or 'no response'}",
                )
            ],
        )


def get(context: LedgerContext, run_id: str, request_id: str) -> Admission:
    """The saved ticket and the current state of its execution request."""
    check_identifier("run_id", run_id)
    check_identifier("request_id", request_id)
    with context.read() as connection:
        stored = ticket_rows.get_ticket(connection, run_id, request_id)
        if stored is None:
            raise NotFound(
                "ADMISSION_NOT_FOUND",
                f"no admission request {request_id} for run {run_id}",
                metadata={"run_id": run_id, "request_id": request_id},
            )
        record = existing_request(connection, stored.ticket.execution_request_id)
        chain = [
            member
            for member in request_rows.list_execution_requests(connection, run_id)
            if member.request_id == request_id
        ]
        # Oldest first: a reconciliation retry is created after the request it replaces.
        current = chain[-1] if chain else record
    now = context.clock()
    return Admission(
        stored.ticket, as_read(record, now), created=False, current=as_read(current, now)
    )
