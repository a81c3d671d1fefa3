"""A downstream failure reaches the original caller with its own code and a safe message.

The downstream here is a raw gRPC server (no shared bootstrap, so no ErrorInfo): it sleeps past
the caller's deadline, or answers a bare status whose details carry transport text (peer
addresses) that must never travel back to the caller.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2

from forge.continuity.v1 import (
    admission_pb2,
    admission_pb2_grpc,
    candidate_pb2_grpc,
    common_pb2,
    ledger_pb2,
    ledger_pb2_grpc,
)
from services.admission.downstream import Downstream
from services.admission.servicer import bindings as admission_bindings
from shared.contract.channels import open_channel
from shared.runtime.client import call
from shared.runtime.errors import (
    Cancelled,
    DeadlineExceeded,
    DomainError,
    FailedPrecondition,
    Internal,
    Unavailable,
    from_rpc_error,
    to_status,
)
from tests.errors import expect_error
from tests.support import serve

GET_ADMISSION = "/forge.continuity.v1.LedgerService/GetAdmission"
LEAKY_DETAILS = "upstream connect error: ipv4:127.0.0.1:4242: Connection refused"
Behaviour = Callable[[Any, grpc.ServicerContext], Any]


class _OneMethod(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    def __init__(self, behaviour: Behaviour) -> None:
        self._behaviour = behaviour

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        if handler_call_details.method != GET_ADMISSION:
            return None
        return grpc.unary_unary_rpc_method_handler(
            self._behaviour,
            request_deserializer=ledger_pb2.GetAdmissionRequest.FromString,
            response_serializer=ledger_pb2.GetAdmissionResponse.SerializeToString,
        )


@contextmanager
def raw_ledger(behaviour: Behaviour) -> Iterator[str]:
    """A bare gRPC server answering LedgerService/GetAdmission with ``behaviour``."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers([_OneMethod(behaviour)])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(0).wait()


def _sleep_past_the_deadline(_request: Any, context: grpc.ServicerContext) -> Any:
    done = threading.Event()
    context.add_callback(done.set)
    done.wait(10)
    return ledger_pb2.GetAdmissionResponse()


