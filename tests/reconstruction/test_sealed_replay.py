"""The sealed path: no socket, no second request, no original callback."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import httpx2
import pytest
from openai import APIConnectionError, AsyncOpenAI

from services.reconstruction.domain import reconstruct_invalid_read
from shared.agent import sealed
from shared.agent.sealed import SealedRequestRefused, SealedTransport
from tests.reconstruction.conftest import Case


def test_no_socket_or_dns_during_reconstruction(
    basic: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[str] = []

    def refuse(name: str) -> Any:
        def blocked(*args: Any, **kwargs: Any) -> Any:
            attempts.append(name)
            raise OSError(f"network disabled in this test: {name}")

        return blocked

    monkeypatch.setattr(socket.socket, "connect", refuse("connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("connect_ex"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    monkeypatch.setattr(socket, "gethostbyname", refuse("gethostbyname"))

    result = reconstruct_invalid_read(
        basic.checkpoint, basic.raw_response, basic.version, basic.consumed_at
    )
    assert result.derived_checkpoint_digest.startswith("sha256:")
    assert attempts == []


def test_transport_serves_once_then_refuses() -> None:
    transport = SealedTransport(b'{"ok":true}')
    client = httpx2.Client(transport=transport)
    assert client.get("https://api.openai.com/v1/x").content == b'{"ok":true}'
    with pytest.raises(SealedRequestRefused):
        client.get("https://api.openai.com/v1/x")
    assert len(transport.requests) == 2


def test_openai_client_does_not_retry_a_refusal() -> None:
    transport = SealedTransport(None)
    client = AsyncOpenAI(
        api_key="x",
        base_url="https://api.openai.com/v1",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=transport),
    )

    async def call() -> None:
        await client.chat.completions.create(model="gpt-4o", messages=[])

    with pytest.raises((SealedRequestRefused, APIConnectionError)):
        asyncio.run(call())
    assert len(transport.requests) == 1


def test_exactly_one_request_and_no_callback(basic: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    transports: list[SealedTransport] = []
    effects: list[sealed.RefusingEffects] = []
    real_transport, real_effects = sealed.SealedTransport, sealed.RefusingEffects

    class Tracking(real_transport):  # type: ignore[valid-type,misc]
        def __init__(self, body: bytes | None) -> None:
            super().__init__(body)
            transports.append(self)

    class TrackingEffects(real_effects):  # type: ignore[valid-type,misc]
        def __init__(self) -> None:
            super().__init__()
            effects.append(self)

    monkeypatch.setattr(sealed, "SealedTransport", Tracking)
    monkeypatch.setattr(sealed, "RefusingEffects", TrackingEffects)
    reconstruct_invalid_read(basic.checkpoint, basic.raw_response, 1, basic.consumed_at)
    # One replay transport serving the consumed response, one contract capture that refuses.
    assert [len(t.requests) for t in transports] == [1, 1]
    assert all(e.attempts == [] for e in effects)


def test_refusing_effects_refuse_every_callback() -> None:
    effects = sealed.RefusingEffects()
    for call in (
        lambda: effects.read_evidence({}),
        lambda: effects.list_files("."),
        lambda: effects.read_file("x"),
        lambda: effects.run_command(["make"]),
    ):
        with pytest.raises(sealed.OriginalCallbackRefused):
            call()
    assert effects.attempts == ["read_run_evidence", "list_files", "read_file", "run_command"]
