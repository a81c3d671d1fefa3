"""The ledger's long calls are bounded per caller and in time (issue 45 §2): one principal cannot
take every follower slot, streams that do not follow are capped, and a stream ends at the time
limit with the sequence to resume from."""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from sqlalchemy import Engine

from forge.continuity.v1 import common_pb2, ledger_pb2, ledger_pb2_grpc
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from shared.runtime.errors import ResourceExhausted
from shared.runtime.gate import PUSHBACK_KEY
from shared.runtime.limits import StreamBounds, stream_bounds
from tests.errors import expect_error
from tests.ledger.conftest import LedgerClients, run_request
from tests.ledger.test_journal_followers import Follower
from tests.support import serve, token_roles

BOUNDS = StreamBounds(followers=4, followers_per_caller=2, streams=4)
# A stream time limit a test waits out (the liveness bound of the reads below is far longer).
SHORT_LIMIT = StreamBounds(max_stream_seconds=1.0)


def _append(clients: LedgerClients, head: str, note: str) -> common_pb2.JournalEntry:
    request = ledger_pb2.AppendJournalEntryRequest(
        run_id="run-1",
        expected_head_hash=head,
        kind=common_pb2.JOURNAL_ENTRY_KIND_RUN_HELD,
        payload_json=json.dumps({"reason": note}),
    )
    return clients.ledger().AppendJournalEntry(request, timeout=10).entry


@pytest.fixture
def ledger(engine: Engine) -> Ledger:
    return Ledger(engine, stream_limits=BOUNDS, authority=token_roles)


@pytest.fixture
def served(ledger: Ledger) -> Iterator[LedgerClients]:
    with serve("ledger", bindings(ledger)) as running:
        clients = LedgerClients(running)
        clients.ledger().CreateRun(run_request())
        _append(clients, "", "r0")
        yield clients


def _follow_once(clients: LedgerClients, token: str, caught: list[grpc.RpcError]) -> None:
    """Open a follower and take its first entry (refused followers fail here), then close it."""
    follower = Follower(clients, token)
    try:
        follower.next_sequence()
    except grpc.RpcError as error:
        caught.append(error)
        raise
    finally:
        follower.close()


def _retry_info(error: grpc.RpcError) -> error_details_pb2.RetryInfo:
    assert isinstance(error, grpc.Call)
    status = rpc_status.from_call(error)
    assert status is not None
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            return info
    raise AssertionError("no RetryInfo detail")


def test_one_caller_cannot_take_every_follower_slot(served: LedgerClients) -> None:
    mine = [Follower(served, "reader-token") for _ in range(BOUNDS.followers_per_caller)]
    assert [f.next_sequence() for f in mine] == [1] * BOUNDS.followers_per_caller
    caught: list[grpc.RpcError] = []
    error = expect_error(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "JOURNAL_FOLLOWERS_PER_CALLER_EXHAUSTED",
        lambda: _follow_once(served, "reader-token", caught),
    )
    assert error.metadata["limit"] == str(BOUNDS.followers_per_caller)
    assert _retry_info(caught[0]).retry_delay.ToMilliseconds() > 0
    trailing: dict[str, str] = dict(caught[0].trailing_metadata() or ())  # type: ignore[attr-defined]
    assert trailing[PUSHBACK_KEY] == "-1"  # no automatic retry: a follower must end first
    # Other principals still follow, up to the bound of all followers.
    others = [Follower(served, token) for token in ("operator-token", "admin-token")]
    try:
        assert [f.next_sequence() for f in others] == [1, 1]
        expect_error(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "JOURNAL_FOLLOWERS_EXHAUSTED",
            lambda: _follow_once(served, "writer-token", []),
        )
        # The new entry still reaches every follower.
        head = served.ledger().GetRun(ledger_pb2.GetRunRequest(run_id="run-1"), timeout=10)
        second = _append(served, head.head.hash, "r1")
        assert [f.next_sequence() for f in mine + others] == [second.sequence] * 4
    finally:
        for follower in mine + others:
            follower.close()


