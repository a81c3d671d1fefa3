"""The worker measures its lease on the ledger's clock (ADR 0057): the claim answers the ledger's
time, and the worker counts what was left of the lease then from the moment it sent the claim,
on its monotonic clock (a listing of a run's requests answers the ledger's time too, for the
console's countdown). Its own wall clock never enters the bound, so a worker host behind the
ledger's clock starts no effect after the lease ended and one ahead does not stop early.

The arithmetic (hypothesis, over every skew of the three clocks and every delay of the request
on its way), then the real claim through the real ledger on SQLite and PostgreSQL with the
ledger's clock 20 minutes off the worker host's, also when the claim's answer is lost and read
back. The worker processes under libfaketime are in tests/host_controls/test_skewed_worker.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine

from forge.continuity.v1 import execution_pb2
from services.ledger.service import Ledger
from services.worker.ledger_port import LedgerPort
from services.worker.run import claim_one, lease_of
from services.worker.stopping import (
    LEASE_MARGIN_SECONDS,
    MINIMUM_EFFECT_SECONDS,
    LeaseBound,
    LeaseExhausted,
    measured_lease,
)
from shared.continuity.timeutil import utc_now
from tests.admission.conftest import Stack
from tests.support import token_roles
from tests.worker.conftest import admit
from tests.worker.test_lost_answers import first, proxy

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
#: datetimes keep microseconds: two roundings apart at most
MICROSECONDS = 1e-5
#: Offsets of one clock from real time, in seconds (a day either way).
OFFSETS = st.floats(min_value=-86_400, max_value=86_400, allow_nan=False)
#: The request's way to the ledger, until the ledger read its clock.
DELAYS = st.floats(min_value=0, max_value=120, allow_nan=False)
LEASES = st.floats(min_value=-7_200, max_value=7_200, allow_nan=False)


class Clocks:
    """Real time ``now`` (seconds since EPOCH) seen by the ledger's clock, the worker's wall
    clock and the worker's monotonic clock, each off real time by its own offset."""

    def __init__(self, ledger: float, wall: float, monotonic: float) -> None:
        self.now = 0.0
        self.offsets = (ledger, wall, monotonic)

    def ledger(self) -> datetime:
        return EPOCH + timedelta(seconds=self.now + self.offsets[0])

    def wall(self) -> datetime:
        return EPOCH + timedelta(seconds=self.now + self.offsets[1])

    def monotonic(self) -> float:
        return self.now + self.offsets[2]


@given(OFFSETS, OFFSETS, OFFSETS, DELAYS, LEASES, st.floats(min_value=0, max_value=7_200))
def test_the_bound_ends_with_the_lease_less_the_requests_way_whatever_the_wall_clock(
    ledger: float, wall: float, monotonic: float, delay: float, lease: float, later: float
) -> None:
    clocks = Clocks(ledger, wall, monotonic)
    expires_at = clocks.ledger() + timedelta(seconds=lease)  # the lease ends `lease` from now
    sent_at = clocks.monotonic()
    clocks.now += delay  # the ledger reads its clock after the request arrived
    bound = measured_lease(
        expires_at,
        clocks.ledger(),
        sent_at,
        wall_clock=clocks.wall,
        monotonic=clocks.monotonic,
    )
    clocks.now += later
    truly_left = lease - clocks.now
    # never later than the lease, early by exactly the request's way, whatever `wall` is
    assert bound.remaining() == pytest.approx(truly_left - delay, abs=MICROSECONDS)


@given(OFFSETS, OFFSETS, LEASES)
def test_without_the_ledgers_time_the_wall_clock_decides_as_before(
    ledger: float, wall: float, lease: float
) -> None:
    # A ledger of an earlier release: what is left is read on this host's wall clock, off by
    # exactly its skew from the ledger's (the rule ADR 0057 replaced, kept for old ledgers).
    clocks = Clocks(ledger, wall, 0.0)
    expires_at = clocks.ledger() + timedelta(seconds=lease)
    bound = measured_lease(
        expires_at, None, clocks.monotonic(), wall_clock=clocks.wall, monotonic=clocks.monotonic
    )
    assert bound.remaining() == pytest.approx(lease + ledger - wall, abs=MICROSECONDS)


def test_no_lease_bounds_nothing() -> None:
    bound = measured_lease(None, utc_now(), time.monotonic())
    assert bound.remaining() == float("inf")
    assert bound.effect_timeout(600.0) == 600.0


