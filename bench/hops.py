"""Per hop, the work one admission costs, counted rather than timed (issue 50 §2): bytes moved
over each gRPC hop, protobuf messages serialized and parsed, JSON documents written and parsed,
SHA-256 digests finished, signatures made and checked, and SQL statements, each attributed to
the service whose thread did it.

Counting is deterministic, so unlike the timed figures it means the same on a busy machine.
``python -m bench hops`` (``make bench-hops``) runs the four services in this process on loopback
ports (each server's pool threads carry its service's name, which is how work is attributed;
reconstruction computes in the calling thread instead of a worker process, and the bytes such a
worker would be sent and answer are counted as their own hop), seeds held runs, reads each
run's candidate as the operator does before admitting (not counted, as in figure 1), then counts
``ADMISSIONS`` admissions and reports the per-admission mean. Writes
bench/results/hops.json and prints the table docs/performance.md shows.

How the counts are taken: a profile hook (``threading.setprofile``) sees every call a Python
frame makes into C and every Python function call; a call is counted by what it is
(``SerializeToString``, ``FromString``/``ParseFromString``, ``json.loads``, ``rfc8785.dumps``,
a hash's ``digest``/``hexdigest``, an Ed25519 key's ``sign``/``verify``); statements come from
SQLAlchemy's ``before_cursor_execute`` event; bytes from a client interceptor on every channel
between services (``ByteSize`` of each request and response)."""

from __future__ import annotations

import json
import pickle
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import grpc
from sqlalchemy import Engine, event

from bench.figures import submission
from bench.stack import bench_schema
from forge.continuity.v1 import (
    admission_pb2,
    admission_pb2_grpc,
    candidate_pb2,
    candidate_pb2_grpc,
    common_pb2,
    ledger_pb2_grpc,
    policy_pb2,
    policy_pb2_grpc,
)
from services.admission.downstream import Downstream
from services.admission.servicer import bindings as admission_bindings
from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings as candidate_bindings
from services.demo.seed import load_fixture, seed_held_run
from services.ledger.database import make_engine, migrate
from services.ledger.domain.signing import HeadSigner
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from services.reconstruction.isolation import InProcessRunner
from services.reconstruction.servicer import ReconstructionServicer
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.contract.channels import open_channel
from tests.support import serve, token_roles

T = TypeVar("T")
ADMISSIONS = 20
RESULTS = Path(__file__).resolve().parent / "results"
SERVICES = ("admission", "candidate", "reconstruction", "ledger")
FIXTURE = load_fixture("v1_basic")

#: Calls into C counted by their name: the kind of work each is.
C_CALLS = {
    "SerializeToString": "protobuf serialized",
    "FromString": "protobuf parsed",
    "ParseFromString": "protobuf parsed",
    "MergeFromString": "protobuf parsed",
    "digest": "SHA-256 digests",
    "hexdigest": "SHA-256 digests",
}
#: Python functions counted by (file name ending, function name).
PY_CALLS = {
    ("json/__init__.py", "loads"): "JSON parsed",
    ("json/__init__.py", "dumps"): "JSON written",
    ("rfc8785/_impl.py", "dumps"): "JSON written",
}
KINDS = (
    "protobuf serialized",
    "protobuf parsed",
    "JSON written",
    "JSON parsed",
    "SHA-256 digests",
    "signatures made",
    "signatures checked",
    "statements",
    "transactions",
)


#: Helpers whose callers are the interesting site: a count names the first frame outside them.
_HELPERS = ("canonical.py", "canonical_fast.py", "client.py", "gate.py", "hops.py")


def _site(frame: FrameType | None) -> str:
    """Where a counted call was made: the first frame of the project's own code at or above
    ``frame`` outside its serialization helpers, as ``file:function``."""
    helper = ""
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if "site-packages" not in path.parts and not path.name.startswith("<"):
            if path.name not in _HELPERS or "lib" in path.parts[-3:-1]:
                label = f"{path.name}:{frame.f_code.co_name}"
                return f"{label} via {helper}" if helper else label
            helper = helper or f"{path.name}:{frame.f_code.co_name}"
        frame = frame.f_back
    return helper or "grpc"


#: gRPC's serving thread of each server (it parses each request before the pool runs it), by
#: thread name: ``Thread-N (_serve)`` names no service, so each is noted as its server starts.
_SERVING: dict[str, str] = {}


def _note_serving_thread(service: str) -> None:
    for thread in threading.enumerate():
        if thread.name.endswith("(_serve)") and thread.name not in _SERVING:
            _SERVING[thread.name] = service


