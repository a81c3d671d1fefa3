"""Scenario 10, continued: callers with a token who try to hold what others need (issue 45 §2,
ADR 0048).

- **Greedy follower.** One reader opens every follower it can, and more; other principals then
  follow the same run, an entry is appended, and every stream runs into the ledger's time limit.
  Invariant: the greedy reader holds at most its share (the rest refused RESOURCE_EXHAUSTED
  JOURNAL_FOLLOWERS_PER_CALLER_EXHAUSTED), every other principal follows and sees the entry, every
  follower ends UNAVAILABLE STREAM_TIME_LIMIT naming the next sequence, and a resumed stream
  misses nothing.
- **Costly reconstruction input.** A caller sends consumed responses of 40,000 tool calls (the
  analysis is quadratic in them: 19.9 s each on an idle machine; 20,000 took 14.6 s, in the
  service's process, before, and 5.2 s once the analysis got faster) in a loop while
  two legitimate callers analyse ordinary responses. Invariant: every hostile call ends
  RESOURCE_EXHAUSTED RECONSTRUCTION_TIME_LIMIT, every legitimate call succeeds, 0
  UNKNOWN/INTERNAL; the legitimate p99 under the attack over its unloaded value is reported.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import grpc
import pytest
from sqlalchemy import Engine

from forge.continuity.v1 import (
    common_pb2,
    ledger_pb2,
    ledger_pb2_grpc,
    reconstruction_pb2,
    reconstruction_pb2_grpc,
)
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from services.reconstruction.isolation import IsolatedRunner
from services.reconstruction.servicer import ReconstructionServicer
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.contract.channels import open_channel
from shared.runtime.errors import from_rpc_error
from shared.runtime.limits import StreamBounds
from tests.ledger.conftest import LedgerClients, run_request
from tests.reconstruction.conftest import load_case
from tests.reconstruction.test_bounded_work import hostile_response
from tests.reliability.scale import report, scale
from tests.reliability.timed_calls import p99, timed_calls
from tests.support import serve, token_roles

GREEDY_ATTEMPTS = scale(fast=6, full=40)
OTHER_TOKENS = ("operator-token", "operator2-token", "admin-token", "writer-token")
BOUNDS = StreamBounds(followers=8, followers_per_caller=4, max_stream_seconds=10.0)
LEGITIMATE_CALLS = scale(fast=6, full=40)
LEGITIMATE_CALLERS = 2
RECONSTRUCTION_SECONDS = 5.0
FORBIDDEN = {"UNKNOWN", "INTERNAL"}
WAIT_SECONDS = 120.0


class _Follower:
    """A follower on its own channel, recording what it received and how it ended."""

    def __init__(self, target: str, token: str) -> None:
        self.channel = open_channel(target, token)
        self.sequences: list[int] = []
        self.ended: tuple[str, str, dict[str, str]] | None = None
        self.started = threading.Event()
        self.thread = threading.Thread(target=self._follow, daemon=True)
        self.thread.start()

    def _follow(self) -> None:
        stub = ledger_pb2_grpc.LedgerServiceStub(self.channel)
        request = ledger_pb2.StreamJournalRequest(run_id="run-1", from_sequence=1, follow=True)
        try:
            for response in stub.StreamJournal(request, timeout=WAIT_SECONDS):
                self.sequences.append(response.entry.sequence)
                self.started.set()
            self.ended = ("OK", "", {})
        except grpc.RpcError as error:
            refusal = from_rpc_error(error)
            self.ended = (error.code().name, refusal.reason, refusal.metadata)  # type: ignore[attr-defined]
        self.started.set()

    def close(self) -> None:
        self.thread.join(WAIT_SECONDS)
        self.channel.close()


def _append(clients: LedgerClients, head: str) -> common_pb2.JournalEntry:
    request = ledger_pb2.AppendJournalEntryRequest(
        run_id="run-1",
        expected_head_hash=head,
        kind=common_pb2.JOURNAL_ENTRY_KIND_RUN_HELD,
        payload_json=json.dumps({"reason": "appended while followed"}),
    )
    return clients.ledger().AppendJournalEntry(request, timeout=10).entry


def test_a_greedy_follower_holds_its_share_and_every_stream_ends_resumable(
    engine: Engine,
) -> None:
    with serve(
        "ledger", ledger_bindings(Ledger(engine, stream_limits=BOUNDS, authority=token_roles))
    ) as served:
        clients = LedgerClients(served)
        clients.ledger().CreateRun(run_request())
        first = _append(clients, "")
        greedy = [_Follower(served.target, "reader-token") for _ in range(GREEDY_ATTEMPTS)]
        for follower in greedy:
            assert follower.started.wait(WAIT_SECONDS)
        others = [_Follower(served.target, token) for token in OTHER_TOKENS]
        for follower in others:
            assert follower.started.wait(WAIT_SECONDS)
        second = _append(clients, first.hash)
        for follower in greedy + others:
            follower.close()
        resumed = ledger_pb2_grpc.LedgerServiceStub(clients.channel("reader-token")).StreamJournal(
            ledger_pb2.StreamJournalRequest(run_id="run-1", from_sequence=2), timeout=10
        )
        resumed_sequences = [response.entry.sequence for response in resumed]

    endings = Counter(
        f"{code} {reason}" for code, reason, _ in (f.ended for f in greedy + others if f.ended)
    )
    holding = [f for f in greedy if f.sequences]
    report(
        "hostile_streams",
        greedy_attempts=GREEDY_ATTEMPTS,
        greedy_followed=len(holding),
        other_principals_followed=sum(1 for f in others if f.sequences),
        endings=json.dumps(dict(endings)),
        stream_seconds=BOUNDS.max_stream_seconds,
    )
    assert len(holding) == BOUNDS.followers_per_caller
    assert endings == Counter(
        {
            "RESOURCE_EXHAUSTED JOURNAL_FOLLOWERS_PER_CALLER_EXHAUSTED": GREEDY_ATTEMPTS
            - BOUNDS.followers_per_caller,
            "UNAVAILABLE STREAM_TIME_LIMIT": BOUNDS.followers_per_caller + len(OTHER_TOKENS),
        }
    )
    for follower in holding + others:
        assert follower.sequences == [1, second.sequence]
        assert follower.ended is not None
        assert follower.ended[2]["next_sequence"] == str(second.sequence + 1)
    assert resumed_sequences == [second.sequence]


@pytest.fixture(scope="module")
def reconstruction() -> Iterator[tuple[str, IsolatedRunner]]:
    # A worker for each legitimate caller and one for the attacker.
    runner = IsolatedRunner(LEGITIMATE_CALLERS + 1, RECONSTRUCTION_SECONDS)
    with serve(
        "reconstruction", reconstruction_bindings(ReconstructionServicer(runner=runner))
    ) as served:
        yield served.target, runner
    runner.close()


def _legitimate_round(target: str, label: str, codes: Counter[str]) -> list[float]:
    case = load_case("v1_basic")

    def connect(n: int) -> Callable[[int], object]:
        stub = reconstruction_pb2_grpc.ReconstructionServiceStub(
            open_channel(target, "candidate-service-token")
        )
        # A call id of its own: each call is computed, not served from the cache.
        requests = [
            reconstruction_pb2.AnalyzeConsumedResponseRequest(
                checkpoint=case.checkpoint,
                raw_response=case.raw_response.replace(
                    b"call_ev_1", f"call_{label}_{n}_{call}".encode()
                ),
            )
            for call in range(LEGITIMATE_CALLS)
        ]
        return lambda call: stub.AnalyzeConsumedResponse(requests[call], timeout=WAIT_SECONDS)

    return timed_calls(LEGITIMATE_CALLERS, connect, LEGITIMATE_CALLS, codes)


def test_a_costly_reconstruction_input_is_stopped_while_others_are_answered(
    reconstruction: tuple[str, IsolatedRunner],
) -> None:
    target, runner = reconstruction
    case = load_case("v1_basic")
    codes: Counter[str] = Counter()
    _legitimate_round(target, "warm", codes)  # every worker started and warm
    unloaded = _legitimate_round(target, "unloaded", codes)
    hostile_codes: Counter[str] = Counter()
    hostile_seconds: list[float] = []
    stop = threading.Event()

    def attacker() -> None:
        stub = reconstruction_pb2_grpc.ReconstructionServiceStub(
            open_channel(target, "candidate-service-token")
        )
        request = reconstruction_pb2.AnalyzeConsumedResponseRequest(
            checkpoint=case.checkpoint, raw_response=hostile_response(case)
        )
        while not stop.is_set():
            started = time.perf_counter()
            try:
                stub.AnalyzeConsumedResponse(request, timeout=WAIT_SECONDS)
                hostile_codes["OK"] += 1
            except grpc.RpcError as error:
                hostile_codes[f"{error.code().name} {from_rpc_error(error).reason}"] += 1  # type: ignore[attr-defined]
            hostile_seconds.append(time.perf_counter() - started)

    attacking = threading.Thread(target=attacker)
    attacking.start()
    ends = time.monotonic() + WAIT_SECONDS
    while runner.running == 0:
        assert time.monotonic() < ends, "the hostile call never reached a worker"
        time.sleep(0.01)
    attacked = _legitimate_round(target, "attacked", codes)
    stop.set()
    attacking.join(WAIT_SECONDS)

    unloaded_p99, attacked_p99 = p99(unloaded), p99(attacked)
    report(
        "hostile_reconstruction",
        legitimate_calls=len(unloaded) + len(attacked),
        legitimate_codes=json.dumps(dict(codes)),
        hostile_calls=sum(hostile_codes.values()),
        hostile_codes=json.dumps(dict(hostile_codes)),
        hostile_call_max_s=round(max(hostile_seconds), 2),
        time_limit_s=RECONSTRUCTION_SECONDS,
        unloaded_p99_ms=round(unloaded_p99 * 1000, 1),
        attacked_p99_ms=round(attacked_p99 * 1000, 1),
        attacked_p99_ratio=round(attacked_p99 / unloaded_p99, 2),
        workers_replaced=runner.stopped,
    )
    assert codes == Counter({"OK": 3 * LEGITIMATE_CALLERS * LEGITIMATE_CALLS})
    assert hostile_codes and set(hostile_codes) == {"RESOURCE_EXHAUSTED RECONSTRUCTION_TIME_LIMIT"}
    assert not FORBIDDEN & {code.split()[0] for code in codes | hostile_codes}
