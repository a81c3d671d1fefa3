"""The policy_revisions table: immutable, numbered policy revisions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from sqlalchemy import Connection, Select, bindparam, func, insert, literal_column, select, true

from services.ledger.domain.execution import RequestState
from services.ledger.domain.policy import PolicyRevision, PolicySettings
from services.ledger.repository.driver import DriverStatement, fetch
from services.ledger.schema import execution_requests, policy_revisions


def _policy(row: object) -> PolicyRevision:
    return policy_from_values(row._mapping)  # type: ignore[attr-defined]


def policy_from_values(values: Mapping[str, Any]) -> PolicyRevision:
    """The revision from a row of the policy_revisions table's columns, by name."""
    settings = PolicySettings(
        enabled=bool(values["enabled"]),
        window_seconds=int(values["window_seconds"]),
        per_run_ticket_limit=int(values["per_run_ticket_limit"]),
        pending_ticket_limit=int(values["pending_ticket_limit"]),
        allow_unavailable_source_observations=bool(values["allow_unavailable_source_observations"]),
        allow_pre_admission_recovery=bool(values["allow_pre_admission_recovery"]),
        allow_readonly_observation_recovery=bool(values["allow_readonly_observation_recovery"]),
    )
    return PolicyRevision(
        revision=int(values["revision"]),
        settings=settings,
        updated_by=str(values["updated_by"]),
        updated_at=str(values["updated_at"]),
        digest=str(values["digest"]),
    )


# Built once (building and cache-keying a statement per call cost more than running it). LIMIT 1
# is written into the text, not bound: as a parameter PostgreSQL cannot cost the joined
# subquery's plan (CURRENT_SUBQUERY) without its value, so the prepared snapshot header was
# planned again on every execution (0.2 ms each; docs/performance-history.md, tenth pass).
_CURRENT = (
    select(policy_revisions).order_by(policy_revisions.c.revision.desc()).limit(literal_column("1"))
)
_NEWEST_REVISION = select(func.max(policy_revisions.c.revision))
#: The transaction-scoped advisory lock every policy lock takes first on PostgreSQL is keyed by
#: this class and :data:`SCHEMA_KEY`: ledgers of different schemas on one server (tenants, test
#: schemas) each have their own gate. With one server-wide key, a lock held in one schema made
#: every other schema's admissions wait for it.
POLICY_GATE_CLASS = 0x506F6C69  # "Poli"
#: The second half of a schema's advisory lock keys: a 32-bit hash of the schema the session
#: resolves its tables in (the first of its search_path), the same for every replica.
SCHEMA_KEY = func.hashtext(func.current_schema())


def _locking(*, shared: bool, gated: bool) -> Select[Any]:
    """The current revision under the policy lock: exclusive, or shared (``shared``: admissions
    and the fenced worker writes, which a policy write must wait for but which need not wait for
    each other; ADR 0014, "The policy lock of the fenced writes"; ADR 0049).

    ``gated`` (PostgreSQL): the lock is the schema's transaction-scoped advisory gate, taken in
    that mode by a joined one-row subquery of the statement that reads the row. The lock manager
    queues a share request behind a waiting exclusive one, where a row share lock would join its
    holders, and the gate writes nothing: the row itself is not locked since ADR 0067 (a share
    lock on the one row every writer reads made a MultiXact and a WAL record on its page for
    each holder). The release before it took both, and every release that serves revision 0015
    takes the gate, so mixed releases exclude each other by the gate alone. The statement's
    snapshot may predate a wait for a policy write: the caller confirms the revision in a later
    statement (:func:`lock_current_policy`, or NEWEST_POLICY_REVISION in the fenced writes').

    Ungated (SQLite): BEGIN IMMEDIATE already serializes every writer."""
    if not gated:
        return _CURRENT
    take = func.pg_advisory_xact_lock_shared if shared else func.pg_advisory_xact_lock
    gate = select(take(POLICY_GATE_CLASS, SCHEMA_KEY).label("taken")).subquery("policy_gate")
    return (
        select(policy_revisions)
        .select_from(policy_revisions.join(gate, true()))
        .order_by(policy_revisions.c.revision.desc())
        .limit(literal_column("1"))
    )


# Built once (by shared, gated), as the statements above.
_LOCKING = {
    (shared, gated): DriverStatement(_locking(shared=shared, gated=gated))
    for shared in (False, True)
    for gated in (False, True)
}

