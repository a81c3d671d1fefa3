"""A scripted OpenAI-compatible provider on loopback, for `make demo` and the worker's tests.

It speaks the chat-completions protocol over real HTTP and answers each request with the turn a
real model would send next for the held run's task, reading the history it receives: first the
corrected ``read_run_evidence`` query (the rejected query, its page in the documented range),
then two ``list_files`` cycles, two ``run_command`` cycles and a final answer. It keeps the exact
bytes of every request, so a test can check what the worker really sent (the consumed response
inside the history once, never a request for that turn again).

``ScriptedProvider(script=...)`` replaces the turns: a callable from (request index, parsed
request body) to the assistant message to answer with. :class:`HeldTurn` holds one answer back
until released: the worker waits on its provider as on a slow model while the caller acts (the
demo and the host controls kill it there).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

from services.demo.loopback import LoopbackProvider

Message = dict[str, Any]
Script = Callable[[int, dict[str, Any]], Message]

#: Commands the reference script runs (the worker must be granted them to run them).
DEFAULT_COMMANDS: Final[tuple[tuple[str, ...], ...]] = (
    ("python3", "-m", "compileall", "-q", "src"),
    ("python3", "-m", "unittest", "discover", "-s", "tests", "-q"),
)
FINAL_ANSWER: Final = (
    "Read the run's log evidence with a corrected query, inspected src/ and tests/, compiled the "
    "sources and ran the unit tests; both commands finished."
)
MODEL: Final = "gpt-4o-2024-08-06"


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, separators=(",", ":"))},
    }


def rejected_query(body: dict[str, Any]) -> dict[str, Any] | None:
    """The query of the last ``read_run_evidence`` call whose result was ``invalid_query``."""
    messages = body.get("messages") or []
    invalid = {
        m.get("tool_call_id")
        for m in messages
        if m.get("role") == "tool" and '"invalid_query"' in str(m.get("content"))
    }
    found = None
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            if call.get("id") in invalid and function.get("name") == "read_run_evidence":
                arguments = json.loads(function.get("arguments") or "{}")
                found = arguments.get("query") if isinstance(arguments, dict) else None
    return found if isinstance(found, dict) else None


def reference_script(commands: Sequence[Sequence[str]] = DEFAULT_COMMANDS) -> Script:
    """The reference continuation: evidence, two listings, two commands, a final answer."""

    def turn(index: int, body: dict[str, Any]) -> Message:
        call_id = f"call_scripted_{index + 1}"
        if index == 0:
            query = dict(rejected_query(body) or {"run_id": "run-unknown", "kind": "log"})
            # The tool's description says pages run from 1 to 10; the model starts at the first.
            query["page"] = 1
            calls = [tool_call(call_id, "read_run_evidence", {"query": query})]
        elif index in (1, 2):
            calls = [tool_call(call_id, "list_files", {"path": ("src", "tests")[index - 1]})]
        elif index in (3, 4):
            calls = [tool_call(call_id, "run_command", {"argv": list(commands[index - 3])})]
        else:
            return {"role": "assistant", "content": FINAL_ANSWER}
        return {"role": "assistant", "content": None, "tool_calls": calls}

    return turn


class HeldTurn:
    """A script answering as ``script`` does, but holding answer ``at`` until :attr:`released`
    is set (or ``hold_seconds`` pass)."""

    def __init__(self, script: Script, at: int, hold_seconds: float = 300.0) -> None:
        self.script = script
        self.at = at
        self.hold_seconds = hold_seconds
        self.reached = threading.Event()
        self.released = threading.Event()

    def __call__(self, index: int, body: dict[str, Any]) -> Message:
        if index == self.at:
            self.reached.set()
            self.released.wait(timeout=self.hold_seconds)
        return self.script(index, body)

    def wait(self, timeout: float) -> bool:
        """Whether request ``at`` arrived within ``timeout`` seconds."""
        return self.reached.wait(timeout=timeout)


def listing_forever(index: int, body: dict[str, Any]) -> Message:
    """A model that never stops asking for listings: only the usage limits end its run."""
    calls = [tool_call(f"call_list_{index + 1}", "list_files", {"path": "src"})]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def completion(index: int, message: Message, request_bytes: int) -> bytes:
    """A chat completion carrying ``message``, with usage as a provider reports it."""
    body = {
        "id": f"chatcmpl-scripted-{index + 1}",
        "object": "chat.completion",
        "created": 1796300000 + index,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                "message": message,
            }
        ],
        "usage": {
            "prompt_tokens": request_bytes // 4,
            "completion_tokens": 24,
            "total_tokens": request_bytes // 4 + 24,
        },
    }
    return json.dumps(body, separators=(",", ":")).encode()


class ScriptedProvider(LoopbackProvider):
    """A loopback chat-completions endpoint answering from a script; keeps every request."""

    def __init__(self, script: Script | None = None, port: int = 0) -> None:
        self.received: list[tuple[str, bytes]] = []  # (path, body) of each request, in order
        self._script = script or reference_script()
        self._lock = threading.Lock()
        super().__init__(port)

    def answer(self, path: str, body: bytes) -> tuple[int, bytes]:
        with self._lock:
            index = len(self.received)
            self.received.append((path, body))
        if not path.endswith("/chat/completions"):
            return 404, b'{"error":{"message":"not found"}}'
        return 200, completion(index, self._script(index, json.loads(body)), len(body))

    def requests(self) -> list[dict[str, Any]]:
        """Every request body received, parsed."""
        return [json.loads(body) for _, body in self.received]