def test_streams_that_do_not_follow_are_capped_in_all_and_per_caller(ledger: Ledger) -> None:
    """Held streams (each suspended after its first batch, as a slow reader's is) and streamed
    snapshots share one bound; one caller holds at most half of it."""
    served_run = "run-1"
    with serve("ledger", bindings(ledger)) as running:
        clients = LedgerClients(running)
        clients.ledger().CreateRun(run_request())
        _append(clients, "", "r0")

    def stream(caller: str) -> Iterator[object]:
        opened = ledger.stream_journal(
            served_run, 1, caller=caller, follow=False, is_active=lambda: True
        )
        next(opened)
        return opened

    def snapshot(caller: str) -> Iterator[object]:
        opened = ledger.read_snapshot(served_run, caller=caller)
        next(opened)
        return opened

    held = [stream("rita-reader"), snapshot("rita-reader")]
    with pytest.raises(ResourceExhausted) as per_caller:
        stream("rita-reader")
    assert per_caller.value.reason == "JOURNAL_STREAMS_PER_CALLER_EXHAUSTED"
    with pytest.raises(ResourceExhausted):
        snapshot("rita-reader")
    held += [stream("olga-operator"), snapshot("alice-admin")]
    with pytest.raises(ResourceExhausted) as in_all:
        stream("paul-writer")
    assert in_all.value.reason == "JOURNAL_STREAMS_EXHAUSTED"
    assert in_all.value.metadata["limit"] == str(BOUNDS.streams)
    # A stream read to its end gives its slot back; so does one its reader drops.
    assert list(held.pop(0)) == []
    held.pop(0).close()  # type: ignore[attr-defined]
    held.append(stream("rita-reader"))
    assert ledger.journal_followers.streams.in_use == 3
    for opened in held:
        opened.close()  # type: ignore[attr-defined]
    assert ledger.journal_followers.streams.in_use == 0


def test_a_follower_ends_at_the_time_limit_naming_where_to_resume(engine: Engine) -> None:
    ledger = Ledger(engine, stream_limits=SHORT_LIMIT, authority=token_roles)
    with serve("ledger", bindings(ledger)) as running:
        clients = LedgerClients(running)
        clients.ledger().CreateRun(run_request())
        first = _append(clients, "", "r0")
        stub = ledger_pb2_grpc.LedgerServiceStub(clients.channel("reader-token"))
        request = ledger_pb2.StreamJournalRequest(run_id="run-1", from_sequence=1, follow=True)
        received: list[int] = []

        def follow() -> None:
            # 60 s: a liveness bound far above the 1 s limit; the old follower outlives it.
            for response in stub.StreamJournal(request, timeout=60):
                received.append(response.entry.sequence)

        error = expect_error(grpc.StatusCode.UNAVAILABLE, "STREAM_TIME_LIMIT", follow)
        assert received == [1]
        assert error.metadata == {"max_seconds": "1", "next_sequence": "2"}
        # The follower resumes from the sequence named and misses nothing.
        second = _append(clients, first.hash, "r1")
        resumed = ledger_pb2.StreamJournalRequest(
            run_id="run-1", from_sequence=int(error.metadata["next_sequence"])
        )
        assert [r.entry.sequence for r in stub.StreamJournal(resumed, timeout=10)] == [
            second.sequence
        ]
        assert ledger.journal_followers.in_use == 0


def test_the_stream_bounds_are_read_from_the_environment() -> None:
    assert stream_bounds({}) == StreamBounds()
    assert stream_bounds({"FORGE_MAX_JOURNAL_FOLLOWERS": "2"}).followers_per_caller == 2
    read = stream_bounds(
        {
            "FORGE_MAX_FOLLOWERS_PER_CALLER": "3",
            "FORGE_MAX_JOURNAL_STREAMS": "6",
            "FORGE_MAX_STREAM_SECONDS": "60",
        }
    )
    assert read == StreamBounds(followers_per_caller=3, streams=6, max_stream_seconds=60.0)
    for bad in (
        {"FORGE_MAX_FOLLOWERS_PER_CALLER": "9"},  # above the follower limit (8)
        {"FORGE_MAX_FOLLOWERS_PER_CALLER": "0"},
        {"FORGE_MAX_JOURNAL_STREAMS": "17"},  # above half the 32 server threads
        {"FORGE_MAX_STREAM_SECONDS": "0"},
        {"FORGE_MAX_STREAM_SECONDS": "soon"},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            stream_bounds(bad)
