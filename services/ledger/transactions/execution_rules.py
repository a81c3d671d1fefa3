"""The execution-time rules a claim and every later worker write repeat (ADR 0014): policy
revocation, actor loss, a changed source or unqualified profile, and unknown effects stop a
continuation; the claim also re-reads the ticket's rows and the run's recorded source (ADR
0045); nothing else does. Each check runs on the caller's connection, inside its
transaction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection

from services.ledger.domain.claim_custody import (
    check_run_started_source,
    check_ticket_unchanged,
)
from services.ledger.domain.execution import ExecutionRequestRecord, WorkerSource
from services.ledger.domain.execution_time_rules import (
    check_native_journal_unchanged,
    check_no_unknown_effects,
    check_operator_authority,
    check_policy_for_execution,
    check_profile_qualified,
    check_worker_source,
)
from services.ledger.domain.journal import (
    NATIVE_RESUME_KINDS,
    EntryKind,
    StoredEntry,
    payload_of,
    queued_at,
    unknown_tool_calls,
)
from services.ledger.domain.policy import PolicyRevision
from services.ledger.domain.recovery_authority import Authority, check_recovery_authority
from services.ledger.domain.runs import Run
from services.ledger.domain.tickets import StoredTicket
from services.ledger.repository import custody as custody_rows
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository import journal_reads
from services.ledger.repository import policy as policy_rows
from services.ledger.transactions.base import lock_policy
from shared.continuity.recovery import WORKFLOWS
from shared.runtime.errors import FailedPrecondition, NotFound

#: The policy switches a ticket of each version needs besides ``enabled``.
VERSION_SWITCHES: dict[int, tuple[str, ...]] = {2: ("allow_unavailable_source_observations",)}
#: Refusals of a claim while it enters the request's policy epoch (the recognition conditions:
#: an enabled finite-lease policy, a qualified profile, a catalogued epoch). Each leaves one
#: native admission-refusal record and makes the request ineligible for automatic scheduling.
EPOCH_REFUSALS = frozenset({"POLICY_REVOKED", "PROFILE_NOT_QUALIFIED", "POLICY_EPOCH_UNRECOGNIZED"})


def request_not_found(execution_request_id: str) -> NotFound:
    return NotFound(
        "EXECUTION_REQUEST_NOT_FOUND",
        f"no execution request {execution_request_id}",
        metadata={"execution_request_id": execution_request_id},
    )


def lock_for_fenced_write(
    connection: Connection, execution_request_id: str
) -> tuple[PolicyRevision, ExecutionRequestRecord]:
    """The lock order of every fenced write: the policy lock (shared, ADR 0014), then the request
    row. The statement that locks the request also reads the newest policy revision, which
    replaces the policy lock's own re-read: one statement fewer. A revision committed while
    this transaction waited for the policy lock makes it lock the newest one then (rare; the
    request row is held already, and a deadlock that could follow is detected and run again)."""
    policy = lock_policy(connection, shared=True, confirmed=False)
    found = request_rows.lock_execution_request_with_newest_policy(connection, execution_request_id)
    if found is None:
        raise request_not_found(execution_request_id)
    record, newest = found
    if newest != policy.revision:
        policy = lock_policy(connection, shared=True)
    return policy, record


@dataclass(frozen=True)
class Custody:
    """Who and what a request's execution rests on: its run, its ticket and its recoveries."""

    run: Run
    ticket: StoredTicket
    recovery_workflows: tuple[tuple[str, str], ...]  # (workflow, actor), oldest first

    @property
    def switches(self) -> tuple[str, ...]:
        names = VERSION_SWITCHES.get(self.ticket.version, ())
        for workflow, _ in self.recovery_workflows:
            # the switch the workflow's registry descriptor names (ADR 0013)
            switch = WORKFLOWS[workflow].policy_switch
            names += (switch,) if switch else ()
        return tuple(dict.fromkeys(names))


def read_custody(connection: Connection, record: ExecutionRequestRecord) -> Custody:
    """The request's run, ticket and recoveries in one statement, the run row locked: the
    journal writers' lock, always the last a transaction takes (existing_run_noting_entry)."""
    found = custody_rows.read_custody_rows(
        connection, record.run_id, record.request_id, record.execution_request_id
    )
    # A ticket names a registered run (its foreign key): no run row is no ticket either.
    if found is None or found.ticket is None:
        raise NotFound(
            "ADMISSION_NOT_FOUND",
            f"no admission request {record.request_id} for run {record.run_id}",
            metadata={"run_id": record.run_id, "request_id": record.request_id},
        )
    return Custody(
        run=found.run,
        ticket=found.ticket,
        recovery_workflows=tuple((r.workflow, r.actor) for r in found.recoveries),
    )