def _answer(code: grpc.StatusCode, details: str) -> Behaviour:
    def behaviour(_request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(code, details)

    return behaviour


def _ledger_stub(target: str, timeout: float = 30.0) -> ledger_pb2_grpc.LedgerServiceStub:
    return ledger_pb2_grpc.LedgerServiceStub(
        open_channel(target, "service-token", default_timeout=timeout)
    )


@contextmanager
def admission_over(ledger_target: str, ledger_timeout: float) -> Iterator[str]:
    """An admission server whose ledger calls go to ``ledger_target`` with a short timeout."""
    downstream = Downstream(
        ledger=_ledger_stub(ledger_target, ledger_timeout),
        candidate=candidate_pb2_grpc.CandidateServiceStub(open_channel("127.0.0.1:1")),
    )
    with serve("admission", admission_bindings(downstream)) as served:
        yield served.target


def _read_back(admission_target: str) -> Callable[[], Any]:
    stub = admission_pb2_grpc.AdmissionServiceStub(open_channel(admission_target, "reader-token"))
    request = admission_pb2.GetInvalidReadContinuityRequest(run_id="run-1", request_id="req-1")
    return lambda: stub.GetInvalidReadContinuity(request, timeout=20)


def _assert_safe(error: DomainError) -> None:
    for leaked in ("127.0.0.1", "ipv4", "4242", "Connection refused", "upstream"):
        assert leaked not in error.message, f"transport text reached the caller: {error.message}"


def test_a_downstream_deadline_reaches_the_caller_as_deadline_exceeded() -> None:
    with raw_ledger(_sleep_past_the_deadline) as ledger, admission_over(ledger, 0.3) as admission:
        error = expect_error(
            grpc.StatusCode.DEADLINE_EXCEEDED,
            "DOWNSTREAM_DEADLINE_EXCEEDED",
            _read_back(admission),
        )
    assert isinstance(error, DeadlineExceeded)
    _assert_safe(error)


def test_a_downstream_cancellation_reaches_the_caller_as_cancelled() -> None:
    answer = _answer(grpc.StatusCode.CANCELLED, f"cancelled by {LEAKY_DETAILS}")
    with raw_ledger(answer) as ledger, admission_over(ledger, 5) as admission:
        error = expect_error(
            grpc.StatusCode.CANCELLED, "DOWNSTREAM_CANCELLED", _read_back(admission)
        )
    assert isinstance(error, Cancelled)
    _assert_safe(error)


@pytest.mark.parametrize(
    ("code", "reason"),
    [(grpc.StatusCode.UNAVAILABLE, "UNAVAILABLE"), (grpc.StatusCode.INTERNAL, "INTERNAL")],
)
def test_a_bare_downstream_status_never_leaks_transport_text(
    code: grpc.StatusCode, reason: str
) -> None:
    with raw_ledger(_answer(code, LEAKY_DETAILS)) as ledger, admission_over(ledger, 5) as admission:
        error = expect_error(code, reason, _read_back(admission))
    _assert_safe(error)


def test_call_types_the_failure_and_logs_the_original_details(
    caplog: pytest.LogCaptureFixture,
) -> None:
    request = ledger_pb2.GetAdmissionRequest(run_id="run-1", request_id="req-1")
    with raw_ledger(_sleep_past_the_deadline) as ledger, pytest.raises(DeadlineExceeded) as late:
        call(_ledger_stub(ledger, 0.2).GetAdmission, request)
    assert late.value.reason == "DOWNSTREAM_DEADLINE_EXCEEDED"
    with (
        raw_ledger(_answer(grpc.StatusCode.UNAVAILABLE, LEAKY_DETAILS)) as ledger,
        caplog.at_level(logging.WARNING, logger="forge.client"),
        pytest.raises(Unavailable) as down,
    ):
        call(_ledger_stub(ledger).GetAdmission, request)
    _assert_safe(down.value)
    # The original text stays in this process's log, for the operator.
    assert LEAKY_DETAILS in caplog.text


def test_an_unreachable_downstream_is_unavailable_without_its_address() -> None:
    request = ledger_pb2.GetAdmissionRequest(run_id="run-1", request_id="req-1")
    with pytest.raises(Unavailable) as down:
        call(_ledger_stub("127.0.0.1:1", 5).GetAdmission, request)
    assert down.value.reason == "UNAVAILABLE"
    _assert_safe(down.value)


def test_from_rpc_error_replaces_bare_details_with_a_fixed_message() -> None:
    with raw_ledger(_answer(grpc.StatusCode.INTERNAL, LEAKY_DETAILS)) as ledger:
        stub = _ledger_stub(ledger)
        with pytest.raises(grpc.RpcError) as caught:
            stub.GetAdmission(ledger_pb2.GetAdmissionRequest(run_id="r", request_id="q"))
    error = from_rpc_error(caught.value)
    assert isinstance(error, Internal)
    assert error.reason == "INTERNAL"
    _assert_safe(error)


def test_a_relayed_refusal_keeps_its_handoff_and_drops_foreign_details() -> None:
    """A downstream refusal carrying a contract detail (the handoff) reaches the original caller
    with it; a detail of any other package does not travel on."""
    handoff = common_pb2.HandoffPayload(
        permitted_next_actions=[common_pb2.PermittedAction(action="inspect_journal")]
    )
    debug = error_details_pb2.DebugInfo(detail=LEAKY_DETAILS)
    refusal = FailedPrecondition("RUN_NOT_HELD", "the run is not held", details=[handoff, debug])

    def refuse(_request: Any, context: grpc.ServicerContext) -> Any:
        context.abort_with_status(to_status(refusal))

    with raw_ledger(refuse) as ledger, admission_over(ledger, 5) as admission:
        error = expect_error(
            grpc.StatusCode.FAILED_PRECONDITION, "RUN_NOT_HELD", _read_back(admission)
        )
    assert error.detail(common_pb2.HandoffPayload) == handoff
    assert error.detail(error_details_pb2.DebugInfo) is None
    assert len(error.details) == 1
