"""Scenario 7: hostile input to every RPC of every service, as a caller allowed to call it.

Hypothesis generates every request message from its descriptor; on top of that each RPC gets a
4 MiB + 1 string or bytes field, 10^6 repeated elements, JSON nested 10^4 deep in every string
field, and undeclared fields. Invariant: no crash, no UNKNOWN or INTERNAL, no write by any refused
request, and the servers' memory stays bounded. Reconstruction is part of it (its own server, as
the candidate service calls it), with stored checkpoints whose envelope has the wrong shape on
top: those are typed refusals, never INTERNAL.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from sqlalchemy import Engine

from forge.continuity.v1 import reconstruction_pb2
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.continuity.canonical import canonical_bytes
from tests.admission.conftest import Stack
from tests.reconstruction.conftest import load_case
from tests.reliability.messages import (
    build,
    field_values,
    million_repeated,
    string_fields,
    unknown_field,
)
from tests.reliability.scale import FULL, report, scale
from tests.shared.runtime.test_auth_matrix import EXPECTED, METHODS
from tests.support import ROLE_TOKENS, Served, row_counts, serve

EXAMPLES = scale(fast=3, full=60)
FORBIDDEN = (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)
HUGE = 4 * 1024 * 1024 + 1
DEEP_JSON = "[" * 10_000 + "]" * 10_000
DEEP_OBJECT = '{"a":' * 10_000 + "1" + "}" * 10_000
# Every RPC of every service; the fast slice takes every fourth method and every reconstruction
# RPC (whose inputs are the most hostile: stored bytes), the full run takes them all.
SERVED = sorted(EXPECTED)
RECONSTRUCTION = [m for m in SERVED if METHODS[m][0] == "ReconstructionService"]
SELECTED = SERVED if FULL else sorted(set(SERVED[::4]) | set(RECONSTRUCTION))
# Fields around the sealed state of a stored checkpoint, replaced by a value of the wrong shape.
MALFORMED_ENVELOPES: tuple[tuple[str, object], ...] = (
    ("runtime", []),
    ("run", "run"),
    ("provider", {"model": 1}),
    ("format", 3),
)
MEMORY_BOUND_MIB = 512


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.fixture(scope="module")
def reconstruction() -> Iterator[Served]:
    with serve("reconstruction", reconstruction_bindings()) as served:
        yield served


def _served(stack: Stack, reconstruction: Served, method: str) -> Served:
    service = METHODS[method][0]
    return {
        "CandidateService": stack.candidate,
        "AdmissionService": stack.admission,
        "ReconstructionService": reconstruction,
    }.get(str(service), stack.ledger)


def _token(method: str) -> str:
    return ROLE_TOKENS[sorted(EXPECTED[method])[0]]


class Caller:
    """Sends raw request bytes and checks the invariant of every call."""

    def __init__(self, stack: Stack, engine: Engine, reconstruction: Served) -> None:
        self.stack, self.engine, self.reconstruction = stack, engine, reconstruction
        self.calls = 0
        self.codes: dict[str, int] = {}
        self.accepted_writes: dict[str, int] = {}
        self.violations: list[str] = []

    def send(self, method: str, raw: bytes, label: str) -> None:
        served = _served(self.stack, self.reconstruction, method)
        streaming = bool(METHODS[method][2])
        before = row_counts(self.engine)
        channel = served.channel(_token(method))
        identity: Callable[[bytes], bytes] = lambda data: data  # noqa: E731
        code = grpc.StatusCode.OK
        try:
            if streaming:
                stream = channel.unary_stream(method, request_serializer=identity)
                for _ in stream(raw, timeout=5):
                    break
            else:
                channel.unary_unary(method, request_serializer=identity)(raw, timeout=30)
        except grpc.RpcError as error:
            code = error.code()  # type: ignore[attr-defined]
        finally:
            channel.close()
        self.calls += 1
        self.codes[code.name] = self.codes.get(code.name, 0) + 1
        wrote = row_counts(self.engine) != before
        if code in FORBIDDEN:
            self.violations.append(f"{method} {label}: {code.name}")
        elif code == grpc.StatusCode.DEADLINE_EXCEEDED and not streaming:
            self.violations.append(f"{method} {label}: hung")
        elif wrote and code != grpc.StatusCode.OK:
            self.violations.append(f"{method} {label}: refused with {code.name} but wrote")
        elif wrote:
            self.accepted_writes[method] = self.accepted_writes.get(method, 0) + 1


def _generate(caller: Caller, method: str) -> None:
    """EXAMPLES requests generated from the method's request descriptor."""
    request_class = METHODS[method][1]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(field_values(request_class.DESCRIPTOR))  # type: ignore[attr-defined]
    def generated(values: dict[str, object]) -> None:
        message = build(request_class, values)  # type: ignore[arg-type]
        caller.send(method, message.SerializeToString(), "generated")

    generated()