def check_policy(
    connection: Connection,
    policy: PolicyRevision,
    record: ExecutionRequestRecord,
    custody: Custody,
) -> None:
    """Every revision since the request was queued keeps the policy enabled and its switches on
    (``policy`` is the locked current revision)."""
    # The locked current revision is the newest: when it is the one the request was queued
    # under, nothing was written since and there is nothing to read (one statement fewer on
    # every fenced write in the common case).
    revisions = [policy]
    if policy.revision > record.policy_revision:
        revisions = policy_rows.revisions_after(connection, record.policy_revision) or revisions
    check_policy_for_execution(revisions, record.policy_revision, custody.switches)


def check_actors(authority: Authority, record: ExecutionRequestRecord, custody: Custody) -> None:
    """The ticket's operator, and each recovery's actor, still hold the roles they needed."""
    for workflow, actor in custody.recovery_workflows:
        check_recovery_authority(authority, workflow, actor, record.execution_request_id)
    operator = custody.ticket.operator_identity
    check_operator_authority(authority(operator), operator, record.request_id)


def check_fenced_write(
    connection: Connection,
    authority: Authority,
    policy: PolicyRevision,
    record: ExecutionRequestRecord,
    presented: WorkerSource | None,
    *,
    dispatches: bool = True,
    beside: tuple[EntryKind, ...] = (),
    from_claim: frozenset[EntryKind] = frozenset(),
) -> tuple[Custody, EffectsRead]:
    """Every rule a worker write after the claim repeats (command, own journal record,
    completion): the policy since the request was queued, the source and profile, no new unknown
    effect and, for a write that dispatches something new (``dispatches``: a command, a model
    request or tool record; not a completion), the operator's and each recovery actor's
    authority. The custody, and the effects read with the run's head (sequence, hash) the write
    appends after and the entries of the kinds ``beside`` and ``from_claim``
    (:func:`read_effects`): the run row is locked from the custody read on, so the head cannot
    move before the write."""
    custody = read_custody(connection, record)
    check_policy(connection, policy, record, custody)
    check_source(custody, presented)
    if dispatches:
        check_actors(authority, record, custody)
    effects = read_effects(connection, record, custody, beside=beside, from_claim=from_claim)
    judge_effects(effects, record)
    return custody, effects


def check_source(custody: Custody, presented: WorkerSource | None) -> None:
    """The profile is still qualified and, when the worker presents what it executes now, that is
    still the run's attempt, source, configuration and profile."""
    if presented is None:
        check_profile_qualified(custody.run)
    else:
        check_worker_source(custody.run, presented, "WORKER_SOURCE_CHANGED")


_UNPARSED = object()


@dataclass(frozen=True)
class EffectsRead:
    """What the unknown-effects rule reads, in one statement under the run row's lock: the
    entries it judges (ownership claims, request events and tool outcomes since the ticket's
    ownership claim), the run's head, and the entries of the kinds a write asked for beside them
    (``beside``, from the run's first entry on: a command charge's command ledger, a claim's
    ``run_started``) and with them (``from_claim``, judged or not, from the ticket's ownership
    claim on: a completion's certification), each list in sequence order."""

    judged: list[StoredEntry]
    head: tuple[int, str]
    beside: list[StoredEntry]
    from_claim: list[StoredEntry] = field(default_factory=list)
    #: The judged entries' payloads by sequence, each parsed once: the rules of one write read
    #: them several times (a claim judges effects, the native journal and custody), and rows
    #: read under the run row's lock do not change within the transaction.
    _payloads: dict[int, Any] = field(default_factory=dict, compare=False, repr=False)
    _queued: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def payload(self, entry: StoredEntry) -> Any:
        """``entry``'s payload (an entry of this read), parsed at most once."""
        found = self._payloads.get(entry.sequence, _UNPARSED)
        if found is _UNPARSED:
            found = self._payloads[entry.sequence] = payload_of(entry)
        return found

    def queued_at(self, execution_request_id: str) -> int:
        """:func:`queued_at` of the judged entries, found once."""
        found = self._queued.get(execution_request_id)
        if found is None:
            found = self._queued[execution_request_id] = queued_at(
                self.judged, execution_request_id, self.payload
            )
        return found

    def newest_beside(self, kind: EntryKind) -> StoredEntry | None:
        found = [entry for entry in self.beside if entry.kind == kind.value]
        return found[-1] if found else None


