"""The gateway continues the caller's trace: an incoming ``traceparent`` becomes the parent of
the gateway's server span, and the ledger's span for the gRPC call it makes joins the same
trace. Each request is also counted and timed by route template."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import REGISTRY

from forge.continuity.v1 import ledger_pb2_grpc
from services.gateway.config import GatewaySettings
from services.ledger.database import make_engine, upgrade
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from shared.runtime.telemetry import add_span_processor
from tests.gateway.conftest import running_gateway
from tests.ledger.conftest import run_request
from tests.support import Served, serve, token_roles

EXPORTER = InMemorySpanExporter()
add_span_processor(SimpleSpanProcessor(EXPORTER))
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN_ID = "00f067aa0ba902b7"
LEDGER_GET_RUN = "/forge.continuity.v1.LedgerService/GetRun"
ROUTE = "/api/v1/runs/{run_id}"


def gateway_span_of(trace_id: int | None = None) -> ReadableSpan:
    """The gateway's finished server span (of ``trace_id``, when given). The response reaches
    the client just before the middleware ends the span, so wait for it, boundedly."""
    deadline = time.monotonic() + 10
    while True:
        found = [
            s
            for s in EXPORTER.get_finished_spans()
            if s.name == f"GET {ROUTE}" and trace_id in (None, s.context.trace_id)
        ]
        if found or time.monotonic() > deadline:
            assert len(found) == 1, found
            return found[0]
        time.sleep(0.01)


@pytest.fixture
def ledger_behind_gateway(tmp_path: Path) -> Iterator[tuple[Served, str]]:
    engine = make_engine(f"sqlite:///{tmp_path}/ledger.db")
    upgrade(engine)
    with serve("ledger", ledger_bindings(Ledger(engine, authority=token_roles))) as ledger:
        # Only the ledger's routes are called; every server name points at it.
        targets = dict.fromkeys(("ledger", "candidate", "admission"), ledger.target)
        with running_gateway(GatewaySettings(targets=targets)) as url:
            yield ledger, url
    engine.dispose()


def test_a_traceparent_reaches_the_ledgers_span(
    ledger_behind_gateway: tuple[Served, str],
) -> None:
    ledger, url = ledger_behind_gateway
    ledger_pb2_grpc.LedgerServiceStub(ledger.channel("writer-token")).CreateRun(run_request())
    EXPORTER.clear()
    before = REGISTRY.get_sample_value(
        "forge_http_requests_total", {"method": "GET", "route": ROUTE, "code": "200"}
    )
    reply = httpx2.get(
        f"{url}/api/v1/runs/run-1",
        headers={
            "authorization": "Bearer reader-token",
            "traceparent": f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01",
        },
        timeout=30,
    )
    assert reply.status_code == 200, reply.text
    gateway = gateway_span_of(int(TRACE_ID, 16))
    assert gateway.kind == SpanKind.SERVER
    assert gateway.parent is not None and gateway.parent.span_id == int(PARENT_SPAN_ID, 16)
    assert gateway.attributes is not None and gateway.attributes["http.route"] == ROUTE
    spans = [s for s in EXPORTER.get_finished_spans() if s.context.trace_id == int(TRACE_ID, 16)]
    served = [s for s in spans if s.name == LEDGER_GET_RUN and s.kind == SpanKind.SERVER]
    assert len(served) == 1
    assert served[0].parent is not None
    assert served[0].parent.span_id == gateway.context.span_id
    after = REGISTRY.get_sample_value(
        "forge_http_requests_total", {"method": "GET", "route": ROUTE, "code": "200"}
    )
    assert (after or 0) - (before or 0) == 1  # counted before the span ended


def test_without_a_traceparent_the_gateway_starts_the_trace(
    ledger_behind_gateway: tuple[Served, str],
) -> None:
    _ledger, url = ledger_behind_gateway
    EXPORTER.clear()
    reply = httpx2.get(
        f"{url}/api/v1/runs/missing", headers={"authorization": "Bearer reader-token"}, timeout=30
    )
    assert reply.status_code == 404
    gateway = gateway_span_of()
    assert gateway.parent is None
    spans = EXPORTER.get_finished_spans()
    served = [s for s in spans if s.name == LEDGER_GET_RUN and s.kind == SpanKind.SERVER]
    assert [s.context.trace_id for s in served] == [gateway.context.trace_id]
