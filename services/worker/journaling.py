"""The worker's native records, written before what they describe happens.

- :class:`Journal` appends the worker's own entries at the head it last wrote, each naming the
  execution request and lease generation it holds (a fenced write on the ledger), and stops the
  worker at the first refusal: nothing after a refused write is attempted.
- :class:`JournalingTransport` sits under the provider's HTTP client: ``model_request_sent``
  (exact wire digest and length) is recorded before the bytes leave; the raw response is stored
  and ``response_consumed`` and one ``tool_call_granted`` per call are recorded before the SDK
  parses it.
- :class:`JournalingModel` records the outcome of a granted call that never reached an effect
  (for example a query the tool refuses as ``invalid_query``) from the history the SDK sends
  next.
- :class:`JournalingEffects` records ``tool_intent`` before each effect runs and
  ``tool_outcome`` after it, and charges a command through ``RecordCommand`` before it runs.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import httpx2
from pydantic import ValidationError
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.messages import ModelMessage, ModelRequest, RetryPromptPart, ToolReturnPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from forge.continuity.v1 import common_pb2
from services.worker.effects import SourceEffects
from services.worker.ledger_port import LedgerPort, LedgerRefused
from services.worker.stopping import (
    MINIMUM_EFFECT_SECONDS,
    EffectBounds,
    LeaseExhausted,
    unbounded,
)
from shared.agent import GRANTS
from shared.agent.evidence import EvidenceEnvelope
from shared.continuity.canonical import digest_of, sha256_digest
from shared.continuity.timeutil import to_text, utc_now

T = TypeVar("T")
IDENTIFIER_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._:-]")
#: Headers that describe the transfer of the provider's body, not the body handed to the SDK.
TRANSFER_HEADERS: Final = frozenset({"content-encoding", "content-length", "transfer-encoding"})
#: The records written before an effect: none is written once the worker may start no effect.
EFFECT_RECORDS: Final = frozenset({"model_request_sent", "tool_intent"})
#: Seconds between looks at a stop request while a provider answer is awaited.
ANSWER_SLICE: Final = 0.2


class WorkerStopped(Exception):
    """A ledger write was refused; the worker does nothing more."""

    def __init__(self, refused: LedgerRefused) -> None:
        super().__init__(str(refused))
        self.refused = refused


class Journal:
    """The worker's writes under one claim (thread-safe: tools may run in parallel)."""

    def __init__(
        self,
        port: LedgerPort,
        claimed: common_pb2.ExecutionRequest,
        head: str,
        echo: Callable[[common_pb2.JournalEntry], None] | None = None,
        *,
        source_revision: str = "",
        bounds: EffectBounds | None = None,
    ) -> None:
        self.port = port
        # Checked before each record that precedes an effect: no effect starts after a stop
        # request or too near the lease's end (services.worker.stopping).
        self.bounds = bounds if bounds is not None else unbounded()
        self.claimed = claimed
        self.head = head
        # The sequence of ``head`` (0: unknown): where a read-back after a lost answer starts.
        self.head_sequence = 0
        # The run's source revision: the source cut every granted call observes.
        self.source_revision = source_revision
        self.echo = echo
        self.stopped: LedgerRefused | None = None
        self._lock = threading.Lock()

    def _guarded(self, write: Callable[[], T]) -> T:
        """Run one write; a refusal is remembered and stops every later write."""
        if self.stopped is not None:
            raise WorkerStopped(self.stopped)
        try:
            return write()
        except LedgerRefused as refused:
            self.stopped = refused
            raise WorkerStopped(refused) from None

    def write(self, kind: str, payload: Mapping[str, object]) -> common_pb2.JournalEntry:
        """Append one of the worker's own entries at the head it last wrote."""
        if kind in EFFECT_RECORDS:
            self.bounds.start(MINIMUM_EFFECT_SECONDS)
        number = common_pb2.JournalEntryKind.Value(f"JOURNAL_ENTRY_KIND_{kind.upper()}")
        body = {
            **payload,
            "execution_request_id": self.claimed.execution_request_id,
            "lease_generation": self.claimed.lease.generation,
        }
        with self._lock:
            entry = self._guarded(
                lambda: self.port.append(
                    self.claimed.run_id, self.head, number, body, self.head_sequence
                )
            )
            self.head, self.head_sequence = entry.hash, entry.sequence
        if self.echo is not None:
            self.echo(entry)
        return entry

    def put_blob(self, content: bytes) -> str:
        return self._guarded(lambda: self.port.put_blob(content))

    def record_command(self, command_id: str, command_digest: str) -> Any:
        """Charge a command before it runs; the ledger's receipt row becomes the new head."""
        self.bounds.start(MINIMUM_EFFECT_SECONDS)
        with self._lock:
            receipt = self._guarded(
                lambda: self.port.record_command(self.claimed, command_id, command_digest)
            )
            # Charged now, or by this very call whose answer was lost and read back (the
            # receipt's entry is past the head this worker last wrote): the new head.
            ours = receipt.charged or 0 < self.head_sequence < receipt.journal_sequence
            if ours and receipt.journal_hash and self.echo is None:
                self.head, self.head_sequence = receipt.journal_hash, receipt.journal_sequence
            elif ours:
                # the entry itself, to echo it (or from a ledger of an earlier release, which
                # does not answer with the receipt's hash)
                entry = self._guarded(
                    lambda: self.port.journal(self.claimed.run_id, receipt.journal_sequence)
                )[0]
                self.head, self.head_sequence = entry.hash, entry.sequence
                if self.echo is not None:
                    self.echo(entry)
        return receipt


