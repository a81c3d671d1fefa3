"""The execution_requests table: queued continuations and their fenced leases."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from sqlalchemy import Connection, bindparam, func, insert, select, text, update

from services.ledger.domain.execution import ExecutionRequestRecord, RequestState
from services.ledger.repository.driver import DriverStatement, execute, fetch
from services.ledger.repository.policy import NEWEST_POLICY_REVISION, SCHEMA_KEY
from services.ledger.repository.runs import note_request
from services.ledger.schema import execution_requests, pending_slots, queue_depth

# Built once (building and cache-keying a statement per call cost more than running it).
_INSERT = insert(execution_requests)
_GET = select(execution_requests).where(
    execution_requests.c.execution_request_id == bindparam("execution_request_id")
)
_GET_FOR_UPDATE = _GET.with_for_update()
# The request row locked, and the newest policy revision (read after the caller's policy lock,
# so it tells whether the revision that lock holds is still the newest): one round trip.
_LOCK_WITH_NEWEST_POLICY = DriverStatement(
    _GET.add_columns(NEWEST_POLICY_REVISION.label("newest_policy_revision")).with_for_update(
        of=execution_requests
    )
)
#: The request's state, generation, owner and update time (every fenced write's change;
#: parameters: :func:`request_change_parameters`). ``r_``-prefixed: the journal's one-statement
#: write carries it beside the run row's update, whose parameters are ``b_``-prefixed
#: (repository.journal).
REQUEST_CHANGE = (
    update(execution_requests)
    .where(execution_requests.c.execution_request_id == bindparam("r_execution_request_id"))
    .values(
        state=bindparam("r_state"),
        lease_generation=bindparam("r_lease_generation"),
        owner=bindparam("r_owner"),
        updated_at=bindparam("r_updated_at"),
        admission_refusal=bindparam("r_admission_refusal"),
    )
)
_UPDATE = DriverStatement(REQUEST_CHANGE)
_OF_RUN = (
    select(execution_requests)
    .where(execution_requests.c.run_id == bindparam("run_id"))
    .order_by(execution_requests.c.created_at, execution_requests.c.execution_request_id)
)
_IN_STATES = execution_requests.c.state.in_(bindparam("states", expanding=True))
# The run's requests in ``states``, oldest first.
_OF_RUN_IN_STATES = _OF_RUN.where(_IN_STATES)
#: How many requests are pending (queued or claimed) across all runs: the sum the database's
#: trigger keeps (migration 0010, ADR 0031), one index range however long the queue. It counts
#: what committed and what this transaction's own changes noted so far (apply_queue_depth_notes).
PENDING_COUNT = select(func.coalesce(func.sum(queue_depth.c.pending), 0))
_RELEASED = select(func.coalesce(func.sum(queue_depth.c.released), 0)).scalar_subquery()
#: The pending cap consumed by one conditional statement (parameter ``s_limit``, the policy's
#: pending_ticket_limit; ADR 0049): the counter row is updated, and so locked until the commit,
#: only while fewer than the limit are pending (entered - released, migration 0014). The
#: commit's trigger adds the request it queued to ``entered`` under that lock, so a concurrent
#: admission's statement waits for the commit and re-checks the new ``entered`` (READ
#: COMMITTED re-evaluates the condition on the row version it waited for). ``released`` is read
#: once, at the statement's start: a release committed meanwhile is missed, which can only
#: refuse, never admit one too many. No row: the cap is full.
TAKE_PENDING_SLOT = (
    update(pending_slots)
    .where(pending_slots.c.slot == 0, pending_slots.c.entered - _RELEASED < bindparam("s_limit"))
    .values(entered=pending_slots.c.entered)
    .returning(pending_slots.c.slot)
)
_TAKE_PENDING_SLOT = DriverStatement(TAKE_PENDING_SLOT)
_QUEUED_EXPIRING = (
    select(execution_requests)
    .where(
        execution_requests.c.state == RequestState.QUEUED.value,
        execution_requests.c.lease_expires_at <= bindparam("now"),
    )
    .order_by(execution_requests.c.lease_expires_at, execution_requests.c.execution_request_id)
)


def execution_request_from_row(row: object) -> ExecutionRequestRecord:
    return execution_request_from_values(dict(row._mapping))  # type: ignore[attr-defined]


def execution_request_from_values(values: dict[str, Any]) -> ExecutionRequestRecord:
    values["state"] = RequestState(values["state"])
    values["admission_refusal"] = values["admission_refusal"] or ""
    return ExecutionRequestRecord(**values)


def request_values(record: ExecutionRequestRecord) -> dict[str, object]:
    """The row ``record`` is stored as, by column name."""
    values = asdict(record)
    values["state"] = record.state.value
    values["admission_refusal"] = record.admission_refusal or None
    return values


def insert_execution_request(connection: Connection, record: ExecutionRequestRecord) -> None:
    connection.execute(_INSERT, request_values(record))
    note_request(connection, record, queued_new=True)


def request_change_parameters(record: ExecutionRequestRecord) -> dict[str, object]:
    """The parameters of REQUEST_CHANGE that write ``record``'s changing columns."""
    return {
        "r_execution_request_id": record.execution_request_id,
        "r_state": record.state.value,
        "r_lease_generation": record.lease_generation,
        "r_owner": record.owner,
        "r_updated_at": record.updated_at,
        "r_admission_refusal": record.admission_refusal or None,
    }


def update_execution_request(
    connection: Connection, record: ExecutionRequestRecord, *, note_run: bool = True
) -> None:
    """Write the request's state, generation and owner; ``note_run`` false: the caller records
    the run's listing change itself (repository.journal writes the request with the entry that
    records its change, and the change with the entry's update of the run row)."""
    execute(connection, _UPDATE, request_change_parameters(record))
    if note_run:
        note_request(connection, record, queued_new=False)


