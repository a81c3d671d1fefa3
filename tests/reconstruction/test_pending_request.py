"""ReproducePendingRequest: the first provider request a derived checkpoint continues with, through
the sealed transport; compared with what the real SDK sends to a (refusing) provider."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from forge.continuity.v1 import reconstruction_pb2, reconstruction_pb2_grpc
from services.demo.provider import RefusingProvider, send_refused
from services.reconstruction.domain import reconstruct_invalid_read, reproduce_pending_request
from services.reconstruction.servicer import bindings
from shared.agent import pending as pending_module
from shared.agent import sealed
from shared.continuity.canonical import canonical_bytes, digest_of, sha256_digest
from shared.runtime.errors import FailedPrecondition, InvalidArgument
from tests.errors import expect_error
from tests.reconstruction.conftest import Case, load_case
from tests.support import serve


@pytest.fixture(scope="module")
def derived() -> bytes:
    case = load_case("v1_basic")
    return reconstruct_invalid_read(
        case.checkpoint, case.raw_response, case.version, case.consumed_at
    ).derived_checkpoint


@pytest.fixture
def provider() -> Iterator[RefusingProvider]:
    with RefusingProvider() as running:
        yield running


def resealed(derived: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    """The derived checkpoint with its state changed and its state digest sealed again."""
    envelope = json.loads(derived)
    change(envelope["state"])
    envelope["state_digest"] = digest_of(envelope["state"])
    return canonical_bytes(envelope)


def test_reproduction_is_deterministic(derived: bytes) -> None:
    first, second = reproduce_pending_request(derived), reproduce_pending_request(derived)
    assert first.wire == second.wire and first.parts_json == second.parts_json
    assert first.reproduction_digest == second.reproduction_digest
    assert first.wire_digest == sha256_digest(first.wire)
    assert first.wire_length == len(first.wire)
    assert (first.method, first.url) == ("POST", "https://api.openai.com/v1/chat/completions")
    assert first.derived_checkpoint_digest == sha256_digest(derived)


def test_the_parts_are_the_checkpoints_state(derived: bytes) -> None:
    state = json.loads(derived)["state"]
    found = reproduce_pending_request(derived)
    parts = json.loads(found.parts_json)
    assert parts["usage"] == state["usage"] and parts["limits"] == state["limits"]
    assert parts["model_settings"] == state["model_settings"]
    assert parts["tool_definitions"] == state["model_request_parameters"]["function_tools"]
    assert parts["history"][:-1] == state["messages"][:-1]
    # The pending request keeps its stored time; the SDK only renders the worker instructions.
    pending = dict(parts["history"][-1])
    assert pending.pop("instructions") and state["messages"][-1]["instructions"] is None
    assert pending == {k: v for k, v in state["messages"][-1].items() if k != "instructions"}
    wire = json.loads(found.wire)
    assert [t["function"]["name"] for t in wire["tools"]] == [
        t["name"] for t in parts["tool_definitions"]
    ]
    assert wire["model"] == found.model == "gpt-4o"
    assert {k: digest_of(v) for k, v in parts.items()} == dict(found.part_digests)


def test_reproduction_gives_the_bytes_the_real_sdk_sent(
    derived: bytes, provider: RefusingProvider
) -> None:
    sent = send_refused(derived, provider)
    reproduced = reproduce_pending_request(derived)
    [(method, path, wire)] = provider.received
    assert (method, path) == ("POST", "/v1/chat/completions")
    assert wire == sent.request.wire == reproduced.wire
    assert dict(sent.request.part_digests) == dict(reproduced.part_digests)


def test_no_network_no_callback_and_the_one_request_is_refused(
    derived: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[str] = []

    def refuse(name: str) -> Any:
        def blocked(*args: Any, **kwargs: Any) -> Any:
            attempts.append(name)
            raise OSError(f"network disabled in this test: {name}")

        return blocked

    for owner, name in (
        (socket.socket, "connect"),
        (socket.socket, "connect_ex"),
        (socket, "create_connection"),
        (socket, "getaddrinfo"),
        (socket, "gethostbyname"),
    ):
        monkeypatch.setattr(owner, name, refuse(name))
    transports: list[sealed.SealedTransport] = []
    effects: list[sealed.RefusingEffects] = []
    real_transport, real_effects = sealed.SealedTransport, sealed.RefusingEffects

    class Tracking(real_transport):  # type: ignore[valid-type,misc]
        def __init__(self, body: bytes | None) -> None:
            super().__init__(body)
            transports.append(self)

        def _handle(self, request: Any) -> Any:
            try:
                return super()._handle(request)
            except sealed.SealedRequestRefused:
                refusals.append(len(self.requests))
                raise

    class TrackingEffects(real_effects):  # type: ignore[valid-type,misc]
        def __init__(self) -> None:
            super().__init__()
            effects.append(self)

    refusals: list[int] = []
    monkeypatch.setattr(pending_module, "SealedTransport", Tracking)
    monkeypatch.setattr(pending_module, "RefusingEffects", TrackingEffects)
    found = reproduce_pending_request(derived)
    assert attempts == []
    # One transport; its one request recorded and refused: no response was supplied.
    assert [len(t.requests) for t in transports] == [1] and refusals == [1]
    assert transports[0].requests[0] == found.wire
    assert [e.attempts for e in effects] == [[]]


def test_a_state_the_sdk_does_not_send_unchanged_is_refused(derived: bytes) -> None:
    def other_settings(state: dict[str, Any]) -> None:
        state["model_settings"] = {**state["model_settings"], "temperature": 0.9}

    with pytest.raises(FailedPrecondition) as caught:
        reproduce_pending_request(resealed(derived, other_settings))
    assert caught.value.reason == "PENDING_STATE_DIVERGED"
    assert caught.value.metadata == {"element": "model_settings"}

    def spent_requests(state: dict[str, Any]) -> None:
        state["limits"]["request_limit"] = state["usage"]["requests"]

    with pytest.raises(FailedPrecondition) as caught:
        reproduce_pending_request(resealed(derived, spent_requests))
    assert caught.value.reason == "PENDING_REQUEST_NOT_SENT"


def test_the_derived_checkpoint_is_verified(derived: bytes, basic: Case) -> None:
    envelope = json.loads(derived)
    envelope["state"]["usage"]["requests"] += 1  # not sealed again
    for raw, reason in (
        (canonical_bytes(envelope), "CHECKPOINT_DIGEST_MISMATCH"),
        (json.dumps(json.loads(derived), indent=1).encode(), "CHECKPOINT_NOT_CANONICAL"),
        (basic.checkpoint, "CHECKPOINT_FORMAT_UNSUPPORTED"),
    ):
        with pytest.raises(FailedPrecondition) as caught:
            reproduce_pending_request(raw)
        assert caught.value.reason == reason
    with pytest.raises(InvalidArgument) as malformed:
        reproduce_pending_request(b"[1]")
    assert malformed.value.reason == "CHECKPOINT_MALFORMED"


def test_the_rpc_on_a_real_server(derived: bytes) -> None:
    with serve("reconstruction", bindings()) as server:
        stub = reconstruction_pb2_grpc.ReconstructionServiceStub(
            server.channel("candidate-service-token")
        )
        answer = stub.ReproducePendingRequest(
            reconstruction_pb2.ReproducePendingRequestRequest(derived_checkpoint=derived)
        )
        direct = reproduce_pending_request(derived)
        assert answer.wire_request == direct.wire
        assert (answer.wire_digest, answer.wire_length) == (direct.wire_digest, direct.wire_length)
        assert answer.parts_json == direct.parts_json
        assert answer.reproduction_digest == direct.reproduction_digest
        assert answer.history_digest == direct.part_digests["history"]
        assert answer.limits_digest == direct.part_digests["limits"]
        expect_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            "FIELD_REQUIRED",
            lambda: stub.ReproducePendingRequest(
                reconstruction_pb2.ReproducePendingRequestRequest()
            ),
        )
        expect_error(
            grpc.StatusCode.FAILED_PRECONDITION,
            "CHECKPOINT_FORMAT_UNSUPPORTED",
            lambda: stub.ReproducePendingRequest(
                reconstruction_pb2.ReproducePendingRequestRequest(
                    derived_checkpoint=load_case("v1_basic").checkpoint
                )
            ),
        )