@given(st.floats(min_value=-1e6, max_value=1e6), st.floats(min_value=0, max_value=1e6))
def test_an_effect_gets_what_is_left_before_the_margin_or_does_not_start(
    left: float, wanted: float
) -> None:
    bound = LeaseBound(100.0 + left, monotonic=lambda: 100.0)
    if left - LEASE_MARGIN_SECONDS < MINIMUM_EFFECT_SECONDS:
        with pytest.raises(LeaseExhausted) as exhausted:
            bound.effect_timeout(wanted)
        assert exhausted.value.remaining == pytest.approx(left)
        return
    timeout = bound.effect_timeout(wanted)
    assert timeout == min(wanted, left - LEASE_MARGIN_SECONDS)
    assert timeout <= left - LEASE_MARGIN_SECONDS


# --- the real claim, the ledger's clock off the worker host's ----------------------------------


class OffClock:
    """The ledger's clock: this host's wall clock plus a fixed offset (set before the admission,
    so the lease is granted and measured on it)."""

    def __init__(self, seconds: float) -> None:
        self.offset = timedelta(seconds=seconds)

    def __call__(self) -> datetime:
        return utc_now() + self.offset


@pytest.fixture(params=[-1200.0, 1200.0], ids=["ledger-behind", "ledger-ahead"])
def ledger_clock(request: pytest.FixtureRequest) -> OffClock:
    return OffClock(request.param)


@pytest.fixture
def ledger(engine: Engine, ledger_clock: OffClock) -> Ledger:
    return Ledger(engine, ledger_clock, authority=token_roles)


#: How far the bound may sit past the lease's end: clock readings in one process, no more.
LATE = 0.01

Drops = Callable[[str, int], bool]


@pytest.mark.parametrize(
    "drops",
    [None, first("ClaimExecutionRequest")],
    ids=["answered", "answer-lost-and-read-back"],
)
def test_the_claimed_lease_ends_on_the_ledgers_clock(
    stack: Stack, tmp_path: Path, ledger_clock: OffClock, drops: Drops | None
) -> None:
    continuation = admit(stack, tmp_path)
    target = continuation.config.ledger_target

    def claimed(at: str) -> tuple[float, float, float]:
        port = LedgerPort(at, continuation.config.token)
        try:
            found = claim_one(continuation.config, port)
            returned = time.monotonic()
        finally:
            port.close()
        assert isinstance(found, tuple), found
        claim, _ = found
        expires = claim.answer.execution_request.lease.expires_at.ToDatetime(UTC)
        # the lease's end on this process's monotonic clock, read on the ledger's own clock
        truly_ends = time.monotonic() + (expires - ledger_clock()).total_seconds()
        ends_at = lease_of(claim).ends_at
        assert ends_at is not None
        return ends_at, truly_ends, returned - claim.sent_at

    if drops is None:
        ends_at, truly_ends, way = claimed(target)
    else:
        with proxy(target, drops, grpc.StatusCode.UNAVAILABLE) as (through, dropping):
            ends_at, truly_ends, way = claimed(through)
        assert dropping.dropped == ["ClaimExecutionRequest"]
    # never after the lease (the read-back counts from the read, not from the lost claim) and
    # early by no more than the call that answered took
    assert truly_ends - way - LATE <= ends_at <= truly_ends + LATE, (ends_at - truly_ends, way)


def test_the_ledger_answers_its_own_time_of_the_claim_and_of_a_read(
    stack: Stack, tmp_path: Path, ledger_clock: OffClock
) -> None:
    continuation = admit(stack, tmp_path)
    port = LedgerPort(continuation.config.ledger_target, continuation.config.token)
    try:
        before = ledger_clock()
        found = claim_one(continuation.config, port)
        assert isinstance(found, tuple), found
        answer = found[0].answer
        read = continuation.execution().GetExecutionRequest(
            execution_pb2.GetExecutionRequestRequest(
                execution_request_id=answer.execution_request.execution_request_id
            )
        )
        # the console counts a lease down from the listing's time (run.js: ledgerNow)
        listed = continuation.execution().ListExecutionRequests(
            execution_pb2.ListExecutionRequestsRequest(run_id=answer.execution_request.run_id)
        )
        after = ledger_clock()
    finally:
        port.close()
    claimed_at = answer.ledger_time.ToDatetime(UTC)
    read_at = read.ledger_time.ToDatetime(UTC)
    listed_at = listed.ledger_time.ToDatetime(UTC)
    # the claim's time is the one it stamped on the request; the reads' follow it
    assert answer.ledger_time == answer.execution_request.updated_at
    assert before <= claimed_at <= read_at <= listed_at <= after
    assert [r.execution_request_id for r in listed.execution_requests] == [
        answer.execution_request.execution_request_id
    ]