def _scope(client: str = "operator") -> str:
    """The service whose thread this is (a pool thread ``<service>_<n>`` or its server's
    serving thread), else the calling ``client`` (the bench's main thread)."""
    name = threading.current_thread().name
    if name in _SERVING:
        return _SERVING[name]
    for service in SERVICES:
        if name.startswith(service):
            return service
    return client if name == "MainThread" else "other"


@dataclass
class Tally:
    """What was counted while ``active``: work by (scope, kind) and bytes by hop."""

    active: bool = False
    #: Who the bench's main thread calls as: the operator, a worker, a writer.
    client: str = "operator"
    work: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    statements: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    hops: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Seconds spent inside the counted calls, by (scope, kind): with the hook's own overhead, an
    #: upper bound of what the counted work costs.
    seconds: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    site_seconds: Counter[str] = field(default_factory=Counter)
    _local: threading.local = field(default_factory=threading.local)
    #: Where each counted call was made from: "<scope>: <kind> at <file>:<function>".
    sites: Counter[str] = field(default_factory=Counter)
    #: The first counted request and response message of each gRPC hop (bench.runtime_floor
    #: answers with them), kept as they are: serializing them here would count as work.
    samples: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    def add(self, scope: str, kind: str, frame: FrameType | None, *, counts: bool = True) -> str:
        site = f"{scope}: {kind} at {_site(frame)}"
        if counts:
            with self.lock:
                self.work[scope][kind] += 1
                self.sites[site] += 1
        return site

    def _open(self, key: int, scope: str, kind: str, site: str) -> None:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        stack.append((key, scope, kind, site, time.perf_counter()))

    def _close(self, key: int) -> None:
        stack = getattr(self._local, "stack", None)
        if stack and stack[-1][0] == key:
            _, scope, kind, site, began = stack.pop()
            elapsed = time.perf_counter() - began
            with self.lock:
                self.seconds[scope][kind] += elapsed
                self.site_seconds[site] += elapsed

    def profile(self, frame: FrameType, event_name: str, arg: Any) -> None:
        if not self.active:
            return
        if event_name == "c_call":
            name = getattr(arg, "__name__", "")
            kind = C_CALLS.get(name)
            counts = True
            if kind is None and getattr(arg, "__module__", "") == "orjson":
                kind = {"loads": "JSON parsed", "dumps": "JSON written"}.get(name)
                # orjson's write-back inside canonical._compact_parse is that parse's own proof
                # that the text was compact, not a document written: its time counts with the
                # parse, and it is no document of its own.
                if name == "dumps" and frame.f_code.co_name == "_compact_parse":
                    kind, counts = "JSON parsed", False
            if kind is None and name in ("sign", "verify"):
                owner = type(getattr(arg, "__self__", None))
                if "ed25519" in owner.__name__.lower() or "Ed25519" in repr(owner):
                    kind = "signatures made" if name == "sign" else "signatures checked"
            if kind is not None:
                scope = _scope(self.client)
                self._open(id(arg), scope, kind, self.add(scope, kind, frame, counts=counts))
        elif event_name in ("c_return", "c_exception"):
            self._close(id(arg))
        elif event_name == "call":
            code = frame.f_code
            for (suffix, function), kind in PY_CALLS.items():
                if code.co_name == function and code.co_filename.endswith(suffix):
                    scope = _scope(self.client)
                    self._open(id(frame), scope, kind, self.add(scope, kind, frame.f_back))
        elif event_name == "return":
            self._close(id(frame))

    def statement(self, text: str) -> None:
        if self.active:
            verb = text.lstrip().split(None, 1)[0].upper() if text.strip() else "?"
            with self.lock:
                scope = _scope(self.client)
                self.statements[scope][verb] += 1
                self.work[scope]["statements"] += 1

    def transaction(self) -> None:
        if self.active:
            with self.lock:
                self.work[_scope(self.client)]["transactions"] += 1

    def hop(self, name: str, sent: int, received: int) -> None:
        if self.active:
            with self.lock:
                hop = self.hops[name]
                hop["calls"] += 1
                hop["request bytes"] += sent
                hop["response bytes"] += received

    def sample(self, name: str, request: Any, response: Any) -> None:
        if self.active:
            with self.lock:
                self.samples.setdefault(name, (request, response))


