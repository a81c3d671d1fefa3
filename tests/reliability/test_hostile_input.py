"""Scenario 7: hostile input to every RPC of every service, as a caller allowed to call it.

Hypothesis generates every request message from its descriptor; on top of that each RPC gets a
4 MiB + 1 string or bytes field, 10^6 repeated elements, JSON nested 10^4 deep in every string
field, and undeclared fields. Invariant: no crash, no UNKNOWN or INTERNAL, no write by any refused
request, and the servers' memory stays bounded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from sqlalchemy import Engine

from tests.admission.conftest import Stack
from tests.reliability.messages import (
    build,
    field_values,
    million_repeated,
    string_fields,
    unknown_field,
)
from tests.reliability.scale import FULL, report, scale
from tests.shared.runtime.test_auth_matrix import EXPECTED, METHODS
from tests.support import ROLE_TOKENS, Served, row_counts

EXAMPLES = scale(fast=3, full=60)
FORBIDDEN = (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)
HUGE = 4 * 1024 * 1024 + 1
DEEP_JSON = "[" * 10_000 + "]" * 10_000
DEEP_OBJECT = '{"a":' * 10_000 + "1" + "}" * 10_000
# The services this stack serves (the reconstruction server is not part of it); the fast slice
# takes every fourth method, the full run takes them all.
SERVED = sorted(m for m in EXPECTED if METHODS[m][0] != "ReconstructionService")
SELECTED = SERVED if FULL else SERVED[::4]
MEMORY_BOUND_MIB = 512


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _served(stack: Stack, method: str) -> Served:
    service = METHODS[method][0]
    return {"CandidateService": stack.candidate, "AdmissionService": stack.admission}.get(
        str(service), stack.ledger
    )


def _token(method: str) -> str:
    return ROLE_TOKENS[sorted(EXPECTED[method])[0]]


class Caller:
    """Sends raw request bytes and checks the invariant of every call."""

    def __init__(self, stack: Stack, engine: Engine) -> None:
        self.stack, self.engine = stack, engine
        self.calls = 0
        self.codes: dict[str, int] = {}
        self.accepted_writes: dict[str, int] = {}
        self.violations: list[str] = []

    def send(self, method: str, raw: bytes, label: str) -> None:
        served = _served(self.stack, method)
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


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_hostile_input_never_crashes_or_writes_on_refusal(stack: Stack, engine: Engine) -> None:
    caller = Caller(stack, engine)
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
