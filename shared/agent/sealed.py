"""Sealed in-process transports and the SDK runs that use them.

Nothing here can reach a network: the OpenAI client gets an ``httpx2.MockTransport`` (the HTTP
library's own in-process transport) that serves the stored bytes at most once and refuses every
other request, and ``max_retries=0`` so a refusal is never retried.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from copy import copy
from dataclasses import dataclass, field
from typing import Any, NoReturn

import httpx2
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RunUsage, UsageLimits

from shared.agent import AgenticTask, build_agent, execute_agentic
from shared.agent.projection import PARAMETERS
from shared.runtime.errors import FailedPrecondition, Internal


class SealedRequestRefused(Exception):
    """A request tried to leave the process after the sealed response was spent."""


class OriginalCallbackRefused(Exception):
    """An original tool callback was about to run during sealed reconstruction."""


class SealedTransport(httpx2.MockTransport):
    """Serves ``body`` to the first request only; records and refuses every other request."""

    def __init__(self, body: bytes | None) -> None:
        self._body = body
        self.requests: list[bytes] = []
        self.targets: list[tuple[str, str]] = []  # (method, URL) of each request, in order
        super().__init__(self._handle)

    def _handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(bytes(request.content))
        self.targets.append((request.method, str(request.url)))
        if self._body is None or len(self.requests) > 1:
            raise SealedRequestRefused(f"sealed transport refused request {len(self.requests)}")
        return httpx2.Response(
            200, content=self._body, headers={"content-type": "application/json"}
        )


class RefusingEffects:
    """Worker effects for sealed runs: any original callback attempt is recorded and refused."""

    def __init__(self) -> None:
        self.attempts: list[str] = []

    def _refuse(self, name: str) -> NoReturn:
        self.attempts.append(name)
        raise OriginalCallbackRefused(name)

    def read_evidence(self, query: Mapping[str, Any]) -> dict[str, Any]:
        self._refuse("read_run_evidence")

    def list_files(self, path: str) -> list[str]:
        self._refuse("list_files")

    def read_file(self, path: str) -> str:
        self._refuse("read_file")

    def run_command(self, argv: Sequence[str]) -> dict[str, Any]:
        self._refuse("run_command")


def sealed_model(transport: SealedTransport, base_url: str, model_name: str) -> OpenAIChatModel:
    client = AsyncOpenAI(
        api_key="sealed-no-credential",
        base_url=base_url,
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=transport),
    )
    return OpenAIChatModel(model_name, provider=OpenAIProvider(openai_client=client))


@dataclass
class CapturingModel(WrapperModel):
    """Records the messages and SDK request parameters of each request, then delegates."""

    captured: list[tuple[Any, Any, Any]] = field(default_factory=list)

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        self.captured.append(
            (
                json.loads(ModelMessagesTypeAdapter.dump_json(messages)),
                json.loads(json.dumps(model_settings)),
                PARAMETERS.dump_python(model_request_parameters, mode="json"),
            )
        )
        return await self.wrapped.request(messages, model_settings, model_request_parameters)


@dataclass(frozen=True)
class Replay:
    response: ModelResponse
    usage: RunUsage
    request_count: int
    callback_attempts: tuple[str, ...]


async def replay_consumed_response(
    *,
    raw_response: bytes,
    messages: list[ModelMessage],
    usage: RunUsage,
    limits: UsageLimits,
    conversation_id: str,
    base_url: str,
    model_name: str,
) -> Replay:
    """Feed the consumed response to the SDK parser once; stop before tools or a next request."""
    transport = SealedTransport(raw_response)
    effects = RefusingEffects()
    agent = build_agent()
    try:
        async with agent.iter(
            None,
            model=sealed_model(transport, base_url, model_name),
            deps=effects,
            message_history=messages,
            usage=copy(usage),
            usage_limits=limits,
            # The SDK refuses to reuse a run id already in the history; the derived messages get
            # the original identifiers afterwards, so the SDK's fresh one never reaches output.
            conversation_id=conversation_id,
        ) as run:
            node = run.next_node
            while not Agent.is_model_request_node(node):
                if Agent.is_end_node(node) or Agent.is_call_tools_node(node):
                    raise Internal("SEALED_REPLAY_FAILED", "no pending model request to replay")
                node = await run.next(node)
            node = await run.next(node)
            if not Agent.is_call_tools_node(node):
                raise Internal("SEALED_REPLAY_FAILED", "the consumed response was not parsed")
            # Stop here: the next node would run tools and build the next request.
            response, run_usage = node.model_response, copy(run.ctx.state.usage)
    except (Internal, FailedPrecondition):
        raise
    except Exception as exc:  # the SDK's own parse or limit refusal
        raise FailedPrecondition(
            "CONSUMED_RESPONSE_UNPARSEABLE",
            f"the pinned SDK could not consume the stored response: {type(exc).__name__}: {exc}",
        ) from exc
    if len(transport.requests) != 1 or effects.attempts:
        raise Internal("SEALED_TRANSPORT_VIOLATION", "more than one request or a callback ran")
    return Replay(response, run_usage, len(transport.requests), tuple(effects.attempts))


@dataclass(frozen=True)
class CapturedContract:
    """What the installed ``execute_agentic`` actually renders, at SDK level and on the wire."""

    messages: Any
    model_settings: Any
    model_request_parameters: Any
    wire_request: Any


async def capture_current_contract(base_url: str, model_name: str) -> CapturedContract:
    """Run the installed entry point against a transport that refuses its first request."""
    transport = SealedTransport(None)
    effects = RefusingEffects()
    capturing = CapturingModel(sealed_model(transport, base_url, model_name))
    task = AgenticTask(run_id="contract-capture", conversation_id="contract-capture", prompt=".")
    try:
        await execute_agentic(task, capturing, effects)
    except Exception as exc:  # expected: the sealed transport refused the request
        if not transport.requests:
            raise Internal("CONTRACT_CAPTURE_FAILED", f"{type(exc).__name__}: {exc}") from exc
    else:
        raise Internal("CONTRACT_CAPTURE_FAILED", "the sealed transport served a response")
    if len(transport.requests) != 1 or len(capturing.captured) != 1 or effects.attempts:
        raise Internal("SEALED_TRANSPORT_VIOLATION", "contract capture left the sealed path")
    messages, settings, params = capturing.captured[0]
    return CapturedContract(messages, settings, params, json.loads(transport.requests[0]))
