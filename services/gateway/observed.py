"""The gateway's own observability around every HTTP request: a server span (continuing an
incoming W3C ``traceparent``), and the request count and latency by route template.

A pure ASGI middleware, so the handler runs inside the span's context: the gateway's gRPC calls
carry it on (``shared.runtime.telemetry.trace_metadata``) and the services' spans join the
caller's trace. Spans are made only where something exports them, as in every service
(shared.runtime.telemetry); the metrics are always counted.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from shared.runtime.metrics import HTTP_HANDLED, HTTP_SECONDS
from shared.runtime.telemetry import exporting

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The scope key the handler sets to the route template it matched (a bounded metrics label).
ROUTE_KEY = "forge.route"
#: The label of a request no handler named (the console's pages, unknown paths).
OTHER_ROUTE = "other"
#: Methods counted by name; any other (a client may send anything) is counted as "OTHER", so
#: the label's values stay bounded.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_tracer = trace.get_tracer("forge.gateway")


def _headers(scope: Scope) -> dict[str, str]:
    return {
        key.decode("latin-1"): value.decode("latin-1") for key, value in scope.get("headers", [])
    }


class ObservedApp:
    """Wraps the gateway's ASGI app: one span, one count and one latency per HTTP request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = str(scope.get("method", ""))
        method = method if method in KNOWN_METHODS else "OTHER"
        status = {"code": 500}
        start = time.perf_counter()

        async def observed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
                HTTP_SECONDS.labels(method, str(scope.get(ROUTE_KEY, OTHER_ROUTE))).observe(
                    time.perf_counter() - start
                )
            await send(message)

        span: AbstractContextManager[Any] = nullcontext()
        if exporting():
            span = _tracer.start_as_current_span(
                f"HTTP {method}",
                context=propagate.extract(_headers(scope)),
                kind=SpanKind.SERVER,
                attributes={"http.request.method": method, "url.path": str(scope.get("path"))},
            )
        with span as current:
            try:
                await self.app(scope, receive, observed_send)
            finally:
                route = str(scope.get(ROUTE_KEY, OTHER_ROUTE))
                HTTP_HANDLED.labels(method, route, str(status["code"])).inc()
                if current is not None:
                    current.update_name(f"{method} {route}")
                    current.set_attribute("http.route", route)
                    current.set_attribute("http.response.status_code", status["code"])
                    if status["code"] >= 500:
                        current.set_status(Status(StatusCode.ERROR))
