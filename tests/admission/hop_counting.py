"""Counting what one admission does at each hop (issue 50 §2): per RPC a server handles, the bytes
of its request and response, and the protobuf serializations and parses, JSON encodings and
decodings, SHA-256 hashers and SQL statements the handling thread runs, including the client
side of the calls it makes downstream. The four services run in-process (tests/admission/
conftest.py), so Python's profiler sees every call; each is charged to the RPC the thread is
serving (grpc's ``_unary_response_in_pool`` frame, which parses the request, runs the handler and
serializes the response), or to ``caller`` on the calling thread. Counting, unlike timing, is
deterministic, so it holds on a busy machine."""

from __future__ import annotations

import itertools
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from google.protobuf.message import Message
from sqlalchemy import Engine, event

from forge.continuity.v1 import admission_pb2, candidate_pb2, ledger_pb2, reconstruction_pb2

CALLER = "caller"
# What each counted call is, by the called function's name: the C functions (protobuf's upb,
# hashlib, orjson) arrive as "c_call" events, the Python ones (json, the canonical encoder) as
# "call" events of their code.
C_CALLS = {
    "SerializeToString": "serialize",
    "FromString": "parse",
    "ParseFromString": "parse",
    "MergeFromString": "parse",
    "openssl_sha256": "hash",
    "sha256": "hash",
}
C_MODULE_CALLS = {("orjson", "dumps"): "json_encode", ("orjson", "loads"): "json_decode"}
PY_CALLS = {("json", "dumps"): "json_encode", ("json", "loads"): "json_decode"}
KINDS = ("bytes", "serialize", "parse", "json_encode", "json_decode", "hash", "statements")
_SERVING = ("_unary_response_in_pool", "_stream_response_in_pool")
_RECEIVING = "_handle_call"


@dataclass
class HopCounts:
    """Counts by hop (``/pkg.Service/Method``, ``caller``, or another thread's name), then by
    kind. A served call's counts are kept under its slot until its handler names the method
    (the request is parsed before the handler runs)."""

    by_slot: dict[int, Counter[str]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    receiving: set[int] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, slot: int | str, kind: str, amount: int = 1) -> None:
        with self._lock:
            if isinstance(slot, str):
                slot = self._named(slot)
            self.by_slot.setdefault(slot, Counter())[kind] += amount

    def _named(self, name: str) -> int:
        slot = -1 - len([s for s in self.names if s < 0])
        for known, known_name in self.names.items():
            if known < 0 and known_name == name:
                return known
        self.names[slot] = name
        return slot

    def name(self, slot: int, name: str, received: bool = False) -> None:
        """Name a slot; ``received``: the receiving side of a call (not a call of its own)."""
        with self._lock:
            self.names[slot] = name
            if received:
                self.receiving.add(slot)

    def table(self) -> list[dict[str, Any]]:
        """One row per hop (the served calls of one method summed), in the order first seen,
        with how many calls it stands for."""
        rows: dict[str, dict[str, Any]] = {}
        for slot, counts in self.by_slot.items():
            name = self.names.get(slot, "unnamed")
            row = rows.setdefault(name, {"hop": name, "calls": 0, **dict.fromkeys(KINDS, 0)})
            row["calls"] += 1 if slot >= 0 and slot not in self.receiving else 0
            for kind in KINDS:
                row[kind] += counts[kind]
        return list(rows.values())


