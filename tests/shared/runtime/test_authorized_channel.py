"""open_channel's calls carry the bearer token and a timeout, by every way a stub calls (plain,
with_call, future, a server stream), through a real gRPC server on loopback that answers with the
authorization and deadline it received; a caller's own authorization is kept, and a channel
without a token sends none."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from shared.contract.channels import open_channel
from shared.runtime.deadline import reset_inbound_deadline, set_inbound_deadline

SERVICE = "test.Echo"


def _seen(context: grpc.ServicerContext) -> bytes:
    authorization = dict(context.invocation_metadata()).get("authorization", "-")
    remaining = context.time_remaining()
    timeout = "none" if remaining is None or remaining > 10**6 else f"{remaining:.0f}"
    return f"{authorization!s}|{timeout}".encode()


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    def unary(_request: bytes, context: grpc.ServicerContext) -> bytes:
        return _seen(context)

    def stream(_request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        yield _seen(context)
        yield b"second"

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                SERVICE,
                {
                    "Unary": grpc.unary_unary_rpc_method_handler(unary),
                    "Stream": grpc.unary_stream_rpc_method_handler(stream),
                },
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(0).wait()


def test_every_kind_of_call_carries_the_token_and_the_default_timeout(target: str) -> None:
    with open_channel(target, "tok", default_timeout=60) as channel:
        unary = channel.unary_unary(f"/{SERVICE}/Unary")
        stream = channel.unary_stream(f"/{SERVICE}/Stream")
        answers = [
            unary(b"x"),
            unary.with_call(b"x")[0],
            unary.future(b"x").result(),
            next(iter(stream(b"x"))),
        ]
    assert answers == [b"Bearer tok|60"] * 4


def test_a_callers_own_authorization_and_timeout_are_kept(target: str) -> None:
    with open_channel(target, "tok", default_timeout=60) as channel:
        unary = channel.unary_unary(f"/{SERVICE}/Unary")
        own = unary(b"x", metadata=[("authorization", "Bearer other")], timeout=30)
        beside = unary(b"x", metadata=[("x-other", "1")])
    assert own == b"Bearer other|30"
    assert beside == b"Bearer tok|60"


def test_the_inbound_deadline_caps_the_timeout(target: str) -> None:
    token = set_inbound_deadline(5.0)
    try:
        with open_channel(target, "tok", default_timeout=60) as channel:
            capped = channel.unary_unary(f"/{SERVICE}/Unary")(b"x")
    finally:
        reset_inbound_deadline(token)
    assert capped == b"Bearer tok|5"


def test_a_channel_without_a_token_sends_none(target: str) -> None:
    with open_channel(target, "", default_timeout=60) as channel:
        assert channel.unary_unary(f"/{SERVICE}/Unary")(b"x") == b"-|60"
