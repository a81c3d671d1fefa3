"""Strangers cannot pin the servers (shared.runtime.gate, ADR 0040): a call is authenticated from
its metadata before its request message is read, a server holds a bounded number of calls and
refuses the rest with a retry delay, and each method parses requests only up to its own limit."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from sqlalchemy import Engine

from forge.continuity.v1 import ledger_pb2, ledger_pb2_grpc, policy_pb2
from services.ledger.service import Ledger
from services.ledger.servicer import bindings
from shared.runtime.auth import ANY_ROLE
from shared.runtime.config import Settings
from shared.runtime.errors import from_rpc_error
from shared.runtime.server import request_limits, service_binding, start_server
from tests.ledger.conftest import LedgerClients, run_request
from tests.support import directory, token_roles

GET_RUN = "/forge.continuity.v1.LedgerService/GetRun"
STRANGERS = 40


@contextmanager
def silent_calls(
    target: str, count: int, token: str | None
) -> Iterator[list[grpc.Future[ledger_pb2.GetRunResponse]]]:
    """``count`` GetRun calls that send their headers and never a request message: a request
    stream that blocks, so the client sends no body and does not half-close."""
    release = threading.Event()

    def never() -> Iterator[ledger_pb2.GetRunRequest]:
        release.wait()
        return
        yield  # pragma: no cover  # a generator that yields nothing

    channel = grpc.insecure_channel(target)
    call = channel.stream_unary(
        GET_RUN,
        request_serializer=ledger_pb2.GetRunRequest.SerializeToString,
        response_deserializer=ledger_pb2.GetRunResponse.FromString,
    )
    metadata = [("authorization", f"Bearer {token}")] if token else None
    futures = [call.future(never(), metadata=metadata, timeout=60) for _ in range(count)]
    try:
        yield futures
    finally:
        release.set()
        for future in futures:
            future.cancel()
        channel.close()


def test_silent_strangers_do_not_stall_an_authenticated_call(clients: LedgerClients) -> None:
    ledger = clients.ledger()
    ledger.CreateRun(run_request("run-1"))
    with silent_calls(clients.served.target, STRANGERS, token=None) as strangers:
        # Before the gate each stranger held a pool thread waiting for its body, so this call
        # queued behind them until its deadline.
        run = ledger.GetRun(ledger_pb2.GetRunRequest(run_id="run-1"), timeout=5)
        assert run.run.run_id == "run-1"
        # ... and the strangers were refused from their metadata alone.
        for stranger in strangers:
            with pytest.raises(grpc.RpcError) as refused:
                stranger.result(timeout=5)
            assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
            assert from_rpc_error(refused.value).reason == "CREDENTIALS_MISSING"


def test_an_unknown_token_is_refused_before_its_body_is_read(clients: LedgerClients) -> None:
    with (
        silent_calls(clients.served.target, 1, token="nobody-knows-me") as (call,),
        pytest.raises(grpc.RpcError) as refused,
    ):
        call.result(timeout=5)
    assert from_rpc_error(refused.value).reason == "CREDENTIALS_UNKNOWN"


def test_a_full_server_refuses_with_a_retry_delay(engine: Engine) -> None:
    settings = Settings(service="ledger", host="127.0.0.1", port=0, max_queued_calls=2)
    running = start_server(
        settings, bindings(Ledger(engine, authority=token_roles)), directory(), max_workers=4
    )
    target = f"127.0.0.1:{running.port}"
    try:
        ledger = ledger_pb2_grpc.LedgerServiceStub(grpc.insecure_channel(target))
        metadata = [("authorization", "Bearer reader-token")]
        # Authenticated callers who never send a body hold the 4 threads and the 2 queue places.
        with silent_calls(target, 6, token="reader-token"):
            with pytest.raises(grpc.RpcError) as busy:
                ledger.GetRun(
                    ledger_pb2.GetRunRequest(run_id="run-1"), metadata=metadata, timeout=5
                )
            assert busy.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            error = from_rpc_error(busy.value)
            assert error.reason == "SERVER_BUSY"
            assert error.metadata == {"limit": "6", "retry_after_ms": "250"}
            trailing: dict[str, object] = dict(busy.value.trailing_metadata())  # type: ignore[attr-defined]
            assert trailing["grpc-retry-pushback-ms"] == "250"
            status = rpc_status.from_call(busy.value)  # type: ignore[arg-type]
            assert status is not None
            assert any(d.Is(error_details_pb2.RetryInfo.DESCRIPTOR) for d in status.details)
        # Once they are gone the server takes calls again: the silent calls end asynchronously
        # (slowly on a loaded machine), so the caller retries after the delay it was given, for
        # at most 5 s, as a client honouring the pushback would.
        code = grpc.StatusCode.RESOURCE_EXHAUSTED
        for _ in range(20):
            with pytest.raises(grpc.RpcError) as answered:
                ledger.GetRun(
                    ledger_pb2.GetRunRequest(run_id="run-1"), metadata=metadata, timeout=5
                )
            code = answered.value.code()
            if code is not grpc.StatusCode.RESOURCE_EXHAUSTED:
                break
            time.sleep(0.25)
        assert code is grpc.StatusCode.NOT_FOUND
    finally:
        running.stop(grace=0)


def test_a_method_without_bytes_parses_no_large_request(clients: LedgerClients) -> None:
    ledger = clients.ledger()
    with pytest.raises(grpc.RpcError) as refused:
        ledger.GetRun(ledger_pb2.GetRunRequest(run_id="r" * (2 << 20)), timeout=10)
    assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    error = from_rpc_error(refused.value)
    assert error.reason == "MESSAGE_TOO_LARGE"
    assert error.metadata["limit_bytes"] == str(1 << 20)
    # A blob upload of the same size is within its method's (large) limit.
    stored = ledger.PutBlob(ledger_pb2.PutBlobRequest(content=b"b" * (2 << 20)), timeout=10)
    assert stored.digest


def test_a_strangers_large_body_is_refused_from_the_metadata(clients: LedgerClients) -> None:
    channel = grpc.insecure_channel(clients.served.target)
    ledger = ledger_pb2_grpc.LedgerServiceStub(channel)
    with pytest.raises(grpc.RpcError) as refused:
        ledger.PutBlob(ledger_pb2.PutBlobRequest(content=b"x" * (30 << 20)), timeout=10)
    assert from_rpc_error(refused.value).reason == "CREDENTIALS_MISSING"
    channel.close()


def test_each_methods_limit_follows_its_request_type(engine: Engine) -> None:
    settings = Settings(service="ledger", host="127.0.0.1", port=0)
    policy = policy_pb2.DESCRIPTOR.services_by_name["PolicyService"]
    names = ("GetPolicy", "PutPolicy", "ListPolicyRevisions", "Upload")
    # A registered workflow the contract does not declare, whose request carries bytes.
    workflow = service_binding(
        policy,
        dict.fromkeys(names, ANY_ROLE),
        lambda _name: lambda _request, _context: None,
        registered={"Upload": (ledger_pb2.PutBlobRequest, ledger_pb2.PutBlobResponse)},
    )
    limits = request_limits(settings, [*bindings(Ledger(engine)), workflow])
    large, small = settings.max_message_bytes, settings.max_request_bytes
    assert limits["/forge.continuity.v1.LedgerService/PutBlob"] == large
    assert limits["/forge.continuity.v1.LedgerService/GetRun"] == small
    assert limits["/forge.continuity.v1.PolicyService/Upload"] == large
    assert limits["/forge.continuity.v1.PolicyService/GetPolicy"] == small
