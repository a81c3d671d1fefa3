"""Prometheus metrics of every service process, and the `/metrics` endpoint that serves them.

The metric objects live here, once, so every name the dashboard (deploy/grafana-dashboard.json)
and the alerts (deploy/prometheus-alerts.yaml) use is declared in one module. Other modules call
the thin hooks below (``observe_policy_lock_wait``, ``count_cap_refusal``) or hand a callable to
:func:`export_at_scrape`, which is asked for its values only when Prometheus scrapes: gauges
read from the database or from an object's counters cost nothing between scrapes, and the code
that owns those values imports nothing from prometheus_client.

Each service serves its metrics on its own port (``FORGE_<SERVICE>_METRICS_PORT``; unset or 0:
no endpoint, the default outside ``make run`` and the deploy files).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import grpc
import prometheus_client
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2
from prometheus_client.core import REGISTRY, Metric
from prometheus_client.registry import Collector

from shared.runtime.log_context import bind_request_ids

log = logging.getLogger("forge.metrics")

# `_created` series double every counter's series count and no panel reads them.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

#: Seconds: from a cache hit (sub-millisecond) to an admission behind a contended policy lock.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

# --- every gRPC server (shared.runtime.server) ----------------------------------------------
RPC_HANDLED = prometheus_client.Counter(
    "forge_grpc_server_handled",
    "RPCs finished, by method, gRPC status code and machine-readable reason (ErrorInfo.reason; "
    '"" for OK and for statuses without one)',
    ["grpc_service", "grpc_method", "grpc_code", "reason"],
)
RPC_SECONDS = prometheus_client.Histogram(
    "forge_grpc_server_handling_seconds",
    "Time from a handler's start to its last response (a follower stream: its whole life)",
    ["grpc_service", "grpc_method", "grpc_type"],
    buckets=LATENCY_BUCKETS,
)

# --- the ledger -----------------------------------------------------------------------------
POLICY_LOCK_WAIT = prometheus_client.Histogram(
    "forge_ledger_policy_lock_wait_seconds",
    "Time a write transaction waited for the policy lock (PostgreSQL; on SQLite "
    "BEGIN IMMEDIATE already serialized the writer, so this is the read alone)",
    buckets=LATENCY_BUCKETS,
)
POLICY_LOCK_HOLD = prometheus_client.Histogram(
    "forge_ledger_policy_lock_hold_seconds",
    "Time a write transaction held the policy lock, from the lock to its commit or rollback, by "
    "mode (shared: the fenced worker writes and admissions; exclusive: policy writes, "
    "recoveries, reconciliations; ADR 0049)",
    ["mode"],
    buckets=LATENCY_BUCKETS,
)
PENDING_SLOT_HOLD = prometheus_client.Histogram(
    "forge_ledger_pending_slot_hold_seconds",
    "Time an admission held the pending cap's counter row, from the statement that took its "
    "place to its commit: the one row admissions still take one at a time (ADR 0049)",
    buckets=LATENCY_BUCKETS,
)
CAP_REFUSALS = prometheus_client.Counter(
    "forge_ledger_cap_refusals",
    "Admissions refused by a ticket cap (reason PENDING_TICKET_LIMIT or PER_RUN_TICKET_LIMIT)",
    ["reason"],
)
JOURNAL_HEAD_REFUSALS = prometheus_client.Counter(
    "forge_ledger_journal_head_refusals",
    "Appends refused because the run's head is not the one this ledger signed last (reason "
    "JOURNAL_HEAD_UNSIGNED), by finding: an alarm, the database was written around the ledger",
    ["finding"],
)

# --- the HTTP gateway -----------------------------------------------------------------------
HTTP_HANDLED = prometheus_client.Counter(
    "forge_http_requests",
    "HTTP requests the gateway answered, by method, route template and status code",
    ["method", "route", "code"],
)
HTTP_SECONDS = prometheus_client.Histogram(
    "forge_http_request_duration_seconds",
    "Time from a request's arrival to its response headers, by method and route template",
    ["method", "route"],
    buckets=LATENCY_BUCKETS,
)


def observe_policy_lock_wait(seconds: float) -> None:
    POLICY_LOCK_WAIT.observe(seconds)


def observe_policy_lock_hold(mode: str, seconds: float) -> None:
    POLICY_LOCK_HOLD.labels(mode).observe(seconds)


def observe_pending_slot_hold(seconds: float) -> None:
    PENDING_SLOT_HOLD.observe(seconds)


def count_cap_refusal(reason: str) -> None:
    CAP_REFUSALS.labels(reason).inc()


def count_journal_head_refusal(finding: str) -> None:
    JOURNAL_HEAD_REFUSALS.labels(finding).inc()


def declare_journal_head_findings(findings: tuple[str, ...]) -> None:
    """Export every finding at 0 before the first refusal, so an alert sees the series."""
    for finding in findings:
        JOURNAL_HEAD_REFUSALS.labels(finding)


# --- values read at scrape time -------------------------------------------------------------

#: A producer of metric families (prometheus_client.core.GaugeMetricFamily and friends).
Produce = Callable[[], Iterable[Metric]]


class ScrapeTimeCollector(Collector):
    """Families computed when Prometheus scrapes, from producers registered by key. A later
    registration under the same key replaces the earlier one (one ledger per process; tests
    build several). A producer that fails is logged and left out of that scrape only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._producers: dict[str, Produce] = {}

    def set(self, key: str, produce: Produce) -> None:
        with self._lock:
            self._producers[key] = produce

    def describe(self) -> Iterable[Metric]:
        return ()  # registering must not run the producers (they may query a database)

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            producers = list(self._producers.items())
        for key, produce in producers:
            try:
                families = list(produce())
            except Exception:
                log.warning("metrics source %s failed; left out of this scrape", key, exc_info=True)
                continue
            yield from families