class _Profiler:
    """The profile function of every thread while counting: which RPC a thread serves, and the
    counted calls it makes."""

    def __init__(self) -> None:
        self.counts: HopCounts | None = None
        self._local = threading.local()
        self._slots = itertools.count()

    def hop(self) -> int | str:
        stack: list[int] = getattr(self._local, "hops", [])
        if stack:
            return stack[-1]
        thread = threading.current_thread()
        return CALLER if thread is threading.main_thread() else f"thread {thread.name}"

    def __call__(self, frame: FrameType, what: str, arg: Any) -> None:
        counts = self.counts
        if counts is None:
            return
        if what == "c_call":
            self._c_call(counts, arg)
            return
        code = frame.f_code
        if code.co_filename.endswith("_server.py") and code.co_name in (*_SERVING, _RECEIVING):
            self._served(counts, frame, what)
            return
        if frame.f_globals.get("__name__") == "shared.runtime.metrics" and code.co_name == "handle":
            self._handler(counts, frame, what, arg)
        elif what == "call":
            kind = PY_CALLS.get((frame.f_globals.get("__name__", ""), code.co_name))
            if kind:
                counts.add(self.hop(), kind)

    def _c_call(self, counts: HopCounts, function: Any) -> None:
        name = getattr(function, "__name__", "")
        module = getattr(function, "__module__", "")
        kind = C_CALLS.get(name) or C_MODULE_CALLS.get((module, name))
        if not kind:
            return
        hop = self.hop()
        if kind == "parse" and isinstance(hop, str) and hop != CALLER:
            # gRPC parses a request on the server's receiving thread, outside any frame that
            # names the method: the request's type does.
            hop = _method_of_request(getattr(function, "__self__", None)) or hop
        counts.add(hop, kind)

    def _served(self, counts: HopCounts, frame: FrameType, what: str) -> None:
        """A server thread enters or leaves a call: the pool's frame (parse, handler, answer),
        or the receiving thread's, which runs the interceptors (the gate) on it."""
        hops: list[int] = self._local.__dict__.setdefault("hops", [])
        if what == "return":
            if hops:
                hops.pop()
            return
        if what != "call":
            return
        slot = next(self._slots)
        if frame.f_code.co_name == _RECEIVING:
            method = frame.f_locals["method_with_handler"].name()
            if method:
                service, _, name = method.strip("/").partition("/")
                counts.name(slot, f"{service}.{name}", received=True)
        hops.append(slot)

    def _handler(self, counts: HopCounts, frame: FrameType, what: str, arg: Any) -> None:
        """The counted handler (shared.runtime.metrics) names the call and sees its request
        and its answer."""
        slot = self.hop()
        if what == "call":
            if isinstance(slot, int):
                # the method's metric series, which the handler's closure holds
                outcomes = frame.f_locals["outcomes"]
                counts.name(slot, f"{outcomes._service}.{outcomes._name}")
            message = frame.f_locals.get("request")
        elif what == "return":
            message = arg
        else:
            return
        if isinstance(message, Message):
            counts.add(slot, "bytes", message.ByteSize())


def _method_of_request(message_class: object) -> str | None:
    """The one RPC of the contract whose request is ``message_class``, if exactly one."""
    descriptor = getattr(message_class, "DESCRIPTOR", None)
    found = _REQUESTS.get(getattr(descriptor, "full_name", ""), [])
    return found[0] if len(found) == 1 else None


def _requests() -> dict[str, list[str]]:
    requests: dict[str, list[str]] = {}
    for module in (admission_pb2, candidate_pb2, ledger_pb2, reconstruction_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                requests.setdefault(method.input_type.full_name, []).append(
                    f"{service.full_name}.{method.name}"
                )
    return requests


_REQUESTS = _requests()
PROFILER = _Profiler()


@contextmanager
def profiled_threads() -> Iterator[None]:
    """Install the profiler in this thread and every thread started inside (the servers' pools
    start their threads on their first calls): enter before the services start."""
    threading.setprofile(PROFILER)
    sys.setprofile(PROFILER)
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


@contextmanager
def counting(engine: Engine) -> Iterator[HopCounts]:
    """Count everything every profiled thread does until the block ends, and every statement
    the ledger's engine runs (its ``before_cursor_execute``, on the thread serving the RPC)."""
    counts = HopCounts()

    def statement(*_args: object) -> None:
        counts.add(PROFILER.hop(), "statements")

    event.listen(engine, "before_cursor_execute", statement)
    PROFILER.counts = counts
    try:
        yield counts
    finally:
        PROFILER.counts = None
        event.remove(engine, "before_cursor_execute", statement)


def markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The rows as a Markdown table (bytes to the nearest 100: ids and times vary in length)."""
    lines = [
        "| hop (RPC served) | bytes in + out | serialize | parse | JSON encode | JSON decode"
        " | SHA-256 | statements |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        hop = str(row["hop"]).removeprefix("forge.continuity.v1.")
        moved = "–" if row["hop"] == CALLER else f"~{round(row['bytes'], -2):,}"
        cells = [hop, moved]
        cells += [str(row[kind]) for kind in KINDS[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    return lines