def read_effects(
    connection: Connection,
    record: ExecutionRequestRecord,
    custody: Custody,
    *,
    beside: tuple[EntryKind, ...] = (),
    from_claim: frozenset[EntryKind] = frozenset(),
    native: bool = False,
) -> EffectsRead:
    """:class:`EffectsRead` of the request's run. Everything that queued the request, and so
    every outcome that counts, is at or after the ticket's ownership claim: the judged entries
    start there, not at the run's first entry. ``native`` (the claim): every native resume
    kind is judged too (:func:`judge_native_journal`), in the same statement. ``from_claim``:
    the kinds read from the ownership claim on in the same index range (the judged kinds among
    them are not read twice)."""
    judged_kinds: tuple[EntryKind, ...] = (
        EntryKind.OWNERSHIP_CLAIM,
        EntryKind.REQUEST_EVENT,
        EntryKind.TOOL_OUTCOME,
    )
    ticket = custody.ticket
    from_sequence = ticket.claim_sequence
    if native:
        # and the ticket's settlement, adjacent before its ownership claim (judge_custody)
        judged_kinds += (*_NATIVE_JUDGED, EntryKind.MIGRATION_SETTLEMENT)
        from_sequence = min(ticket.settlement_sequence, ticket.claim_sequence)
    # sorted: the statement is built once per list of kinds (repository/journal_reads.py:_of_kinds)
    added = sorted(from_claim.difference(judged_kinds, beside), key=lambda kind: kind.value)
    entries, head = journal_reads.entries_of_kinds_and_head(
        connection,
        record.run_id,
        *judged_kinds,
        *added,
        from_sequence=from_sequence,
        from_start=beside,
    )
    claimed = _of_kinds_from(entries, from_claim, ticket.claim_sequence)
    if not beside and not added:
        return EffectsRead(entries, head, [], claimed)
    judged, asked = {kind.value for kind in judged_kinds}, {kind.value for kind in beside}
    return EffectsRead(
        [entry for entry in entries if entry.kind in judged],
        head,
        [entry for entry in entries if entry.kind in asked],
        claimed,
    )


def _of_kinds_from(
    entries: list[StoredEntry], kinds: frozenset[EntryKind], from_sequence: int
) -> list[StoredEntry]:
    """``entries`` of ``kinds`` from ``from_sequence`` on (none asked: none, nothing scanned)."""
    if not kinds:
        return []
    names = {kind.value for kind in kinds}
    return [entry for entry in entries if entry.kind in names and entry.sequence >= from_sequence]


def judge_effects(effects: EffectsRead, record: ExecutionRequestRecord) -> tuple[int, str]:
    """No tool call of the run has a new unknown durable outcome: one recorded after the request
    was queued (the admission or recovery that queued it judged every earlier one). Returns the
    run's head read with them."""
    since = effects.queued_at(record.execution_request_id)
    outcomes = [e for e in effects.judged if e.kind == EntryKind.TOOL_OUTCOME.value]
    check_no_unknown_effects(
        unknown_tool_calls(outcomes, since, effects.payload), record.execution_request_id
    )
    return effects.head


#: The native resume kinds a claim reads besides the judged ones (run_started it reads beside).
_NATIVE_JUDGED = tuple(
    sorted(
        NATIVE_RESUME_KINDS - {EntryKind.TOOL_OUTCOME, EntryKind.RUN_STARTED},
        key=lambda kind: kind.value,
    )
)


def judge_native_journal(effects: EffectsRead, record: ExecutionRequestRecord) -> None:
    """The run's native journal did not change after the request was queued: since the append
    that queued it, nothing but the ledger and the request's own lease holder may write (a
    native resume is refused meanwhile, ADR 0014 rule 3b), so a native entry there (written by
    a replica of an earlier release, or into the database directly) is a changed native ticket
    and stops the claim. ``effects`` must have been read with ``native`` and ``run_started``
    beside."""
    since = effects.queued_at(record.execution_request_id)
    resumes = {kind.value for kind in NATIVE_RESUME_KINDS}
    changed = sorted(
        (entry.sequence, entry.kind)
        for entry in (*effects.judged, *effects.beside)
        if entry.sequence > since and entry.kind in resumes
    )
    check_native_journal_unchanged(changed, record.execution_request_id)


def judge_custody(effects: EffectsRead, record: ExecutionRequestRecord, custody: Custody) -> None:
    """The ticket and its settlement rows are still what the request was admitted against, and
    every ``run_started`` still records the run's source (``domain/claim_custody.py``).
    ``effects`` must have been read with ``native`` and ``run_started`` beside."""
    since = effects.queued_at(record.execution_request_id)
    check_ticket_unchanged(
        custody.ticket, record, custody.run, effects.judged, since, effects.payload
    )
    starts = [e for e in effects.beside if e.kind == EntryKind.RUN_STARTED.value]
    check_run_started_source(custody.run, starts, record.execution_request_id, effects.payload)


def check_effects(
    connection: Connection, record: ExecutionRequestRecord, custody: Custody
) -> tuple[int, str]:
    """:func:`read_effects` and :func:`judge_effects`: the run's head, when no new unknown effect
    stops the request."""
    return judge_effects(read_effects(connection, record, custody), record)


def stop_reasons(checks: list[Callable[[], object]]) -> list[str]:
    """The reason of each check that refuses, in order (a failure report records them rather than
    being refused: refusing it would strand the claim until a reconciliation)."""
    reasons: list[str] = []
    for check in checks:
        try:
            check()
        except FailedPrecondition as refused:
            reasons.append(refused.reason)
    return reasons
