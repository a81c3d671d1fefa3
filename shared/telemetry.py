"""OpenTelemetry set-up: every RPC is a span, and trace context crosses service boundaries.

Spans are exported over OTLP/gRPC only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; by default
nothing is printed or sent. Tests attach an in-memory exporter with :func:`add_span_processor`.
"""

from __future__ import annotations

import os
import threading

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

_lock = threading.Lock()
_provider: TracerProvider | None = None


def configure_tracing(service_name: str) -> TracerProvider:
    """The process tracer provider, installed on first use (later calls return the same one)."""
    global _provider
    with _lock:
        if _provider is None:
            name = os.environ.get("OTEL_SERVICE_NAME") or f"forge-continuity-{service_name}"
            _provider = TracerProvider(resource=Resource.create({"service.name": name}))
            if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                    OTLPSpanExporter,
                )

                _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            trace.set_tracer_provider(_provider)
        return _provider


def add_span_processor(processor: SpanProcessor) -> None:
    """Attach another processor (tests use an in-memory exporter)."""
    configure_tracing("process").add_span_processor(processor)
