"""ListRuns and ListAllExecutionRequests (ADR 0022) through a real ledger server on SQLite and
PostgreSQL: the run's continuity state as admission, claim and failure move it, filters with
short state names, keyset paging that covers every row once while runs are being added, and
refusals of bad filters and tokens that write nothing."""

from __future__ import annotations

import threading

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, execution_pb2, ledger_pb2
from services.ledger.domain.listing import Collection, parse_filter
from shared.runtime.errors import InvalidArgument, from_rpc_error
from tests.errors import expect_error
from tests.ledger.admission_support import (
    S,
    claim_request,
    commit,
    commit_request,
    enable_policy,
    execution,
    seed,
)
from tests.ledger.conftest import Clock, LedgerClients, run_request
from tests.support import row_counts

R = ledger_pb2.RunContinuityState
INVALID = grpc.StatusCode.INVALID_ARGUMENT


def list_runs(
    clients: LedgerClients, token: str = "reader-token", **fields: object
) -> ledger_pb2.ListRunsResponse:
    request = ledger_pb2.ListRunsRequest(**fields)  # type: ignore[arg-type]
    return clients.ledger(token).ListRuns(request)


def states(clients: LedgerClients, filter_text: str = "") -> dict[str, int]:
    page = list_runs(clients, filter=filter_text, page_size=500)
    return {row.run.run_id: row.continuity_state for row in page.runs}


def list_requests(
    clients: LedgerClients, **fields: object
) -> execution_pb2.ListAllExecutionRequestsResponse:
    request = execution_pb2.ListAllExecutionRequestsRequest(**fields)  # type: ignore[arg-type]
    return execution(clients, "reader-token").ListAllExecutionRequests(request)


def test_a_runs_continuity_state_follows_hold_admission_claim_and_failure(
    clients: LedgerClients, clock: Clock
) -> None:
    clients.ledger().CreateRun(run_request("run-plain"))
    assert states(clients) == {"run-plain": R.RUN_CONTINUITY_STATE_ACTIVE}
    clock.advance(1)
    seeded = seed(clients)
    assert states(clients)["run-1"] == R.RUN_CONTINUITY_STATE_HELD
    assert list(states(clients, "held = true")) == ["run-1"]
    assert list(states(clients, "state = HELD")) == ["run-1"]
    clock.advance(1)
    enable_policy(clients)
    ticket = commit(clients, commit_request(clients, seeded)).ticket
    queued = ticket.execution_request.execution_request_id
    assert states(clients)["run-1"] == R.RUN_CONTINUITY_STATE_ADMITTED
    assert list(states(clients, "admitted = true")) == ["run-1"]
    assert list(states(clients, "admitted = false")) == ["run-plain"]
    assert list_runs(clients, filter="run_id = run-1").runs[0].current_execution_request_id == (
        queued
    )
    clock.advance(1)
    claimed = execution(clients).ClaimExecutionRequest(claim_request(clients, queued))
    assert states(clients)["run-1"] == R.RUN_CONTINUITY_STATE_RUNNING
    clock.advance(1)
    execution(clients).FailExecutionRequest(
        execution_pb2.FailExecutionRequestRequest(
            execution_request_id=queued,
            lease_generation=claimed.execution_request.lease.generation,
            reason="worker_crashed",
        )
    )
    assert states(clients)["run-1"] == R.RUN_CONTINUITY_STATE_FAILED
    assert list(states(clients, "state = failed AND unresolved = false")) == ["run-1"]
    # newest update first: the failure is the latest thing recorded
    assert [row.run.run_id for row in list_runs(clients).runs] == ["run-1", "run-plain"]
    since = "2026-12-01T12:00:00.500000Z"
    assert list(states(clients, f'updated_at > "{since}"')) == ["run-1"]
    assert list(states(clients, f'update_time <= "{since}"')) == ["run-plain"]
    # the request across runs, by every spelling of its state
    for spelling in ("failed", "FAILED", "EXECUTION_REQUEST_STATE_FAILED"):
        listed = list_requests(clients, filter=f"state = {spelling}").execution_requests
        assert [r.execution_request_id for r in listed] == [queued]
        assert listed[0].updated_at.ToJsonString() == "2026-12-01T12:00:04Z"
    assert list_requests(clients, filter="state = queued").execution_requests == []


