"""One admission read-back across two services is one trace; downstream calls never outlive the
inbound deadline; downstream refusals keep their reason."""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest
from opentelemetry import propagate
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from forge.continuity.v1 import admission_pb2, admission_pb2_grpc, ledger_pb2, ledger_pb2_grpc
from services.admission.servicer import bindings as admission_bindings
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from shared.contract.channels import open_channel
from shared.runtime.deadline import reset_inbound_deadline, set_inbound_deadline
from shared.runtime.telemetry import RecordWhileExported, add_span_processor
from tests.errors import expect_error
from tests.ledger.conftest import run_request
from tests.support import Served, admission_downstream, serve

EXPORTER = InMemorySpanExporter()
add_span_processor(SimpleSpanProcessor(EXPORTER))


@pytest.fixture
def two_services(ledger: Ledger) -> Iterator[tuple[Served, Served]]:
    with serve("ledger", ledger_bindings(ledger)) as ledger_served:
        # Only the ledger is reached by a read-back; the other targets are never dialled.
        downstream = admission_downstream(ledger_served.target, "127.0.0.1:1")
        with serve("admission", admission_bindings(downstream)) as admission_served:
            yield ledger_served, admission_served


def test_a_call_across_two_services_is_one_trace(two_services: tuple[Served, Served]) -> None:
    _ledger, admission = two_services
    EXPORTER.clear()
    stub = admission_pb2_grpc.AdmissionServiceStub(open_channel(admission.target, "reader-token"))
    # The ledger's refusal travels back through admission with its own reason.
    expect_error(
        grpc.StatusCode.NOT_FOUND,
        "ADMISSION_NOT_FOUND",
        lambda: stub.GetInvalidReadContinuity(
            admission_pb2.GetInvalidReadContinuityRequest(run_id="run-1", request_id="req-1")
        ),
    )
    wanted = {
        "/forge.continuity.v1.LedgerService/GetAdmission",
        "/forge.continuity.v1.AdmissionService/GetInvalidReadContinuity",
    }
    # Other tests' streams may still be finishing spans in the background: look only at ours.
    spans = [span for span in EXPORTER.get_finished_spans() if span.name in wanted]
    names = sorted(span.name for span in spans)
    # Each hop is a client span and a server span.
    assert names == sorted([*wanted, *wanted])
    assert len({span.context.trace_id for span in spans}) == 1
    assert sum(1 for span in spans if span.parent is None) == 1


def test_downstream_calls_are_capped_at_the_inbound_deadline(
    two_services: tuple[Served, Served],
) -> None:
    ledger_served, _ = two_services
    ledger_pb2_grpc.LedgerServiceStub(ledger_served.channel("writer-token")).CreateRun(
        run_request()
    )
    follow = ledger_pb2_grpc.LedgerServiceStub(
        open_channel(ledger_served.target, "reader-token", default_timeout=30)
    )
    token = set_inbound_deadline(0.5)
    started = time.monotonic()
    try:
        with pytest.raises(grpc.RpcError) as caught:
            # A following stream never ends by itself: only the propagated deadline stops it.
            for _ in follow.StreamJournal(
                ledger_pb2.StreamJournalRequest(run_id="run-1", follow=True)
            ):
                pass
    finally:
        reset_inbound_deadline(token)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED  # type: ignore[attr-defined]
    assert time.monotonic() - started < 5


def test_a_process_that_exports_nothing_records_no_spans_but_still_propagates_context() -> None:
    sampler = RecordWhileExported()
    provider = TracerProvider(sampler=sampler)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("silent") as span:
        assert not span.is_recording()
        carried: dict[str, str] = {}
        propagate.inject(carried)
    # The callee still receives a trace to join (unsampled: nothing upstream recorded it).
    version, trace_id, _span_id, flags = carried["traceparent"].split("-")
    assert version == "00" and int(trace_id, 16) != 0
    assert int(flags, 16) & 1 == 0
    sampler.export_started()
    with tracer.start_as_current_span("heard") as span:
        assert span.is_recording()
        assert span.get_span_context().trace_flags.sampled