#: The current revision as a subquery (runs.RUN_WITH_HEAD_AND_POLICY joins it).
CURRENT_SUBQUERY = _CURRENT.subquery("current_policy")
#: How many queued requests' leases ran out by the parameter ``now`` (execution_requests.
#: queued_expiring_by's rows, counted), as a scalar subquery another statement can carry.
DUE_FOR_EXPIRY = (
    select(func.count())
    .select_from(execution_requests)
    .where(
        execution_requests.c.state == RequestState.QUEUED.value,
        execution_requests.c.lease_expires_at <= bindparam("now"),
    )
    .scalar_subquery()
)
# The newest revision and the due count, in the statement the lock's re-read runs anyway.
_NEWEST_REVISION_AND_DUE = select(func.max(policy_revisions.c.revision), DUE_FOR_EXPIRY)


def current_policy(connection: Connection) -> PolicyRevision:
    row = connection.execute(_CURRENT).first()
    if row is None:
        raise RuntimeError("policy_revisions is empty: migrations were not applied")
    return _policy(row)


def policy_revision(connection: Connection, revision: int) -> PolicyRevision | None:
    row = connection.execute(
        select(policy_revisions).where(policy_revisions.c.revision == revision)
    ).first()
    return None if row is None else _policy(row)


def list_policy_revisions(
    connection: Connection, before_revision: int, limit: int
) -> list[PolicyRevision]:
    """Newest first; ``before_revision`` 0 means from the current one. Callers validate that
    neither argument is negative (a negative LIMIT is an error on PostgreSQL)."""
    if limit <= 0 or before_revision < 0:
        raise ValueError("limit must be positive and before_revision not negative")
    query = select(policy_revisions).order_by(policy_revisions.c.revision.desc()).limit(limit)
    if before_revision > 0:
        query = query.where(policy_revisions.c.revision < before_revision)
    return [_policy(row) for row in connection.execute(query)]


def revisions_after(connection: Connection, revision: int) -> list[PolicyRevision]:
    """Every revision written after ``revision``, oldest first."""
    query = (
        select(policy_revisions)
        .where(policy_revisions.c.revision > revision)
        .order_by(policy_revisions.c.revision)
    )
    return [_policy(row) for row in connection.execute(query)]


def insert_policy_revision(connection: Connection, policy: PolicyRevision) -> None:
    settings = policy.settings
    connection.execute(
        insert(policy_revisions).values(
            revision=policy.revision,
            **asdict(settings),
            updated_by=policy.updated_by,
            updated_at=policy.updated_at,
            digest=policy.digest,
        )
    )


def _lock(
    connection: Connection, reread: Select[Any], parameters: dict[str, str], *, shared: bool
) -> tuple[PolicyRevision, tuple[Any, ...]]:
    while True:
        locked = lock_policy_row(connection, shared=shared)
        newest = tuple(connection.execute(reread, parameters).one())
        if newest[0] == locked.revision:
            return locked, newest


def lock_current_policy(connection: Connection, *, shared: bool = False) -> PolicyRevision:
    """The current policy under the policy lock (PostgreSQL: the schema's advisory gate, ADR
    0067): recoveries, reconciliations and policy writes take it exclusively, so caps and
    revocations are checked against committed state. ``shared`` (admissions and the fenced
    worker writes: claims, command charges, own records, completions, failures): no policy write
    commits until the holder does, but the holders do not wait for each other (ADR 0014, 0049).

    A policy write inserts a new revision instead of updating one, so a transaction that waited
    for the lock may hold a revision that was superseded meanwhile; under READ COMMITTED each new
    statement sees the committed newer row, so re-read until the locked row is the newest.
    (SQLite's BEGIN IMMEDIATE already serializes writers; there the first read is final.)"""
    return _lock(connection, _NEWEST_REVISION, {}, shared=shared)[0]


def lock_current_policy_counting_due(
    connection: Connection, now: str, *, shared: bool = False
) -> tuple[PolicyRevision, int]:
    """:func:`lock_current_policy` (exclusive unless ``shared``: an admission's), and the number
    of queued requests whose lease expires at or before ``now`` (fixed-width UTC text), counted
    by the re-read after the lock: the transactions that sweep those first pay no statement for
    it when none is due."""
    locked, reread = _lock(connection, _NEWEST_REVISION_AND_DUE, {"now": now}, shared=shared)
    return locked, int(reread[1])


def lock_policy_row(connection: Connection, *, shared: bool) -> PolicyRevision:
    """The newest revision as this statement saw it, under the lock: one statement, without the
    re-read of :func:`lock_current_policy` (a caller that waited may hold a superseded revision;
    it must compare NEWEST_POLICY_REVISION read in a later statement, as the fenced writes do)."""
    statement = _LOCKING[shared, connection.dialect.name == "postgresql"]
    rows = fetch(connection, statement)
    if not rows:
        raise RuntimeError("policy_revisions is empty: migrations were not applied")
    return policy_from_values(rows[0])


#: The newest revision, as a scalar subquery another statement can carry.
NEWEST_POLICY_REVISION = _NEWEST_REVISION.scalar_subquery()