SCRAPE_TIME = ScrapeTimeCollector()
REGISTRY.register(SCRAPE_TIME)


def export_at_scrape(key: str, produce: Produce) -> None:
    """Ask ``produce`` for its families at every scrape (replacing an earlier one under ``key``)."""
    SCRAPE_TIME.set(key, produce)


# --- the endpoint ---------------------------------------------------------------------------


class MetricsEndpoint:
    """``GET /metrics`` on ``host:port`` in a daemon thread; ``stop`` closes it."""

    def __init__(self, host: str, port: int) -> None:
        self.server, self._thread = prometheus_client.start_http_server(port, addr=host)
        self.port = int(self.server.server_address[1])

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve_metrics(host: str, port: int) -> MetricsEndpoint | None:
    """The process's metrics endpoint, or None when ``port`` is 0 (metrics off)."""
    if port <= 0:
        return None
    endpoint = MetricsEndpoint(host, port)
    log.info("metrics on http://%s:%d/metrics", host, endpoint.port)
    return endpoint


# --- the server interceptor -----------------------------------------------------------------

_DETAILS_KEY = "grpc-status-details-bin"


def _split(method: str) -> tuple[str, str]:
    """``/pkg.Service/Method`` → (``pkg.Service``, ``Method``)."""
    service, _, name = method.lstrip("/").rpartition("/")
    return service, name


def reason_of(trailing: Iterable[tuple[str, Any]] | None) -> str:
    """The ErrorInfo reason the shared error module attached to a refusal, or ""."""
    for key, value in trailing or ():
        if key != _DETAILS_KEY:
            continue
        try:
            status = status_pb2.Status.FromString(value)
        except DecodeError:
            return ""  # not the shared error module's: no reason to report
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                return str(info.reason)
    return ""


def _code_name(context: grpc.ServicerContext, unset: str) -> str:
    """The status code the handler left on ``context``; ``unset`` when it set none (OK for a
    handler that returned, UNKNOWN for one that raised, CANCELLED for a stream the caller left)."""
    code = context.code()  # type: ignore[attr-defined]  # grpcio >= 1.38; the stubs lag
    return unset if code is None else str(code.name)


if TYPE_CHECKING:
    Handler = grpc.RpcMethodHandler[Any, Any]
else:
    Handler = grpc.RpcMethodHandler


#: The (code, reason) series every served method has from its registration on, at 0: a counter
#: created on first use has no earlier sample, so rate() and increase() miss a process's first
#: INTERNAL or database timeout, and the alerts reading them stay silent (issue 46 §3).
ZERO_OUTCOMES: tuple[tuple[str, str], ...] = (
    ("OK", ""),
    ("INTERNAL", "INTERNAL_ERROR"),
    ("UNAVAILABLE", "DATABASE_TIMEOUT"),
    ("UNAVAILABLE", "DATABASE_UNAVAILABLE"),
)


