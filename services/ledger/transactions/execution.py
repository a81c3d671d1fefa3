"""Worker claims under fenced leases (11), fenced worker writes (12) and the command ledger
(13), plus reads of execution requests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial

from sqlalchemy import Connection

from services.ledger.domain.commands import CommandLedger, RecordedCommand
from services.ledger.domain.execution import (
    ExecutionRequestRecord,
    RequestState,
    WorkerSource,
    as_read,
    check_not_expired,
    check_worker_write,
    claimed,
    finished,
    states_to_read,
)
from services.ledger.domain.execution_time_rules import check_profile_digest, check_worker_source
from services.ledger.domain.journal import EntryKind, StoredEntry
from services.ledger.domain.owner_instance import OwnerInstance
from services.ledger.domain.policy_epochs import recognize_for_execution
from services.ledger.domain.recovery_authority import Authority
from services.ledger.domain.runs import check_identifier
from services.ledger.repository import execution_requests as request_rows
from services.ledger.repository import journal_reads
from services.ledger.transactions.base import (
    LedgerContext,
    append_entry,
    existing_run,
    insert_entries,
    retry_on_unique_conflict,
    seal_after,
)
from services.ledger.transactions.execution_rules import (
    EPOCH_REFUSALS,
    check_actors,
    check_effects,
    check_fenced_write,
    check_policy,
    check_source,
    judge_custody,
    judge_effects,
    judge_native_journal,
    lock_for_fenced_write,
    read_custody,
    read_effects,
    request_not_found,
    stop_reasons,
)
from services.ledger.transactions.execution_stops import record_admission_refusal
from shared.continuity.canonical import is_digest
from shared.runtime.errors import (
    Conflict,
    FailedPrecondition,
    field_invalid,
    field_required,
)


def existing_request(
    connection: Connection, execution_request_id: str, *, for_update: bool = False
) -> ExecutionRequestRecord:
    record = request_rows.get_execution_request(
        connection, execution_request_id, for_update=for_update
    )
    if record is None:
        raise request_not_found(execution_request_id)
    return record


def get(context: LedgerContext, execution_request_id: str) -> ExecutionRequestRecord:
    return read_with_time(context, execution_request_id)[0]


def read_with_time(
    context: LedgerContext, execution_request_id: str
) -> tuple[ExecutionRequestRecord, datetime]:
    """The request as it reads now, and the ledger's time of that read: what a worker reading
    back its claim counts the rest of the lease from (ADR 0057)."""
    with context.read() as connection:
        stored = existing_request(connection, execution_request_id)
        now = context.clock()
        return as_read(stored, now), now


def list_for_run(
    context: LedgerContext, run_id: str, states: tuple[RequestState, ...]
) -> tuple[list[ExecutionRequestRecord], datetime]:
    """The run's requests as they read now, and the ledger's time of that read: what a reader
    showing what is left of a lease counts from (ADR 0057)."""
    check_identifier("run_id", run_id)
    now = context.clock()
    with context.read() as connection:
        existing_run(connection, run_id)
        stored = request_rows.list_execution_requests(connection, run_id, states_to_read(states))
    read = [as_read(record, now) for record in stored]
    return [record for record in read if not states or record.state in states], now


@retry_on_unique_conflict
def claim(
    context: LedgerContext,
    authority: Authority,
    execution_request_id: str,
    worker: str,
    presented: WorkerSource,
    owner_instance: OwnerInstance | None = None,
) -> tuple[ExecutionRequestRecord, StoredEntry]:
    """A worker claims a queued continuation after the current checks are repeated; the claimed
    request and its ``worker_claimed`` entry. A refusal while entering the request's policy epoch
    also leaves, in its own transaction, the one native admission-refusal record of the request.
    The claiming process (``owner_instance``), when given, is recorded on ``worker_claimed``."""
    if owner_instance is not None:
        owner_instance.validate()
    if presented.profile_digest and not is_digest(presented.profile_digest):
        raise field_invalid(
            "profile_digest", "must be sha256:<64 hex>", "profile_digest must be sha256:<64 hex>"
        )
    try:
        return _claim(context, authority, execution_request_id, worker, presented, owner_instance)
    except FailedPrecondition as refused:
        if refused.reason in EPOCH_REFUSALS:
            record_admission_refusal(context, execution_request_id, refused, worker)
        raise


def _claim(
    context: LedgerContext,
    authority: Authority,
    execution_request_id: str,
    worker: str,
    presented: WorkerSource,
    owner_instance: OwnerInstance | None,
) -> tuple[ExecutionRequestRecord, StoredEntry]:
    with context.engine.begin() as connection:
        # 11.1 take the policy lock and lock the request row
        policy, record = lock_for_fenced_write(connection, execution_request_id)
        # 11.2 only a queued request is claimed; a claimed one is never requeued, an expired
        # one keeps the reason its lease gives
        if record.state is RequestState.EXPIRED:
            check_not_expired(record, context.clock())
        if record.state is not RequestState.QUEUED:
            raise FailedPrecondition(
                "EXECUTION_REQUEST_NOT_QUEUED",
                f"execution request is {record.state.value}; claimed requests are never requeued",
                metadata={"state": record.state.value},
            )
        # 11.3 the lease must not have expired
        check_not_expired(record, context.clock())
        custody = read_custody(connection, record)
        # what 11.5b and 11.5d judge, read in one statement under the run row's lock
        effects = read_effects(
            connection, record, custody, beside=(EntryKind.RUN_STARTED,), native=True
        )
        # 11.4 no policy revision since the request was queued revoked it
        check_policy(connection, policy, record, custody)
        # 11.5 the presented attempt, source, configuration and profile are the run's
        run = custody.run
        check_worker_source(run, presented)
        # 11.5a the worker's installed code is the code the profile qualifies, when it says
        check_profile_digest(run, presented)
        # 11.5b the run's adopted checkpoint-mode epoch, recognized in the execution context
        recognize_for_execution(
            run, policy, effects.newest_beside(EntryKind.RUN_STARTED), effects.payload
        )
        # 11.5c the ticket's operator and each recovery's actor still hold their authority
        check_actors(authority, record, custody)
        # 11.5d no tool call of the run has an unknown durable outcome
        head = judge_effects(effects, record)
        # 11.5e the run's native journal did not change after the request was queued
        judge_native_journal(effects, record)
        # 11.5f the ticket and its settlement rows are the ones admitted, and every run_started
        # still records the run's source
        judge_custody(effects, record, custody)
        # 11.6 generation 0 -> 1, the owner is recorded, worker_claimed is appended
        updated = claimed(record, worker, context.now())
        # the request's change and the run's listing change are written with the entry
        entry = append_entry(
            context,
            connection,
            record.run_id,
            EntryKind.WORKER_CLAIMED,
            {
                "execution_request_id": record.execution_request_id,
                "lease_generation": updated.lease_generation,
                "attempt_id": record.attempt_id,
                **({"owner_instance": owner_instance.as_payload()} if owner_instance else {}),
                **(
                    {"profile_digest": presented.profile_digest} if presented.profile_digest else {}
                ),
                # a request a typed refusal made ineligible is claimed only by an operator
                # naming it: the entry records that this claim scheduled it again (rule 3a)
                **(
                    {"admission_refusal": record.admission_refusal}
                    if record.admission_refusal
                    else {}
                ),
            },
            worker,
            request=updated,
            head=head,
        )
        return updated, entry


@retry_on_unique_conflict
def finish(
    context: LedgerContext,
    execution_request_id: str,
    worker: str,
    generation: int,
    outcome: RequestState,
    reason: str = "",
    presented: WorkerSource | None = None,
) -> ExecutionRequestRecord:
    """Complete or fail a claimed request under the current generation. A completion is refused
    when a stop condition holds (revocation, a changed source or profile, an unknown effect); a
    failure is the worker's report that it stopped, so it is recorded with those conditions
    named (``stop_reasons``) instead of refused."""
    with context.engine.begin() as connection:
        policy, record = lock_for_fenced_write(connection, execution_request_id)
        # 12 claimed, current generation, the caller owns it, the lease is in time
        check_worker_write(record, worker, generation, context.clock())
        custody = read_custody(connection, record)
        checks: list[Callable[[], object]] = [
            partial(check_policy, connection, policy, record, custody),
            partial(check_source, custody, presented),
            partial(check_effects, connection, record, custody),
        ]
        stopped: list[str] = []
        if outcome is RequestState.COMPLETED:
            for check in checks:
                check()
        else:
            stopped = stop_reasons(checks)
        updated = finished(record, outcome, context.now())
        if outcome is RequestState.COMPLETED:
            kind, payload = EntryKind.REQUEST_EVENT, {"event": "completed"}
        else:
            kind, payload = EntryKind.REQUEST_FAILED, {"reason": reason}
            if stopped:
                payload["stop_reasons"] = stopped  # type: ignore[assignment]
        append_entry(
            context,
            connection,
            record.run_id,
            kind,
            {
                "execution_request_id": execution_request_id,
                "lease_generation": generation,
                **payload,
            },
            worker,
            request=updated,
        )
        return updated


@retry_on_unique_conflict
def record_command(
    context: LedgerContext,
    authority: Authority,
    execution_request_id: str,
    worker: str,
    generation: int,
    command_id: str,
    command_digest: str,
    presented: WorkerSource | None = None,
) -> RecordedCommand:
    """Charge one command before it runs."""
    check_identifier("command_id", command_id)
    if not is_digest(command_digest):
        raise field_invalid(
            "command_digest", "must be sha256:<64 hex>", "command_digest must be sha256:<64 hex>"
        )
    with context.engine.begin() as connection:
        policy, record = lock_for_fenced_write(connection, execution_request_id)
        # 12 a fenced write, which also repeats the execution-time rules of the claim
        check_worker_write(record, worker, generation, context.clock())
        # 13 dispatch re-checks the policy, source, the operator's and each recovery actor's
        # authority (as 11.5c) and unknown effects
        # The run's command_executed rows are read with the head, in one statement under the
        # run row's lock (no append, a native command_executed neither, commits in between):
        # the count below never misses a command the new entry follows.
        custody, effects = check_fenced_write(
            connection,
            authority,
            policy,
            record,
            presented,
            beside=(EntryKind.COMMAND_EXECUTED,),
        )
        run, head = custody.run, effects.head
        # 13 count distinct command ids in the run's retained command_executed rows
        usage = CommandLedger.from_entries(effects.beside)
        previous = usage.receipt(command_id)
        if previous is not None:
            # 13 a known id: its receipt (same digest) or COMMAND_ID_CONFLICT
            if previous.command_digest != command_digest:
                raise Conflict(
                    "COMMAND_ID_CONFLICT",
                    f"command {command_id} was recorded with a different command digest",
                    metadata={"command_id": command_id},
                )
            # 13 a fenced generation's receipt never satisfies this lease
            previous.check_satisfies(execution_request_id, generation)
            return RecordedCommand(previous.sequence, False, usage.used, run.spec.command_limit)
        # 13 at the limit the command is refused before it runs
        usage.check_room(run.spec.command_limit)
        entry = seal_after(
            context,
            record.run_id,
            EntryKind.COMMAND_EXECUTED,
            {
                "command_id": command_id,
                "command_digest": command_digest,
                "execution_request_id": execution_request_id,
                "lease_generation": generation,
            },
            worker,
            head,
        )
        insert_entries(context, connection, [entry])
        return RecordedCommand(
            entry.sequence, True, usage.used + 1, run.spec.command_limit, entry.hash
        )


def command_usage(context: LedgerContext, run_id: str) -> tuple[int, int]:
    """(used, limit) of the run's command ledger."""
    check_identifier("run_id", run_id)
    with context.read() as connection:
        run = existing_run(connection, run_id)
        usage = CommandLedger.from_entries(journal_reads.command_entries(connection, run_id))
        return usage.used, run.spec.command_limit


@retry_on_unique_conflict
def fail_unclaimed(
    context: LedgerContext, execution_request_id: str, worker: str, reason: str
) -> ExecutionRequestRecord:
    """The native failed receipt of a request that no worker claimed: queued at generation 0 →
    failed, with ``request_failed`` at ``lease_generation: 0``."""
    if not reason:
        raise field_required("reason")
    with context.engine.begin() as connection:
        record = existing_request(connection, execution_request_id, for_update=True)
        if record.state is not RequestState.QUEUED or record.lease_generation != 0:
            raise FailedPrecondition(
                "EXECUTION_REQUEST_NOT_QUEUED",
                f"execution request is {record.state.value} at generation "
                f"{record.lease_generation}; only an unclaimed queued request fails here",
                metadata={"state": record.state.value},
            )
        updated = finished(record, RequestState.FAILED, context.now())
        append_entry(
            context,
            connection,
            record.run_id,
            EntryKind.REQUEST_FAILED,
            {
                "execution_request_id": execution_request_id,
                "lease_generation": 0,
                "reason": reason,
                "claimed": False,
            },
            worker,
            request=updated,
        )
        return updated
