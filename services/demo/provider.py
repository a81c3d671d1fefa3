"""The demo's worker sending a continuation's first provider request; a provider refusing it.

``RefusingProvider`` is a loopback HTTP server that answers every request with HTTP 400 (a
validation refusal: no job, no dispatch) and keeps the exact bytes it received. ``send_refused``
resumes a derived checkpoint through the installed worker and the real pinned SDK over a real
HTTP client to that server, so the retained ``model_request_sent`` entry describes the bytes the
SDK actually sent, not bytes made up for the story.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Final

import httpx2
from openai import AsyncOpenAI
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from services.demo.loopback import LoopbackProvider
from shared.agent.pending import (
    PendingRequest,
    pending_request,
    read_derived_checkpoint,
    request_parts,
    send_pending,
)

REFUSAL: Final = (
    b'{"error":{"message":"request refused during validation","type":"invalid_request_error"}}'
)


class RefusingProvider(LoopbackProvider):
    """A loopback chat-completions endpoint that refuses every request with HTTP 400."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, bytes]] = []  # (method, path, body)
        super().__init__()

    def answer(self, path: str, body: bytes) -> tuple[int, bytes]:
        self.received.append(("POST", path, body))
        return 400, REFUSAL


@dataclass(frozen=True)
class SentRequest:
    """The request the worker sent and the provider refused: the bytes the provider received."""

    endpoint: str
    request: PendingRequest

    def model_request_sent(
        self, request_id: str, execution_request_id: str, principal: str, *, lease_generation: int
    ) -> dict[str, object]:
        """The ``model_request_sent`` journal payload a worker retains for this request, under
        the lease generation it holds (only the lease holder may append it)."""
        sent = self.request
        digests = sent.part_digests
        return {
            "request_id": request_id,
            "execution_request_id": execution_request_id,
            "lease_generation": lease_generation,
            "checkpoint_digest": sent.derived_checkpoint_digest,
            "wire_digest": sent.wire_digest,
            "wire_length": sent.wire_length,
            "model": sent.model,
            "endpoint": self.endpoint,
            "principal": principal,
            **{f"{name}_digest": digests[name] for name in digests},
        }


def send_refused(derived_checkpoint: bytes, provider: RefusingProvider) -> SentRequest:
    """Resume ``derived_checkpoint`` against ``provider`` through the real SDK; the provider
    refuses the first request and the run stops there."""
    record = read_derived_checkpoint(derived_checkpoint)
    before = len(provider.received)

    async def send() -> Any:
        async with httpx2.AsyncClient() as http:
            client = AsyncOpenAI(
                api_key="demo-key", base_url=provider.base_url, max_retries=0, http_client=http
            )
            model = OpenAIChatModel(
                record.provider["model"], provider=OpenAIProvider(openai_client=client)
            )
            return await send_pending(record, model)

    sent = asyncio.run(send())
    if not isinstance(sent.error, ModelHTTPError) or sent.error.status_code != 400:
        raise RuntimeError(f"the provider did not refuse the request: {sent.error!r}")
    if len(provider.received) != before + 1:
        raise RuntimeError("the worker did not send exactly one request")
    method, path, wire = provider.received[-1]
    endpoint = provider.base_url.removesuffix("/v1") + path
    parts = request_parts(record, sent)
    return SentRequest(endpoint, pending_request(record, method, endpoint, wire, parts))