@pytest.mark.parametrize("page_size", [1, 3, 7])
def test_paging_covers_every_run_exactly_once_while_runs_are_added(
    clients: LedgerClients, clock: Clock, page_size: int
) -> None:
    for index in range(20):
        if index % 4 == 0:
            clock.advance(1)  # several runs share each update time: the id breaks the ties
        clients.ledger().CreateRun(run_request(f"run-{index:02d}"))
    before = {f"run-{index:02d}" for index in range(20)}
    stop = threading.Event()
    added: list[str] = []

    def add_runs() -> None:
        while not stop.is_set() and len(added) < 200:
            run_id = f"new-{len(added):03d}"
            clients.ledger().CreateRun(run_request(run_id))
            added.append(run_id)

    writer = threading.Thread(target=add_runs)
    writer.start()
    seen: list[str] = []
    token = ""
    try:
        while True:
            page = list_runs(clients, page_size=page_size, page_token=token, filter="run_id = run*")
            assert len(page.runs) <= page_size
            seen.extend(row.run.run_id for row in page.runs)
            clock.advance(0.001)  # runs added from now on are newer than every cursor
            token = page.next_page_token
            if not token:
                break
    finally:
        stop.set()
        writer.join()
    assert sorted(seen) == sorted(before)
    assert len(seen) == len(set(seen))
    everything: list[str] = []
    token = ""
    while True:
        page = list_runs(clients, page_size=page_size * 10, page_token=token)
        everything.extend(row.run.run_id for row in page.runs)
        token = page.next_page_token
        if not token:
            break
    assert sorted(everything) == sorted(before | set(added))


def test_default_and_largest_page_size(clients: LedgerClients) -> None:
    for index in range(52):
        clients.ledger().CreateRun(run_request(f"run-{index:02d}"))
    assert len(list_runs(clients).runs) == 50
    assert len(list_runs(clients, page_size=100_000).runs) == 52
    expect_error(INVALID, "FIELD_INVALID", lambda: list_runs(clients, page_size=-1))


def test_a_token_altered_or_reused_with_another_filter_is_refused(
    clients: LedgerClients, engine: Engine
) -> None:
    for index in range(3):
        clients.ledger().CreateRun(run_request(f"run-{index}"))
    token = list_runs(clients, page_size=1).next_page_token
    assert token
    before = row_counts(engine)
    for bad in (token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1], "not a token", "e30"):
        error = expect_error(
            INVALID, "PAGE_TOKEN_INVALID", lambda bad=bad: list_runs(clients, page_token=bad)
        )
        assert error.metadata["field"] == "page_token"
    expect_error(
        INVALID,
        "PAGE_TOKEN_INVALID",
        lambda: list_runs(clients, page_token=token, filter="state = active"),
    )
    expect_error(
        INVALID,
        "PAGE_TOKEN_INVALID",
        lambda: list_requests(clients, page_token=token),
    )
    assert row_counts(engine) == before


def test_a_bad_filter_names_the_allowed_fields_and_writes_nothing(
    clients: LedgerClients, engine: Engine
) -> None:
    clients.ledger().CreateRun(run_request("run-1"))
    before = row_counts(engine)
    error = expect_error(INVALID, "FILTER_INVALID", lambda: list_runs(clients, filter="owner = x"))
    assert error.metadata["allowed_fields"] == (
        "state, held, admitted, unresolved, updated_at, run_id"
    )
    error = expect_error(
        INVALID, "FILTER_INVALID", lambda: list_requests(clients, filter="held = true")
    )
    assert error.metadata["allowed_fields"] == (
        "state, unresolved, run_id, updated_at, admission_refused"
    )
    for bad in (
        "state = sleeping",
        "state",
        "state =",
        "held = yes",
        "state = held OR held = true",
        'updated_at > "yesterday"',
        "updated_at > 2026-01-01",
        "state > held",
        "run_id = %",
    ):
        expect_error(INVALID, "FILTER_INVALID", lambda bad=bad: list_runs(clients, filter=bad))
    assert row_counts(engine) == before