def get_execution_request(
    connection: Connection, execution_request_id: str, *, for_update: bool = False
) -> ExecutionRequestRecord | None:
    query = _GET_FOR_UPDATE if for_update else _GET
    row = connection.execute(query, {"execution_request_id": execution_request_id}).first()
    return None if row is None else execution_request_from_row(row)


def lock_execution_request_with_newest_policy(
    connection: Connection, execution_request_id: str
) -> tuple[ExecutionRequestRecord, int] | None:
    """The request, row-locked, and the newest policy revision (None: no such request)."""
    rows = fetch(
        connection, _LOCK_WITH_NEWEST_POLICY, {"execution_request_id": execution_request_id}
    )
    if not rows:
        return None
    values = rows[0]
    newest = int(values.pop("newest_policy_revision"))
    return execution_request_from_values(values), newest


def list_execution_requests(
    connection: Connection, run_id: str, states: tuple[RequestState, ...] = ()
) -> list[ExecutionRequestRecord]:
    if not states:
        return [
            execution_request_from_row(row)
            for row in connection.execute(_OF_RUN, {"run_id": run_id})
        ]
    rows = connection.execute(
        _OF_RUN_IN_STATES, {"run_id": run_id, "states": [s.value for s in states]}
    )
    return [execution_request_from_row(row) for row in rows]


def queued_expiring_by(
    connection: Connection, now: str, *, lock: bool = True
) -> list[ExecutionRequestRecord]:
    """Queued requests whose lease expires at or before ``now`` (fixed-width UTC text compares
    in time order), oldest first; locked unless ``lock`` is false (a read-only look)."""
    query = _QUEUED_EXPIRING.with_for_update() if lock else _QUEUED_EXPIRING
    rows = connection.execute(query, {"now": now})
    return [execution_request_from_row(row) for row in rows]


#: The class of the transaction-scoped advisory lock the scheduled expiry sweep takes on
#: PostgreSQL, with the schema's key, so that one ledger replica of a schema at a time sweeps
#: (ADR 0039) and the ledgers of other schemas on the server sweep their own.
EXPIRY_SWEEP_CLASS = 0x45787069  # "Expi"
_TRY_SWEEP_LOCK = select(func.pg_try_advisory_xact_lock(EXPIRY_SWEEP_CLASS, SCHEMA_KEY))


def take_sweep_turn(connection: Connection) -> bool:
    """Whether this transaction may run the scheduled sweep: on PostgreSQL, whether it took the
    sweep's advisory lock without waiting (held until it ends; a replica that finds it taken
    skips this round); SQLite serves one process, whose one sweeper always may."""
    if connection.dialect.name != "postgresql":
        return True
    return bool(connection.execute(_TRY_SWEEP_LOCK).scalar_one())


def take_pending_slot(connection: Connection, limit: int) -> bool:
    """Whether a place under the pending cap ``limit`` was free, and is now this transaction's
    until it commits (TAKE_PENDING_SLOT). PostgreSQL writes an admission's rows and takes the
    place in one statement instead (repository.admissions)."""
    return bool(fetch(connection, _TAKE_PENDING_SLOT, {"s_limit": limit}))


def pending_count(connection: Connection) -> int:
    """The pending requests across all runs (PENDING_COUNT)."""
    return int(connection.execute(PENDING_COUNT).scalar_one())


# PostgreSQL notes a transaction's request changes in queue_depth when it commits (a deferred
# trigger: the counter row is locked only while committing). Setting the trigger IMMEDIATE runs
# the notes queued so far; DEFERRED again leaves the later ones to the commit.
_NOTES_NOW = text("SET CONSTRAINTS queue_depth_noted IMMEDIATE")
_NOTES_AT_COMMIT = text("SET CONSTRAINTS queue_depth_noted DEFERRED")


def apply_queue_depth_notes(connection: Connection) -> None:
    """Bring this transaction's request changes into PENDING_COUNT before it counts: a
    transaction that changes requests and then counts calls this in between (the lazy expiry
    sweep does). SQLite's trigger is immediate: nothing to do."""
    if connection.dialect.name == "postgresql":
        connection.execute(_NOTES_NOW)
        connection.execute(_NOTES_AT_COMMIT)


_COUNT_BY_STATE = (
    select(execution_requests.c.state, func.count())
    .where(_IN_STATES)
    .group_by(execution_requests.c.state)
)


def count_by_state(
    connection: Connection, states: tuple[RequestState, ...]
) -> dict[RequestState, int]:
    """How many execution requests are in each of ``states`` (0 for a state with none), in one
    statement: the metrics' queued / claimed gauges, read at scrape time, outside any lock (a
    scan of the requests in those states; the queue caps read PENDING_COUNT instead)."""
    counts = dict.fromkeys(states, 0)
    for state, count in connection.execute(_COUNT_BY_STATE, {"states": [s.value for s in states]}):
        counts[RequestState(state)] = int(count)
    return counts


def requeue_execution_request(connection: Connection, record: ExecutionRequestRecord) -> None:
    """A recovery queues the same request again: state, generation, owner and a new lease (and,
    for the read-only observation, its separate derived checkpoint)."""
    connection.execute(
        update(execution_requests)
        .where(execution_requests.c.execution_request_id == record.execution_request_id)
        .values(
            checkpoint_digest=record.checkpoint_digest,
            state=record.state.value,
            policy_revision=record.policy_revision,
            lease_generation=record.lease_generation,
            lease_seconds=record.lease_seconds,
            lease_expires_at=record.lease_expires_at,
            owner=record.owner,
            updated_at=record.updated_at,
        )
    )
    # a requeued request is the run's current one again
    note_request(connection, record, queued_new=True)