@dataclass
class GrantedCall:
    """A call of a consumed response, granted and waiting for its effect or its outcome."""

    call_id: str
    tool_name: str
    arguments: Any
    taken: bool = False
    closed: bool = False


@dataclass
class Calls:
    """The granted calls of the consumed responses, in order."""

    granted: list[GrantedCall] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, call: GrantedCall) -> None:
        with self._lock:
            self.granted.append(call)

    def take(self, tool_name: str, matches: Callable[[Any], bool]) -> GrantedCall | None:
        """The first untaken granted call of ``tool_name`` whose arguments ``matches`` accepts
        (the adapter hands effects its validated arguments, not the call id; calls with equal
        arguments have equal effects, so the first one is as good as any)."""
        with self._lock:
            for call in self.granted:
                if not call.taken and call.tool_name == tool_name and matches(call.arguments):
                    call.taken = True
                    return call
        return None

    def without_effect(self) -> list[GrantedCall]:
        """Granted calls that reached no effect and have no outcome yet."""
        with self._lock:
            return [c for c in self.granted if not c.taken and not c.closed]


def arguments_of(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


class JournalingTransport(httpx2.AsyncBaseTransport):
    """The provider's HTTP transport, recording each model request and consumed response."""

    def __init__(
        self,
        journal: Journal,
        calls: Calls,
        checkpoint_digest: str,
        inner: httpx2.AsyncBaseTransport | None = None,
        provider_timeout: float = 600.0,
    ) -> None:
        self.journal = journal
        # Seconds one provider request may take, cut to what is left of the lease.
        self.provider_timeout = provider_timeout
        self.calls = calls
        self.checkpoint_digest = checkpoint_digest
        self.inner = inner or httpx2.AsyncHTTPTransport()
        self.sent = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        self.sent += 1
        claimed = self.journal.claimed
        request_id = IDENTIFIER_UNSAFE.sub(
            "-", f"{claimed.execution_request_id}.g{claimed.lease.generation}.m{self.sent}"
        )
        wire = json.loads(body) if body else {}
        bounds = self.journal.bounds
        timeout = bounds.start(self.provider_timeout)
        await asyncio.to_thread(
            self.journal.write,
            "model_request_sent",
            {
                "request_id": request_id,
                "checkpoint_digest": self.checkpoint_digest,
                "request_index": self.sent,
                "wire_digest": sha256_digest(body),
                "wire_length": len(body),
                "model": str(wire.get("model", "")) if isinstance(wire, dict) else "",
                "endpoint": str(request.url),
            },
        )
        response, raw = await self._answer(request, timeout)
        if response.status_code == 200:
            await asyncio.to_thread(self._consumed, request_id, raw)
        headers = [(k, v) for k, v in response.headers.items() if k.lower() not in TRANSFER_HEADERS]
        return httpx2.Response(response.status_code, headers=headers, content=raw, request=request)

    async def _answer(
        self, request: httpx2.Request, timeout: float
    ) -> tuple[httpx2.Response, bytes]:
        """The provider's answer, waited for at most ``timeout`` (the lease) and abandoned when
        a stop's grace is over: the request stays sent with nothing consumed."""

        async def receive() -> tuple[httpx2.Response, bytes]:
            response = await self.inner.handle_async_request(request)
            raw = await response.aread()
            await response.aclose()
            return response, raw

        task = asyncio.ensure_future(receive())
        deadline = time.monotonic() + timeout
        shutdown = self.journal.bounds.shutdown
        while True:
            done, _ = await asyncio.wait({task}, timeout=ANSWER_SLICE)
            if done:
                return task.result()
            if shutdown.abandon_now() or time.monotonic() >= deadline:
                task.cancel()
                shutdown.check()
                raise LeaseExhausted(self.journal.bounds.lease.remaining())

    def _consumed(self, request_id: str, raw: bytes) -> None:
        digest = self.journal.put_blob(raw)
        self.journal.write(
            "response_consumed",
            {
                "request_id": request_id,
                "response_digest": digest,
                "consumed_at": to_text(utc_now()),
            },
        )
        try:
            message = json.loads(raw)["choices"][0]["message"]
            tool_calls = list(message.get("tool_calls") or [])
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return  # the SDK refuses what it cannot parse; nothing was granted
        for call in tool_calls:
            function = call.get("function") or {}
            name, call_id = str(function.get("name")), call.get("id")
            if name not in GRANTS or not isinstance(call_id, str):
                continue  # outside the contract: the SDK never runs it, so it is never granted
            arguments = arguments_of(str(function.get("arguments") or ""))
            self.journal.write(
                "tool_call_granted",
                {
                    "call_id": call_id,
                    "tool_name": name,
                    "args_digest": digest_of(arguments) if arguments is not None else "",
                    "grant": GRANTS[name],
                    "source_cut": self.journal.source_revision,
                },
            )
            self.calls.add(GrantedCall(call_id, name, arguments))


class JournalingModel(WrapperModel):
    """Records, before each next request, the outcome of every granted call that reached no
    effect, as the SDK reports it in the request's history."""

    def __init__(self, wrapped: Any, journal: Journal, calls: Calls) -> None:
        super().__init__(wrapped)
        self.journal = journal
        self.calls = calls

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> Any:
        await asyncio.to_thread(self._outcomes, messages[-1] if messages else None)
        return await self.wrapped.request(messages, model_settings, model_request_parameters)

    def _outcomes(self, last: ModelMessage | None) -> None:
        if not isinstance(last, ModelRequest):
            return
        parts = {
            part.tool_call_id: part
            for part in last.parts
            if isinstance(part, ToolReturnPart | RetryPromptPart)
        }
        for call in self.calls.without_effect():
            part = parts.get(call.call_id)
            if part is None:
                continue
            if isinstance(part, ToolReturnPart) and part.outcome == "success":
                outcome: dict[str, object] = {
                    "status": "succeeded",
                    "result_digest": digest_of(part.model_response_object()),
                    "effect": "none",
                }
            else:
                outcome = {"status": "failed", "reason": "refused_before_effect", "effect": "none"}
            self.journal.write("tool_outcome", {"call_id": call.call_id, **outcome})
            call.closed = True


def _evidence_query(arguments: Any) -> Any:
    """The query the adapter hands the evidence effect for these call arguments."""
    try:
        envelope = EvidenceEnvelope.model_validate_json(json.dumps(arguments))
    except (ValidationError, TypeError, ValueError):
        return None
    return envelope.query.model_dump()


def command_id_of(execution_request_id: str, call_id: str) -> str:
    """The command's id in the command ledger: one per granted call of one request, so a
    repeated record of the same call charges nothing."""
    return IDENTIFIER_UNSAFE.sub("-", f"{execution_request_id}.{call_id}")[:128]


class JournalingEffects:
    """The adapter's ``WorkerEffects`` over :class:`SourceEffects`, journaled (module docstring)."""

    def __init__(self, base: SourceEffects, journal: Journal, calls: Calls) -> None:
        self.base = base
        self.journal = journal
        self.calls = calls

    def _call(self, tool_name: str, matches: Callable[[Any], bool]) -> GrantedCall:
        call = self.calls.take(tool_name, matches)
        if call is None:
            raise RuntimeError(f"no granted {tool_name} call has these arguments")
        return call

    def _effect(
        self,
        call: GrantedCall,
        run: Callable[[], T],
        details: Callable[[T], Mapping[str, object]] = lambda _: {},
    ) -> T:
        try:
            result = run()
        except WorkerStopped:
            raise
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            # the effect failed: recorded, and the model sees the error and may correct itself
            self._outcome(call, {"status": "failed", "error": type(exc).__name__})
            raise ModelRetry(f"{call.tool_name} failed: {exc}") from exc
        outcome = {"status": "succeeded", "result_digest": digest_of(result), **details(result)}
        self._outcome(call, outcome)
        return result

    def _intent(self, call: GrantedCall, **extra: object) -> None:
        self.journal.write(
            "tool_intent",
            {
                "call_id": call.call_id,
                "tool_name": call.tool_name,
                "grant": GRANTS[call.tool_name],
                **extra,
            },
        )

    def _outcome(self, call: GrantedCall, outcome: Mapping[str, object]) -> None:
        self.journal.write("tool_outcome", {"call_id": call.call_id, **outcome})
        call.closed = True

    def read_evidence(self, query: Mapping[str, Any]) -> dict[str, Any]:
        call = self._call("read_run_evidence", lambda a: _evidence_query(a) == dict(query))
        self._intent(call)
        return self._effect(call, lambda: self.base.read_evidence(query))

    def list_files(self, path: str) -> list[str]:
        call = self._call("list_files", lambda a: isinstance(a, dict) and a.get("path") == path)
        self._intent(call)
        return self._effect(call, lambda: self.base.list_files(path))

    def read_file(self, path: str) -> str:
        call = self._call("read_file", lambda a: isinstance(a, dict) and a.get("path") == path)
        self._intent(call)
        return self._effect(call, lambda: self.base.read_file(path))

    def run_command(self, argv: Sequence[str]) -> dict[str, Any]:
        listed = list(argv)
        call = self._call("run_command", lambda a: isinstance(a, dict) and a.get("argv") == listed)
        command_id = command_id_of(self.journal.claimed.execution_request_id, call.call_id)
        command_digest = digest_of({"argv": listed})
        self._intent(call, command_id=command_id, command_digest=command_digest)
        if not self.base.granted(listed):
            # Not granted: never charged, never run; the model is told so.
            self._outcome(call, {"status": "failed", "reason": "command_not_granted"})
            return {"status": "not_granted", "argv": listed}
        # Charged before it runs; a refusal (limit, lease, policy, authority) stops the worker
        # here, and the command never runs.
        self.journal.record_command(command_id, command_digest)
        result = self._effect(
            call,
            lambda: self.base.run_command(listed),
            lambda ran: {"exit_code": ran["exit_code"]},
        )
        return result