class _CountingInterceptor(grpc.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]
    """Counts each call's request and response size on one caller's channel."""

    def __init__(self, tally: Tally, caller: str) -> None:
        self._tally, self._caller = tally, caller

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        outcome = continuation(details, request)
        method = details.method.rsplit("/", 1)[-1]
        name = f"{self._caller} -> {method}"
        try:
            response = outcome.result()
        except grpc.RpcError:
            self._tally.hop(name, request.ByteSize(), 0)
            return outcome
        self._tally.hop(name, request.ByteSize(), response.ByteSize())
        self._tally.sample(name, request, response)
        return outcome


class _CountingRunner:
    """Reconstruction's computation in the calling thread, counting the bytes a worker process
    would be sent (the pickled function and arguments) and would answer."""

    def __init__(self, tally: Tally) -> None:
        self._tally, self._inner = tally, InProcessRunner()

    def run(self, function: Callable[..., T], *args: Any) -> T:
        sent = len(pickle.dumps((function, args, None)))
        result = self._inner.run(function, *args)
        received = len(pickle.dumps(result))
        self._tally.hop(f"reconstruction -> worker {function.__name__}", sent, received)
        return result


def _channel(tally: Tally, caller: str, target: str, token: str) -> grpc.Channel:
    return grpc.intercept_channel(open_channel(target, token), _CountingInterceptor(tally, caller))


@contextmanager
def _stack(engine: Engine, tally: Tally, signed: bool = True) -> Iterator[dict[str, str]]:
    event.listen(engine, "before_cursor_execute", lambda _c, _cur, text, *_a: tally.statement(text))
    event.listen(engine, "begin", lambda _connection: tally.transaction())
    signer = HeadSigner.generate() if signed else None
    with ExitStack() as stack:
        ledger = stack.enter_context(
            serve("ledger", ledger_bindings(Ledger(engine, authority=token_roles, signer=signer)))
        )
        _note_serving_thread("ledger")
        reconstruction = stack.enter_context(
            serve(
                "reconstruction",
                reconstruction_bindings(ReconstructionServicer(runner=_CountingRunner(tally))),
            )
        )
        _note_serving_thread("reconstruction")
        sources = GrpcCandidateSources(
            _channel(tally, "candidate", ledger.target, "candidate-service-token"),
            _channel(tally, "candidate", reconstruction.target, "candidate-service-token"),
        )
        candidate = stack.enter_context(serve("candidate", candidate_bindings(sources)))
        _note_serving_thread("candidate")
        downstream = Downstream(
            ledger=ledger_pb2_grpc.LedgerServiceStub(
                _channel(tally, "admission", ledger.target, "service-token")
            ),
            candidate=candidate_pb2_grpc.CandidateServiceStub(
                _channel(tally, "admission", candidate.target, "service-token")
            ),
        )
        admission = stack.enter_context(serve("admission", admission_bindings(downstream)))
        _note_serving_thread("admission")
        yield {
            "ledger": ledger.target,
            "candidate": candidate.target,
            "admission": admission.target,
        }


@contextmanager
def counting(
    engine: Engine, client: str = "operator", *, signed: bool = True
) -> Iterator[tuple[Tally, dict[str, str]]]:
    """The four services on loopback with every count hooked, not yet active; the policy
    enabled with room for every admission a count prepares. ``signed``: the ledger signs each
    new head (one signature and one statement more a write; the timed bench's does not)."""
    tally = Tally(client=client)
    threading.setprofile(tally.profile)
    sys.setprofile(tally.profile)
    try:
        with _stack(engine, tally, signed) as targets:
            policy = policy_pb2_grpc.PolicyServiceStub(
                open_channel(targets["ledger"], "admin-token")
            )
            current = policy.GetPolicy(policy_pb2.GetPolicyRequest()).policy
            policy.PutPolicy(
                policy_pb2.PutPolicyRequest(
                    expected_revision=current.revision,
                    settings=common_pb2.PolicySettings(
                        enabled=True, window_seconds=3600, pending_ticket_limit=1_000_000
                    ),
                )
            )
            yield tally, targets
    finally:
        tally.active = False
        threading.setprofile(None)  # type: ignore[arg-type]
        sys.setprofile(None)


def prepared_submissions(
    tally: Tally, targets: dict[str, str], count: int
) -> list[admission_pb2.RequestInvalidReadContinuityRequest]:
    """``count`` held runs seeded, each candidate read as the operator does before admitting,
    and the admission request each read makes (not counted unless the tally is active)."""
    writer = ledger_pb2_grpc.LedgerServiceStub(open_channel(targets["ledger"], "writer-token"))
    candidates = candidate_pb2_grpc.CandidateServiceStub(
        _channel(tally, "operator", targets["candidate"], "operator-token")
    )
    prefix = f"hops-{uuid.uuid4().hex[:8]}"
    prepared = []
    for n in range(count):
        run_id = f"{prefix}-{n}"
        seed_held_run(writer, FIXTURE, run_id)
        read = candidates.GetInvalidReadContinuityCandidate(
            candidate_pb2.GetInvalidReadContinuityCandidateRequest(run_id=run_id)
        ).candidate
        prepared.append(submission(read, f"req-{n}"))
    return prepared