def counted(method: str, handler: Handler) -> Handler:
    """``handler`` of ``method`` (``/pkg.Service/Method``), counted and timed by status code and
    the reason the shared error module attached, with the request's run and request ids bound
    to the log lines it writes (shared.runtime.log_context). The server wraps each method's
    handler once, when it registers it (shared.runtime.server.start_server), outside the call
    policy, so authentication and authorization refusals are counted too."""
    service, name = _split(method)
    if handler.unary_unary or handler.unary_stream:
        for code, reason in ZERO_OUTCOMES:
            RPC_HANDLED.labels(service, name, code, reason)
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(
            _counted_unary(handler.unary_unary, service, name),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(
            _counted_stream(handler.unary_stream, service, name),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    return handler


def count_gate_refusal(method: str, code: str, reason: str) -> None:
    """A call the gate (shared.runtime.gate) refused before its handler ran."""
    service, name = _split(method)
    RPC_HANDLED.labels(service, name, code, reason).inc()


class _Outcomes:
    """One method's series, each resolved once: ``labels()`` takes a lock and builds a key on
    every call otherwise. Created on first use (ZERO_OUTCOMES exist from registration, at 0)."""

    __slots__ = ("_handled", "_name", "_seconds", "_service")

    def __init__(self, service: str, name: str) -> None:
        self._service, self._name = service, name
        self._handled: dict[tuple[str, str], Any] = {}
        self._seconds: dict[str, Any] = {}

    def finish(self, context: grpc.ServicerContext, kind: str, start: float, unset: str) -> None:
        code = _code_name(context, unset)
        reason = "" if code == "OK" else reason_of(context.trailing_metadata())  # type: ignore[attr-defined]
        handled = self._handled.get((code, reason))
        if handled is None:
            handled = RPC_HANDLED.labels(self._service, self._name, code, reason)
            self._handled[(code, reason)] = handled
        handled.inc()
        seconds = self._seconds.get(kind)
        if seconds is None:
            seconds = self._seconds[kind] = RPC_SECONDS.labels(self._service, self._name, kind)
        seconds.observe(time.perf_counter() - start)


def _counted_unary(
    behaviour: Callable[[Any, grpc.ServicerContext], Any], service: str, name: str
) -> Callable[[Any, grpc.ServicerContext], Any]:
    outcomes = _Outcomes(service, name)

    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        start, unset = time.perf_counter(), "UNKNOWN"
        with bind_request_ids(request):
            try:
                response = behaviour(request, context)
                unset = "OK"
                return response
            finally:
                outcomes.finish(context, "unary", start, unset)

    return handle


def _counted_stream(
    behaviour: Callable[[Any, grpc.ServicerContext], Iterator[Any]], service: str, name: str
) -> Callable[[Any, grpc.ServicerContext], Iterator[Any]]:
    outcomes = _Outcomes(service, name)

    def handle(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        start, unset = time.perf_counter(), "UNKNOWN"
        with bind_request_ids(request):
            try:
                yield from behaviour(request, context)
                unset = "OK"
            except GeneratorExit:
                unset = "CANCELLED"  # the caller went away mid-stream
                raise
            finally:
                outcomes.finish(context, "server_stream", start, unset)

    return handle


def counter_family(
    name: str, documentation: str, label: str, values: Mapping[str, float]
) -> Metric:
    """A counter family with one label, from a snapshot of counts (read at scrape time)."""
    family = prometheus_client.core.CounterMetricFamily(name, documentation, labels=[label])
    for value_label, value in sorted(values.items()):
        family.add_metric([value_label], value)
    return family


def gauge_family(
    name: str, documentation: str, value: float | None = None, **labelled: Mapping[str, float]
) -> Metric:
    """A gauge family: one unlabelled ``value``, or one label (the keyword's name) with values."""
    if value is not None:
        return prometheus_client.core.GaugeMetricFamily(name, documentation, value=value)
    ((label, values),) = labelled.items()
    family = prometheus_client.core.GaugeMetricFamily(name, documentation, labels=[label])
    for value_label, count in sorted(values.items()):
        family.add_metric([value_label], count)
    return family


class CacheCounts(Protocol):
    """What a cache reports (shared.runtime.content_cache.ContentCache)."""

    hits: int
    misses: int

    @property
    def held_bytes(self) -> int: ...


def cache_families(prefix: str, caches: Mapping[str, CacheCounts]) -> Iterator[Metric]:
    """``<prefix>_hits_total``, ``_misses_total`` and ``_bytes`` of each named cache."""
    yield counter_family(
        f"{prefix}_hits",
        "Results served from the cache, by cache",
        "cache",
        {name: cache.hits for name, cache in caches.items()},
    )
    yield counter_family(
        f"{prefix}_misses",
        "Results computed because the cache did not hold them, by cache",
        "cache",
        {name: cache.misses for name, cache in caches.items()},
    )
    yield gauge_family(
        f"{prefix}_bytes",
        "Approximate bytes the cache holds, by cache",
        cache={name: cache.held_bytes for name, cache in caches.items()},
    )
