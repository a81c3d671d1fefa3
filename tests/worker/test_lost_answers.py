"""Lost answers (ADR 0039): a write the ledger applied but whose answer never reached the worker
(UNAVAILABLE, DEADLINE_EXCEEDED) is resolved by reading back — the head, the blob, the command id,
the request's state — before anything is sent again: the continuation completes with no record
twice and no command charged twice. When even the read-back goes unanswered the worker stops and
names the lost answer. A real gRPC proxy on loopback forwards every call to the real ledger and
drops the chosen answers; SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import grpc
import pytest

from forge.continuity.v1 import common_pb2
from services.demo.scripted_provider import ScriptedProvider
from services.worker.ledger_port import READ_BACKS
from services.worker.run import EXIT_COMPLETED, EXIT_STOPPED
from tests.worker.conftest import Continuation

LEDGER = "/forge.continuity.v1.LedgerService/"


class AnswerDroppingProxy:
    """Forwards each unary call, as bytes with its metadata, to ``target``; a call ``drops``
    selects is forwarded (the ledger applies it) and then answered ``code`` instead."""

    def __init__(
        self, target: str, drops: Callable[[str, int], bool], code: grpc.StatusCode
    ) -> None:
        self._channel = grpc.insecure_channel(target)
        self._drops = drops
        self._code = code
        self._lock = threading.Lock()
        self.calls: dict[str, int] = {}
        self.dropped: list[str] = []

    def _forward(self, method: str) -> Callable[[bytes, grpc.ServicerContext], bytes]:
        call = self._channel.unary_unary(method)

        def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
            with self._lock:
                self.calls[method] = self.calls.get(method, 0) + 1
                drop = self._drops(method, self.calls[method])
            metadata = [(k, v) for k, v in context.invocation_metadata() if k == "authorization"]
            try:
                answer: bytes = call(request, metadata=metadata, timeout=60)
            except grpc.RpcError as error:
                context.set_trailing_metadata(error.trailing_metadata())  # type: ignore[attr-defined]
                context.abort(error.code(), error.details())  # type: ignore[attr-defined]
            if drop:
                self.dropped.append(method.rsplit("/", 1)[-1])
                context.abort(self._code, "the answer was lost on the way back")
            return answer

        return handle

    def service(self, details: grpc.HandlerCallDetails) -> Any:
        method: str = details.method  # type: ignore[attr-defined]
        return grpc.unary_unary_rpc_method_handler(self._forward(method))


@contextmanager
def proxy(
    target: str, drops: Callable[[str, int], bool], code: grpc.StatusCode
) -> Iterator[tuple[str, AnswerDroppingProxy]]:
    dropping = AnswerDroppingProxy(target, drops, code)

    class Generic(grpc.GenericRpcHandler):  # type: ignore[type-arg]
        def service(self, details: grpc.HandlerCallDetails) -> Any:
            return dropping.service(details)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), handlers=[Generic()])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", dropping
    finally:
        server.stop(grace=None)


def first(name: str, nth: int = 1) -> Callable[[str, int], bool]:
    return lambda method, count: method.endswith("/" + name) and count == nth


def no_duplicates(continuation: Continuation) -> None:
    records = continuation.after_claim()
    keys = [
        (kind, *(str(p.get(key, "")) for key in ("request_id", "call_id", "command_id", "event")))
        for kind, p in records
        if kind != "worker_claimed"
    ]
    assert len(keys) == len(set(keys)), keys
    assert [k for k, _ in continuation.after_claim()].count("worker_claimed") == 1
    assert continuation.usage() == (13, 22)  # two commands, each charged once


@pytest.mark.parametrize(
    ("drops", "code"),
    [
        (first("ClaimExecutionRequest"), grpc.StatusCode.UNAVAILABLE),
        (first("AppendJournalEntry"), grpc.StatusCode.UNAVAILABLE),
        (first("AppendJournalEntry", 3), grpc.StatusCode.DEADLINE_EXCEEDED),
        (first("PutBlob"), grpc.StatusCode.UNAVAILABLE),
        (first("RecordCommand"), grpc.StatusCode.DEADLINE_EXCEEDED),
        (first("RecordCommand", 2), grpc.StatusCode.UNAVAILABLE),
        (first("CompleteExecutionRequest"), grpc.StatusCode.UNAVAILABLE),
        # every journal append's answer lost: each is read back, none written twice
        (lambda method, _: method.endswith("/AppendJournalEntry"), grpc.StatusCode.UNAVAILABLE),
    ],
    ids=[
        "claim",
        "append",
        "append-deadline",
        "blob",
        "command-deadline",
        "second-command",
        "completion",
        "every-append",
    ],
)
def test_a_lost_answer_is_read_back_never_written_twice(
    admitted: Continuation,
    provider: ScriptedProvider,
    drops: Callable[[str, int], bool],
    code: grpc.StatusCode,
) -> None:
    with proxy(admitted.config.ledger_target, drops, code) as (target, dropping):
        outcome = admitted.run(provider, ledger_target=target)
    assert dropping.dropped, "the chosen answer was never dropped"
    assert outcome.exit_code == EXIT_COMPLETED, outcome.message
    assert admitted.request().state == common_pb2.EXECUTION_REQUEST_STATE_COMPLETED
    no_duplicates(admitted)
    if "CompleteExecutionRequest" in dropping.dropped:
        assert "journal certified" in outcome.message  # read back from the completion entry


def test_an_answer_that_cannot_be_read_back_stops_the_worker_loudly(
    admitted: Continuation, provider: ScriptedProvider
) -> None:
    # Appends and the journal reads that would resolve them all lose their answers.
    def drops(method: str, _: int) -> bool:
        return method.endswith(("/AppendJournalEntry", "/ReadJournal"))

    with proxy(admitted.config.ledger_target, drops, grpc.StatusCode.UNAVAILABLE) as (
        target,
        dropping,
    ):
        outcome = admitted.run(provider, ledger_target=target)
    # it tried to resolve the answer by reading back, every time, before giving up
    assert dropping.calls[LEDGER + "ReadJournal"] >= READ_BACKS
    assert outcome.exit_code == EXIT_STOPPED
    assert "AppendJournalEntry: UNAVAILABLE" in outcome.message
    # the one append applied is there once; nothing was sent again blindly
    sent = [k for k, _ in admitted.after_claim() if k == "model_request_sent"]
    assert sent == ["model_request_sent"]
    assert len(provider.received) == 0  # the request never left: its record went unconfirmed