def test_listing_is_open_to_every_role_and_needs_a_token(clients: LedgerClients) -> None:
    clients.ledger().CreateRun(run_request("run-1"))
    for token in ("reader-token", "operator-token", "admin-token", "worker-token"):
        assert [row.run.run_id for row in list_runs(clients, token).runs] == ["run-1"]
    with pytest.raises(grpc.RpcError) as caught:
        list_runs(clients, token="")
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_queued_requests_are_listed_across_runs(clients: LedgerClients, clock: Clock) -> None:
    enable_policy(clients, per_run_ticket_limit=1, pending_ticket_limit=10)
    queued = []
    for run_id in ("run-a", "run-b"):
        clock.advance(1)
        seeded = seed(clients, run_id)
        queued.append(
            commit(
                clients, commit_request(clients, seeded)
            ).ticket.execution_request.execution_request_id
        )
    listed = list_requests(clients, filter="state = QUEUED").execution_requests
    assert [r.execution_request_id for r in listed] == queued[::-1]
    assert [r.state for r in listed] == [S.EXECUTION_REQUEST_STATE_QUEUED] * 2
    only_b = list_requests(clients, filter="state = queued AND run_id = run-b")
    assert [r.run_id for r in only_b.execution_requests] == ["run-b"]
    first = list_requests(clients, page_size=1)
    rest = list_requests(clients, page_size=1, page_token=first.next_page_token)
    assert [
        r.execution_request_id for r in [*first.execution_requests, *rest.execution_requests]
    ] == (queued[::-1])
    assert rest.next_page_token == ""


_ANY_TEXT = st.text(
    alphabet=st.sampled_from(list('abcdehlnrstu_=!<>"*: -.ANDOR0123456789TZ')), max_size=40
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_ANY_TEXT)
def test_any_filter_text_parses_or_is_refused_as_filter_invalid(text: str) -> None:
    for collection in Collection:
        try:
            parsed = parse_filter(collection, text)
        except InvalidArgument as refused:
            assert refused.reason == "FILTER_INVALID"
            assert refused.metadata["field"] == "filter"
            assert refused.metadata["allowed_fields"]
        else:
            # a filter that parses means the same once written back canonically
            assert parse_filter(collection, parsed.canonical) == parsed


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(text=_ANY_TEXT, size=st.integers(min_value=-5, max_value=600))
def test_any_listing_request_answers_a_page_or_invalid_argument_and_writes_nothing(
    clients: LedgerClients, engine: Engine, text: str, size: int
) -> None:
    """Over the real server: a page, or INVALID_ARGUMENT with a listing reason; never another
    code, and never a row written."""
    before = row_counts(engine)
    for invoke in (
        lambda: list_runs(clients, filter=text, page_size=size),
        lambda: list_requests(clients, filter=text, page_size=size),
    ):
        try:
            invoke()
        except grpc.RpcError as refused:
            assert isinstance(refused, grpc.Call)
            assert refused.code() == INVALID
            assert from_rpc_error(refused).reason in {"FILTER_INVALID", "FIELD_INVALID"}
    assert row_counts(engine) == before


def test_a_dispatcher_lists_what_it_may_schedule_and_sees_the_refused_with_their_reason(
    clients: LedgerClients,
) -> None:
    """A typed claim refusal makes the request ineligible for automatic scheduling (ADR 0014,
    rule 3a): ``admission_refused = false`` leaves it out of a dispatcher's listing, ``= true``
    lists it with its reason."""
    seeded = seed(clients)
    enable_policy(clients)
    queued = commit(clients, commit_request(clients, seeded)).ticket.execution_request
    schedulable = "state = queued AND admission_refused = false"
    ids = [
        r.execution_request_id
        for r in list_requests(clients, filter=schedulable).execution_requests
    ]
    assert ids == [queued.execution_request_id]
    enable_policy(clients, enabled=False)
    expect_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "POLICY_REVOKED",
        lambda: execution(clients).ClaimExecutionRequest(
            claim_request(clients, queued.execution_request_id)
        ),
    )
    assert list_requests(clients, filter=schedulable).execution_requests == []
    (refused,) = list_requests(clients, filter="admission_refused = true").execution_requests
    assert (refused.execution_request_id, refused.admission_refusal) == (
        queued.execution_request_id,
        "POLICY_REVOKED",
    )
    assert refused.state == common_pb2.EXECUTION_REQUEST_STATE_QUEUED
