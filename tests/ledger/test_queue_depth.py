"""The pending count the database keeps (migration 0010, ADR 0031) is the number of requests in
the pending states after any sequence of writes, by any statement, on SQLite and PostgreSQL:
committed one by one, several in one transaction, rolled back, and from concurrent sessions.
The queue caps read it, so a count that drifted would admit past a cap or refuse below it. The
pending cap's counter (migration 0014, ADR 0049: entered - released, which an admission's
conditional statement compares with the cap) is checked beside it at every step."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, Engine, delete, func, insert, select, update

from services.ledger.database import downgrade, upgrade
from services.ledger.domain.execution import PENDING_STATES, RequestState
from services.ledger.repository import execution_requests as request_rows
from services.ledger.schema import execution_requests, pending_slots, queue_depth, runs
from tests.support import owner_engine

RUN_ID = "run-queue-depth"
_ids = itertools.count()


@pytest.fixture
def queue(engine: Engine) -> Iterator[Engine]:
    """The migrated database with one run for the requests to belong to."""
    with engine.begin() as connection:
        connection.execute(
            insert(runs).values(
                run_id=RUN_ID,
                task_id="task",
                attempt_id="attempt-1",
                source_revision="git:0",
                configuration_digest="sha256:" + "0" * 64,
                provider_timeout_seconds=900,
                command_limit=22,
                time_budget_protocol="forge.time-budget.v1",
                source_profile="test",
                created_by="test",
                created_at="2026-12-05T00:00:00.000000Z",
                run_digest="sha256:" + "1" * 64,
            )
        )
    yield engine


@pytest.fixture
def owner_queue(queue: Engine) -> Iterator[Engine]:
    """The same database as its owner, who may also delete requests (by hand, as an
    administrator could): the ledger's own role deletes nothing (ADR 0036)."""
    with owner_engine(queue) as owner:
        yield owner


def add(connection: Connection, state: RequestState) -> str:
    request_id = f"er-{next(_ids)}"
    connection.execute(
        insert(execution_requests).values(
            execution_request_id=request_id,
            run_id=RUN_ID,
            attempt_id="attempt-1",
            request_id=request_id,
            checkpoint_digest="sha256:" + "2" * 64,
            policy_revision=1,
            state=state.value,
            lease_generation=0,
            lease_seconds=60,
            lease_expires_at="2026-12-05T01:00:00.000000Z",
            owner="",
            created_at="2026-12-05T00:00:00.000000Z",
            updated_at="2026-12-05T00:00:00.000000Z",
        )
    )
    return request_id


def move(connection: Connection, request_id: str, state: RequestState) -> None:
    connection.execute(
        update(execution_requests)
        .where(execution_requests.c.execution_request_id == request_id)
        .values(state=state.value)
    )


def remove(connection: Connection, request_id: str) -> None:
    connection.execute(
        delete(execution_requests).where(execution_requests.c.execution_request_id == request_id)
    )


def counted(connection: Connection) -> int:
    """The pending requests counted row by row (what the queue caps counted before 0010)."""
    return int(
        connection.execute(
            select(func.count())
            .select_from(execution_requests)
            .where(execution_requests.c.state.in_([s.value for s in PENDING_STATES]))
        ).scalar_one()
    )


def by_slots(connection: Connection) -> int:
    """The pending requests as the pending cap's counter has them: entered - released."""
    entered = connection.execute(select(pending_slots.c.entered)).scalar_one()
    released = connection.execute(select(func.sum(queue_depth.c.released))).scalar_one()
    return int(entered) - int(released or 0)


def both(engine: Engine) -> tuple[int, int]:
    """The kept count and the row count (the cap's counter asserted equal to the kept count)."""
    with engine.connect() as connection:
        pending = request_rows.pending_count(connection)
        assert by_slots(connection) == pending
        return pending, counted(connection)


def test_every_state_is_counted_as_the_domain_names_it(queue: Engine) -> None:
    # into and out of each state from each other state: the trigger's two state names are the
    # domain's PENDING_STATES, no more and no fewer
    for before, after in itertools.product(RequestState, repeat=2):
        with queue.begin() as connection:
            request_id = add(connection, before)
        pending, expected = both(queue)
        assert pending == expected, before
        with queue.begin() as connection:
            move(connection, request_id, after)
        pending, expected = both(queue)
        assert pending == expected, (before, after)
    ends = [after for _, after in itertools.product(RequestState, repeat=2)]
    assert both(queue)[0] == sum(1 for state in ends if state in PENDING_STATES) > 0