def _malformed_checkpoints(caller: Caller) -> None:
    """Stored-checkpoint-shaped input whose envelope has the wrong shape, to every
    reconstruction RPC that reads a checkpoint (historical or derived)."""
    case = load_case("v1_basic")
    for key, value in MALFORMED_ENVELOPES:
        envelope = json.loads(case.checkpoint)
        envelope[key] = value
        checkpoint = canonical_bytes(envelope)
        for method in RECONSTRUCTION:
            message = METHODS[method][1]()  # type: ignore[operator]
            names = {f.name for f in message.DESCRIPTOR.fields}
            for field in ("checkpoint", "derived_checkpoint"):
                if field in names:
                    setattr(message, field, checkpoint)
            if "raw_response" in names:
                message.raw_response = case.raw_response
            if "consumed_at" in names:
                message.consumed_at = case.consumed_at
            if "version" in names:
                message.version = reconstruction_pb2.RECONSTRUCTION_VERSION_V1
            caller.send(method, message.SerializeToString(), f"malformed envelope /{key}")


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_hostile_input_never_crashes_or_writes_on_refusal(
    stack: Stack, engine: Engine, reconstruction: Served
) -> None:
    caller = Caller(stack, engine, reconstruction)
    _malformed_checkpoints(caller)
    rss_before = _rss_mib()
    for method in SELECTED:
        request_class = METHODS[method][1]

        _generate(caller, method)
        caller.send(method, million_repeated(request_class), "10^6 repeated")  # type: ignore[arg-type]
        caller.send(method, unknown_field(4_321, b"surprise" * 64), "unknown field")
        for field in string_fields(request_class):  # type: ignore[arg-type]
            huge: str | bytes = "x" * HUGE if field.type == field.TYPE_STRING else b"x" * HUGE
            deep: str | bytes = DEEP_JSON if field.type == field.TYPE_STRING else DEEP_JSON.encode()
            for label, value in (("4MiB+1", huge), ("deep json", deep)):
                message = request_class()  # type: ignore[operator]
                setattr(message, field.name, value)
                caller.send(method, message.SerializeToString(), f"{label} in {field.name}")
            if field.type == field.TYPE_STRING and "json" in field.name:
                message = request_class()  # type: ignore[operator]
                setattr(message, field.name, DEEP_OBJECT)
                caller.send(method, message.SerializeToString(), f"deep object in {field.name}")
    growth = _rss_mib() - rss_before
    report(
        "hostile_input",
        methods=len(SELECTED),
        calls=caller.calls,
        codes=caller.codes,
        accepted_writes=caller.accepted_writes or 0,
        violations=len(caller.violations),
        rss_growth_mib=round(growth, 1),
    )
    assert caller.violations == [], caller.violations[:20]
    assert growth < MEMORY_BOUND_MIB
    json.dumps(caller.codes)  # the figures are plain data