def admission_stub(tally: Tally, targets: dict[str, str]) -> Any:
    return admission_pb2_grpc.AdmissionServiceStub(
        _channel(tally, "operator", targets["admission"], "operator-token")
    )


def count_admissions(engine: Engine, admissions: int = ADMISSIONS) -> dict[str, Any]:
    """Seed ``admissions`` held runs, read each candidate, then count the admissions."""
    with counting(engine) as (tally, targets):
        admit = admission_stub(tally, targets)
        prepared = prepared_submissions(tally, targets, admissions + 1)
        admit.RequestInvalidReadContinuity(prepared[0])  # warm every path once, uncounted
        tally.active = True
        for request in prepared[1:]:
            admit.RequestInvalidReadContinuity(request)
        tally.active = False
    return _per_admission(tally, admissions)


def sample_admission(engine: Engine) -> dict[str, tuple[bytes, bytes]]:
    """One admission's request and response over each gRPC hop, serialized, by hop name
    (``<caller> -> <method>``), after one admission that warms every path."""
    with counting(engine) as (tally, targets):
        admit = admission_stub(tally, targets)
        prepared = prepared_submissions(tally, targets, 2)
        admit.RequestInvalidReadContinuity(prepared[0])
        tally.active = True
        admit.RequestInvalidReadContinuity(prepared[1])
        tally.active = False
    return {
        name: (request.SerializeToString(), response.SerializeToString())
        for name, (request, response) in tally.samples.items()
    }


def _per_admission(tally: Tally, admissions: int) -> dict[str, Any]:
    def mean(value: int) -> float:
        return round(value / admissions, 2)

    return {
        "admissions": admissions,
        "work": {
            scope: {kind: mean(tally.work[scope][kind]) for kind in KINDS}
            for scope in (tally.client, *SERVICES, "other")
            if scope in tally.work
        },
        "statements": {
            scope: {verb: mean(n) for verb, n in sorted(verbs.items())}
            for scope, verbs in tally.statements.items()
        },
        "microseconds": {
            scope: {
                kind: round(1e6 * tally.seconds[scope][kind] / admissions, 1)
                for kind in KINDS
                if tally.seconds[scope][kind]
            }
            for scope in tally.seconds
        },
        "sites": {
            site: {
                "count": mean(tally.sites[site]),
                "microseconds": round(1e6 * tally.site_seconds[site] / admissions, 1),
            }
            for site, _ in tally.site_seconds.most_common()
        },
        "hops": {
            name: {key: mean(value) for key, value in counts.items()}
            for name, counts in sorted(tally.hops.items())
        },
    }


def table(result: dict[str, Any]) -> str:
    """The markdown tables docs/performance.md shows."""
    lines = [
        "| hop (caller -> method) | calls | request bytes | response bytes |",
        "|---|---|---|---|",
    ]
    for name, counts in result["hops"].items():
        lines.append(
            f"| {name} | {counts['calls']:g} | {counts['request bytes']:,.0f} "
            f"| {counts['response bytes']:,.0f} |"
        )
    lines += ["", "| service | " + " | ".join(KINDS) + " |", "|---" * (len(KINDS) + 1) + "|"]
    for scope, kinds in result["work"].items():
        lines.append(f"| {scope} | " + " | ".join(f"{kinds[k]:g}" for k in KINDS) + " |")
    return "\n".join(lines)


@contextmanager
def counting_database(sqlite: bool) -> Iterator[Engine]:
    """A fresh, migrated database to count on: a SQLite file, or a PostgreSQL bench schema;
    removed after."""
    with ExitStack() as stack:
        if sqlite:
            url = f"sqlite:///{stack.enter_context(tempfile.TemporaryDirectory())}/hops.db"
            migrate(url)
        else:
            url = stack.enter_context(bench_schema())
        engine = make_engine(url)
        stack.callback(engine.dispose)
        yield engine


def main(sqlite: bool = False) -> dict[str, Any]:
    with counting_database(sqlite) as engine:
        result = count_admissions(engine)
    result["database"] = "sqlite" if sqlite else "postgresql"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "hops.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(table(result))

    return result


if __name__ == "__main__":
    main(sqlite="--sqlite" in sys.argv)