_operations = st.lists(
    st.tuples(
        st.sampled_from(["add", "move", "remove"]),
        st.sampled_from(list(RequestState)),
        st.integers(min_value=0, max_value=50),
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=st.lists(st.tuples(_operations, st.booleans()), min_size=1, max_size=4))
def test_any_writes_keep_the_count(
    owner_queue: Engine, batches: list[tuple[list[tuple[str, RequestState, int]], bool]]
) -> None:
    """Each batch is one transaction, committed or rolled back; whatever ran, the kept count is
    the row count after it."""
    queue = owner_queue
    with queue.connect() as connection:
        known = [
            str(row[0])
            for row in connection.execute(select(execution_requests.c.execution_request_id))
        ]
    for operations, commits in batches:
        with queue.connect() as connection, connection.begin() as transaction:
            touched = list(known)
            for operation, state, index in operations:
                if operation == "add" or not touched:
                    touched.append(add(connection, state))
                elif operation == "move":
                    move(connection, touched[index % len(touched)], state)
                else:
                    remove(connection, touched.pop(index % len(touched)))
            if commits:
                transaction.commit()
                known = touched
            else:
                transaction.rollback()
        pending, expected = both(queue)
        assert pending == expected


def test_a_transaction_counts_its_own_changes_once_applied(queue: Engine) -> None:
    """The lazy expiry sweep changes requests and then counts in the same transaction: after
    apply_queue_depth_notes the count includes its own changes, and the commit adds nothing
    twice."""
    with queue.begin() as connection:
        first, second = add(connection, RequestState.QUEUED), add(connection, RequestState.QUEUED)
    with queue.begin() as connection:
        move(connection, first, RequestState.EXPIRED)
        request_rows.apply_queue_depth_notes(connection)
        assert request_rows.pending_count(connection) == 1
        move(connection, second, RequestState.CLAIMED)
        add(connection, RequestState.QUEUED)
        request_rows.apply_queue_depth_notes(connection)
        assert request_rows.pending_count(connection) == 2
    assert both(queue) == (2, 2)


def test_concurrent_sessions_keep_the_count(queue: Engine) -> None:
    """Eight sessions adding, claiming and finishing requests at once: no deadlock, no lost
    update (on PostgreSQL each commits into its session's shard; SQLite serializes them)."""
    problems: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            for _ in range(15):
                with queue.begin() as connection:
                    request_id = add(connection, RequestState.QUEUED)
                with queue.begin() as connection:
                    move(connection, request_id, RequestState.CLAIMED)
                with queue.begin() as connection:
                    move(connection, request_id, RequestState.COMPLETED)
                    add(connection, RequestState.QUEUED)
        except BaseException as error:  # noqa: BLE001 - reported below
            problems.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []
    assert both(queue) == (8 * 15, 8 * 15)


def test_the_migration_counts_the_requests_already_pending(
    queue: Engine, owner_queue: Engine
) -> None:
    with queue.begin() as connection:
        for state in RequestState:
            add(connection, state)
            add(connection, state)
    downgrade(owner_queue, "0009")
    upgrade(owner_queue)
    assert both(queue) == (2 * len(PENDING_STATES), 2 * len(PENDING_STATES))


def test_the_counter_migration_counts_the_requests_already_pending(
    queue: Engine, owner_queue: Engine
) -> None:
    """Migration 0014 starts the cap's counter at the pending requests; moving them afterwards
    keeps it, and downgrading restores 0010's trigger, which keeps the count alone again."""
    with queue.begin() as connection:
        ids = {state: add(connection, state) for state in RequestState}
    downgrade(owner_queue, "0013")
    with queue.begin() as connection:
        move(connection, ids[RequestState.QUEUED], RequestState.CLAIMED)
        add(connection, RequestState.QUEUED)
    upgrade(owner_queue)
    assert both(queue) == (len(PENDING_STATES) + 1, len(PENDING_STATES) + 1)
    with queue.begin() as connection:
        move(connection, ids[RequestState.CLAIMED], RequestState.COMPLETED)
        add(connection, RequestState.QUEUED)
    assert both(queue) == (len(PENDING_STATES) + 1, len(PENDING_STATES) + 1)
