"""OpenTelemetry set-up: every RPC is a span, and trace context crosses service boundaries.

Spans are exported over OTLP/gRPC only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; by default
nothing is printed or sent. Tests attach an in-memory exporter with :func:`add_span_processor`.

A process that exports nothing records nothing either (:class:`RecordWhileExported`), and its
servers and channels skip the tracing interceptors (:func:`exporting`): building, timing and
closing a span on every hop, and formatting a traceback for every refusal, cost about a tenth of
an admission's CPU for spans nobody could ever read (docs/performance-history.md, round 3). Set the
exporter in every service (the deployment files set one endpoint for all): a service that
exports nothing passes no trace context on to its callees.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import (
    Decision,
    Sampler,
    SamplingResult,
    _get_from_env_or_default,
)
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

_lock = threading.Lock()
_provider: TracerProvider | None = None


class RecordWhileExported(Sampler):
    """Drop every span until something exports spans, then decide as ``delegate`` does (the
    SDK's sampler from ``OTEL_TRACES_SAMPLER``, parent-based always-on by default)."""

    def __init__(self, delegate: Sampler | None = None) -> None:
        self._delegate = delegate if delegate is not None else _get_from_env_or_default()
        self._exporting = threading.Event()

    def export_started(self) -> None:
        self._exporting.set()

    @property
    def exporting(self) -> bool:
        return self._exporting.is_set()

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        if not self._exporting.is_set():
            return SamplingResult(Decision.DROP)
        return self._delegate.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        return f"RecordWhileExported{{{self._delegate.get_description()}}}"


_sampler = RecordWhileExported()


def configure_tracing(service_name: str) -> TracerProvider:
    """The process tracer provider, installed on first use (later calls return the same one)."""
    global _provider
    with _lock:
        if _provider is None:
            name = os.environ.get("OTEL_SERVICE_NAME") or f"forge-continuity-{service_name}"
            _provider = TracerProvider(
                resource=Resource.create({"service.name": name}), sampler=_sampler
            )
            if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                    OTLPSpanExporter,
                )

                _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
                _sampler.export_started()
            trace.set_tracer_provider(_provider)
        return _provider


def exporting() -> bool:
    """Whether this process exports spans (an OTLP endpoint is set, or a processor was added):
    only then do servers and channels run the tracing interceptors at all."""
    return _sampler.exporting or bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def add_span_processor(processor: SpanProcessor) -> None:
    """Attach another processor (tests use an in-memory exporter); spans are recorded from now."""
    configure_tracing("process").add_span_processor(processor)
    _sampler.export_started()


def trace_metadata() -> list[tuple[str, str]]:
    """The current trace context as gRPC metadata (``traceparent``, ``tracestate``), for a
    caller that does not go through the tracing client interceptor (the HTTP gateway's aio
    channels); empty when this process exports nothing or no span is active."""
    if not exporting():
        return []
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return sorted(carrier.items())
